#!/bin/sh
printf 'Status: 404 Not Found\r\nContent-Type: text/plain\r\nX-Script: notfound.sh\r\n\r\nno such thing here\n'
