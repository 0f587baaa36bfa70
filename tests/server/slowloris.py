#!/usr/bin/env python3
"""slowloris.py HOST PORT N READY_FILE SECONDS -- N slow clients for
tests/server/abuse.sh: each opens a connection, sends the start of a
request and then one more header byte every second or so, never ending
the headers, so each connection stays open and busy for doctxd.  The
connections come from 127.0.0.2, .3, ... (125 each, under doctxd's
--per-ip 128): many attackers, as a real slowloris is.  Writes READY_FILE
("open N") once all are connected, then dribbles for SECONDS at most, and
prints how many connections doctxd had closed by then."""
import socket
import sys
import time

host, port, n, ready, secs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], float(sys.argv[5])
socks = []
for i in range(n):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.%d" % (2 + i // 125), 0))
    s.settimeout(5)
    s.connect((host, port))
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: doctxd\r\nX-Slow: ")
    socks.append(s)
with open(ready, "w") as f:
    f.write("open %d\n" % len(socks))
end = time.monotonic() + secs
closed = set()
while time.monotonic() < end:
    for i, s in enumerate(socks):
        if i in closed:
            continue
        try:
            s.sendall(b"a")
        except OSError:
            closed.add(i)
    time.sleep(1.0)
print("slow connections closed by the server: %d of %d" % (len(closed), n))
