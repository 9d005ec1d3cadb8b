#!/bin/sh
# Takes two seconds to answer; says when it started.
: > started
sleep 2
printf 'Content-Type: text/plain\r\n\r\nslept\n'
