#!/bin/sh
printf 'Content-Type: text/plain\r\nX-Script: hello.sh\r\n\r\nhello from sh\n'
