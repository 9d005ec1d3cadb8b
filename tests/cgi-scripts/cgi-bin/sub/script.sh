#!/bin/sh
# A script in a subdirectory: reports how the server split the path.
printf 'Content-Type: text/plain\n\n'
printf 'SCRIPT_NAME=%s\n' "$SCRIPT_NAME"
printf 'PATH_INFO=%s\n' "${PATH_INFO-unset}"
printf 'PATH_TRANSLATED=%s\n' "${PATH_TRANSLATED-unset}"
printf 'SCRIPT_FILENAME=%s\n' "$SCRIPT_FILENAME"
printf 'PWD=%s\n' "$(pwd -P)"
