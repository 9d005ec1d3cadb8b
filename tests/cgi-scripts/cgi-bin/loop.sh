#!/bin/sh
# A local redirect to itself, forever.
printf 'Location: /cgi-bin/loop.sh\r\n\r\n'
