#!/bin/sh
# Echoes the request body back, with the CONTENT_LENGTH it was given.
printf 'Content-Type: application/octet-stream\r\nX-Content-Length: %s\r\n\r\n' "${CONTENT_LENGTH-unset}"
exec cat
