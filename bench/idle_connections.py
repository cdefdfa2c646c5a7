"""Broker memory per idle connection.

Starts ``rmq-namesrv`` and ``rmq-broker`` on free loopback ports, then opens
``--connections`` TCP connections to the broker in waves and reports the
growth of the broker's RssAnon (its own memory, /proc/<pid>/status) per
connection after each wave:

* ``bare``: connected, never sent a byte;
* ``one request``: each sent one small request and read the answer, then
  fell silent (a client that heartbeats rarely);
* ``after a big frame``: each sent one 256 KiB request (its receive buffer
  grew to hold it), then one small request, then fell silent.

Each wave's connections are closed before the next starts.  A connection's
receive buffer starts at 4 KiB, grows while reads fill it and returns to
4 KiB after a small read that leaves nothing pending, so every wave should
cost a few KiB per connection.  The soft RLIMIT_NOFILE is raised to the hard
limit (the broker inherits it); ``--connections`` above what that allows is
cut to fit.

    .venv/bin/python -m bench.idle_connections [--connections 10000] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import resource
import socket
import time
from pathlib import Path

from bench.cluster import Cluster
from bench.cpu import proc_status
from bench.results import git_commit, markdown_table
from rmq.remoting import RemotingCommand

UNSUPPORTED_CODE = 9999  # answered REQUEST_CODE_NOT_SUPPORTED: touches no broker state
KiB = 1024


def raise_fd_limit(wanted: int) -> int:
    """Soft RLIMIT_NOFILE up to the hard one; how many connections fit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return min(wanted, hard - 200)  # the broker's own files and sockets


def read_answer(sock: socket.socket) -> None:
    head = b""
    while len(head) < 4:
        chunk = sock.recv(4 - len(head))
        if not chunk:
            raise ConnectionError("the broker closed a connection")
        head += chunk
    left = int.from_bytes(head, "big")
    while left:
        chunk = sock.recv(min(left, 65536))
        if not chunk:
            raise ConnectionError("the broker closed a connection")
        left -= len(chunk)


def wave(port: int, n: int, frames: list[bytes]) -> list[socket.socket]:
    """``n`` connections, each sending ``frames`` in turn (an answer read after each)."""
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=30)
        socks.append(s)
        for frame in frames:
            s.sendall(frame)
            read_answer(s)
    return socks


def settle_rss(pid: int, seconds: float = 2.0) -> int:
    time.sleep(seconds)
    return proc_status(pid)["RssAnon"]


def measure(connections: int) -> dict:
    small = RemotingCommand.create_request(UNSUPPORTED_CODE, {"k": "v"}, b"x" * 200).encode()
    big = RemotingCommand.create_request(UNSUPPORTED_CODE, {"k": "v"}, b"x" * (256 * KiB)).encode()
    waves = {"bare": [], "one request": [small], "after a big frame": [big, small]}
    rows = {}
    with Cluster() as c:
        base = settle_rss(c.broker_pid)
        for name, frames in waves.items():
            t0 = time.perf_counter()
            socks = wave(c.port, connections, frames)
            took = time.perf_counter() - t0
            rss = settle_rss(c.broker_pid)
            rows[name] = {"connections": len(socks), "rss_anon_mib": rss / (1 << 20),
                          "kib_per_connection": (rss - base) / len(socks) / KiB,
                          "open_s": took}
            for s in socks:
                s.close()
            base = min(base, settle_rss(c.broker_pid))
    return {"commit": git_commit(), "connections": connections, "waves": rows}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--connections", type=int, default=10000)
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args(argv)
    n = raise_fd_limit(args.connections)
    doc = measure(n)
    print(markdown_table(["wave", "connections", "broker RssAnon MiB", "KiB per connection",
                          "opened in s"],
                         [[k, v["connections"], f"{v['rss_anon_mib']:.1f}",
                           f"{v['kib_per_connection']:.1f}", f"{v['open_s']:.1f}"]
                          for k, v in doc["waves"].items()]))
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
