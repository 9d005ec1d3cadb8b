#!/bin/sh
# Where the local redirects lead.
printf 'Content-Type: text/plain\r\n\r\n'
printf 'target reached\nREQUEST_METHOD=%s\nQUERY_STRING=%s\nSCRIPT_NAME=%s\nCONTENT_LENGTH=%s\n' \
  "$REQUEST_METHOD" "$QUERY_STRING" "$SCRIPT_NAME" "${CONTENT_LENGTH-unset}"
