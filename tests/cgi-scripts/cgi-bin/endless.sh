#!/bin/sh
# Writes output forever (with a child doing the writing): only the server
# can stop it, when the client goes away.
echo $$ > endless.pid
printf 'Content-Type: text/plain\r\n\r\n'
yes stoa-endless-output
