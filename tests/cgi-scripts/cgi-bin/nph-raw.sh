#!/bin/sh
# A non-parsed-header script: it writes the whole HTTP response itself.
printf 'HTTP/1.1 299 Passed Untouched\r\nX-Nph: raw\r\nContent-Type: text/plain\r\n\r\nnph body, not chunked\n'
