#!/bin/sh
# Complains on stderr, then answers.
echo "stoa-stderr-marker $QUERY_STRING" >&2
printf 'Content-Type: text/plain\r\n\r\nok\n'
