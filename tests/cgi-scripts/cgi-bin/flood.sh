#!/bin/sh
# Writes QUERY_STRING (a byte count, default 200 MiB) zero bytes, as fast as
# the server takes them.
echo $$ > flood.pid
printf 'Content-Type: application/octet-stream\r\n\r\n'
exec head -c "${QUERY_STRING:-209715200}" /dev/zero
