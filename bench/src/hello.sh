#!/bin/sh
# hello.sh - shell CGI for bench/cgi.sh, same page as hello.c
printf 'Content-Type: text/html\r\n\r\n'
printf '<!DOCTYPE html>\n<html><head><title>hello</title></head><body>\n<h1>Hello, world!</h1>\n<p>QUERY_STRING: [%s]</p>\n<pre>\n' "$QUERY_STRING"
i=0
while [ $i -lt 21 ]; do
    printf 'The quick brown fox jumps over the lazy dog. 0123456789\n'
    i=$((i + 1))
done
printf '</pre>\n</body></html>\n'
