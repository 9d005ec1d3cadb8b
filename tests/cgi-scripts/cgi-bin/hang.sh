#!/bin/sh
# Never writes a head, and has a child that also hangs: the server must
# kill the whole process group at the timeout. Leaves its PID (= its process
# group) for the test.
echo $$ > hang.pid
sleep 60 &
sleep 60
