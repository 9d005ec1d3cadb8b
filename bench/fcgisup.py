#!/usr/bin/env python3
"""fcgisup.py - a minimal FastCGI process supervisor for nginx in bench/reliability.sh.

Binds a Unix socket (mode 0666), starts --procs copies of the command with that listening socket as
fd 0 (FastCGI 2.2, as spawn-fcgi does), optionally as --user, and starts a new copy at once whenever
one exits (as php-fpm respawns a killed child). Writes the running children's PIDs to --pidfile (one
a line) after every change. SIGTERM stops the children's process groups (TERM, then KILL after 2 s) and exits.

    fcgisup.py --socket PATH --procs 2 [--user www-data] [--pidfile F] -- COMMAND ARGS...
"""
import argparse
import os
import pwd
import signal
import socket
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--socket", required=True)
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--user")
    ap.add_argument("--pidfile")
    ap.add_argument("command", nargs="+")
    a = ap.parse_args()

    try:
        os.unlink(a.socket)
    except FileNotFoundError:
        pass
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(a.socket)
    os.chmod(a.socket, 0o666)
    s.listen(1024)
    pw = pwd.getpwnam(a.user) if a.user and os.getuid() == 0 else None
    kids = {}
    stopping = False
    restarts = 0

    def spawn():
        pid = os.fork()
        if pid == 0:
            try:
                os.setpgid(0, 0)             # its own group: fcgiwrap -c forks workers of its own
                os.dup2(s.fileno(), 0)
                if pw:
                    os.setgroups([])
                    os.setgid(pw.pw_gid)
                    os.setuid(pw.pw_uid)
                os.execvp(a.command[0], a.command)
            finally:
                os._exit(127)
        kids[pid] = time.monotonic()

    def write_pids():
        if a.pidfile:
            tmp = a.pidfile + ".tmp"
            with open(tmp, "w") as f:
                f.write("".join(f"{p}\n" for p in sorted(kids)))
            os.replace(tmp, a.pidfile)

    class Stop(Exception):
        pass

    def on_term(*_):
        nonlocal stopping
        stopping = True
        raise Stop()   # breaks out of waitpid (which Python would otherwise retry)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    for _ in range(a.procs):
        spawn()
    write_pids()
    try:
        while not stopping:
            try:
                pid, _status = os.waitpid(-1, 0)
            except ChildProcessError:
                break
            if pid in kids and not stopping:
                quick = time.monotonic() - kids.pop(pid) < 1
                restarts += 1
                if quick:
                    time.sleep(0.1)   # a crash loop: do not spin
                spawn()
                write_pids()
    except Stop:
        pass
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for pid in list(kids):
        try:
            os.killpg(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 2
    while kids and time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid:
            kids.pop(pid, None)
        else:
            time.sleep(0.05)
    for pid in list(kids):
        try:
            os.killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
    print(f"fcgisup: stopped, {restarts} restarts", file=sys.stderr)


if __name__ == "__main__":
    main()
