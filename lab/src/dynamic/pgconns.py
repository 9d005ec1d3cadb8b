#!/usr/bin/env python3
"""pgconns.py SOCKET PORT PID...: how many connections to PostgreSQL these processes hold.

SOCKET is the server's Unix socket (DIR/.s.PGSQL.PORT), PORT its TCP port on 127.0.0.1.
A connection counts when one of the PIDs has its client end open: the server's end of a
Unix connection names the client's socket inode as its peer (`ss -x`), a TCP one is the
client's socket whose peer is PORT (`ss -te`). Counting the database's backends instead
counts every route's kept connections (Tomcat's pool, php-fpm's children stay up between
the rows), not the measured route's."""
import os
import re
import subprocess
import sys


def server_peers(sock, port):
    """Socket inodes of clients connected to the server."""
    ino = set()
    for line in subprocess.run(["ss", "-xnH"], capture_output=True, text=True).stdout.splitlines():
        f = line.split()
        # netid state recv-q send-q local local-inode peer peer-inode
        if len(f) >= 8 and f[4] == sock:
            ino.add(f[7])
    out = subprocess.run(["ss", "-tneH", "state", "established"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        f = line.split()
        # recv-q send-q local peer ... ino:N
        if len(f) >= 4 and f[3].endswith(":%s" % port):
            m = re.search(r"\bino:(\d+)", line)
            if m:
                ino.add(m.group(1))
    return ino


def sockets_of(pids):
    ino = set()
    for p in pids:
        d = "/proc/%s/fd" % p
        try:
            names = os.listdir(d)
        except OSError:
            continue  # gone meanwhile (a CGI program, a prefork child)
        for n in names:
            try:
                t = os.readlink(os.path.join(d, n))
            except OSError:
                continue
            if t.startswith("socket:["):
                ino.add(t[8:-1])
    return ino


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    print(len(server_peers(argv[0], argv[1]) & sockets_of(argv[2:])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
