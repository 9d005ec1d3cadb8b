#!/bin/sh
# A head that is not a CGI head.
printf 'this is not a header line\r\n\r\nbody\n'
