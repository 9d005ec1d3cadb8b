#!/bin/sh
# A local path with a Status: for the client, not re-dispatched.
printf 'Status: 303 See Other\r\nLocation: /static.txt\r\n\r\n'
