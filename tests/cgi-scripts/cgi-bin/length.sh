#!/bin/sh
# A script that knows its length: the server can keep the connection alive
# without chunking.
printf 'Content-Type: text/plain\r\nContent-Length: 6\r\n\r\nsized\n'
