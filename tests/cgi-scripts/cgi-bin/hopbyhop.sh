#!/bin/sh
# Fields that are the server's business (framing, connection, date, server)
# must not pass through from a script; a custom one must.
printf 'Content-Type: text/plain\r\nTransfer-Encoding: chunked\r\nConnection: close\r\nKeep-Alive: timeout=99\r\nDate: Mon, 01 Jan 1990 00:00:00 GMT\r\nServer: evil/1.0\r\nX-Custom: kept\r\nStatus: 418\r\n\r\nnot a chunk\n'
