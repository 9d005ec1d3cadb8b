#!/bin/sh
# A client redirect (RFC 3875 §6.2.3): an absolute URI.
printf 'Location: http://example.com/elsewhere?x=1\r\n\r\n'
