#!/bin/sh
# A client redirect with a document (RFC 3875 §6.2.4).
printf 'Status: 301 Moved Permanently\r\nLocation: https://example.com/moved\r\nContent-Type: text/plain\r\n\r\nmoved for good\n'
