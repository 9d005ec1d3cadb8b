#!/usr/bin/env python3
"""fcgi-spawn.py SOCKET N COMMAND...: a FastCGI process manager for Apache's
mod_proxy_fcgi (as mod_fastcgi's FastCgiServer was for the paper): binds the
Unix socket SOCKET (mode 0777), starts N copies of COMMAND each with the
listening socket as fd 0 (FastCGI §2.2, as Stoa's pools do), restarts one
that exits, and on SIGTERM stops them all and removes the socket. The
children get PR_SET_PDEATHSIG, so they die with this process."""
import ctypes, os, signal, socket, sys, time

path, n, cmd = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
if os.path.exists(path):
    os.unlink(path)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(path)
os.chmod(path, 0o777)
s.listen(1024)
libc = ctypes.CDLL(None, use_errno=True)
parent = os.getpid()
kids = {}


def spawn():
    pid = os.fork()
    if pid == 0:
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:
            os._exit(1)
        os.dup2(s.fileno(), 0)
        os.execvp(cmd[0], cmd)
    kids[pid] = time.time()


def stop(*_):
    for p in list(kids):
        try:
            os.kill(p, signal.SIGTERM)
        except ProcessLookupError:
            pass
    for p in list(kids):
        try:
            os.waitpid(p, 0)
        except ChildProcessError:
            pass
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    sys.exit(0)


signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGINT, stop)
for _ in range(n):
    spawn()
while True:
    pid, st = os.wait()
    started = kids.pop(pid, None)
    if started is not None:
        sys.stderr.write("fcgi-spawn: %d exited (status %d), restarting\n" % (pid, st))
        if time.time() - started < 1:
            time.sleep(1)
        spawn()
