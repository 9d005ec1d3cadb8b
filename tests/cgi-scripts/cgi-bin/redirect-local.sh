#!/bin/sh
# A local redirect (RFC 3875 §6.2.2): a bare Location with an abs-path.
printf 'Location: /cgi-bin/target.sh?via=local\r\n\r\n'
