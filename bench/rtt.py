"""Round trip of one request in flight: rmq beside the machine's floor.

    .venv/bin/python -m bench.rtt [--count 20000] [--size 1024] [--no-pin] [--json]

Two measurements with the same client, a blocking socket that writes one
frame and reads one answer (no event loop on the client side, so the figure
is the server's and the machine's, not a client's):

* ``floor``: ``bench.floor``'s single server, a few lines on uvloop (reads
  a frame, answers it with a send answer of its opaque) -- what loopback
  TCP, two process wake-ups and an event loop cost on this machine with
  nothing in between;
* ``rmq``: an rmq broker (compiled build, ASYNC_FLUSH, fresh store) answering
  SEND_MESSAGE_V2 requests of ``--size`` bytes, the frames bench/raw.py's
  RawRequests builds.

Server on CPU 0 and client on CPU 1 unless ``--no-pin``.  Prints avg, p50,
p99 round trip in µs for both, the difference, the broker's CPU per
message (its event-loop thread and the whole process) and the floor server's
CPU per request: what any server on this loop pays for a wake-up, a read and
a write, below which no broker's one-in-flight CPU can go.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import time

import psutil

from bench.cluster import Cluster, create_topic
from bench.cpu import ThreadCpuWindow
from bench.floor import Floor
from bench.modes import mode_env
from bench.raw import RawRequests, read_frame
from bench.stats import latency_summary


def _pin(cpu: int, enabled: bool) -> None:
    if enabled and (os.cpu_count() or 1) >= 2:
        os.sched_setaffinity(0, {cpu})


def ping(port: int, frames, count: int) -> list[float]:
    """``count`` round trips of ``frames(i)`` -> one answer each, in seconds."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = bytearray()
    out = []
    clock = time.perf_counter
    try:
        for i in range(count):
            frame = frames(i)
            t = clock()
            sock.sendall(frame)
            read_frame(sock, buf)
            out.append(clock() - t)
    finally:
        sock.close()
    return out


def _pings(port: int, args) -> list[float]:
    """A warm-up, then the measured round trips, from CPU 1 (the server is
    pinned first: a process pinned before it starts a cluster keeps the
    cluster from pinning itself)."""
    request = RawRequests("BenchTopic", b"x" * args.size)
    ping(port, lambda i: request.frame(i)[1], args.count // 10 + 1)
    cpus = os.sched_getaffinity(0)
    _pin(1, not args.no_pin)
    try:
        return ping(port, lambda i: request.frame(i)[1], args.count)
    finally:
        os.sched_setaffinity(0, cpus)


def measure_floor(args) -> dict:
    with Floor("single", pin=not args.no_pin) as floor:
        proc = psutil.Process(floor.pid)
        before = proc.cpu_times()
        out = latency_summary(_pings(floor.port, args))
        after = proc.cpu_times()
    n = args.count + args.count // 10 + 1  # the warm-up's round trips too
    out["server_cpu_us_per_msg"] = 1e6 * (after.user - before.user
                                          + after.system - before.system) / n
    return out


def measure_rmq(args) -> dict:
    conf = {"rmqBusyPollMicros": str(args.busy_poll)} if args.busy_poll else {}
    with Cluster(env=mode_env("compiled"), pin=not args.no_pin, broker_conf=conf) as cluster:
        asyncio.run(create_topic(cluster.broker_addr, cluster.namesrv_addr, "BenchTopic", 8))
        window = ThreadCpuWindow(cluster.broker_pid)
        window.begin()
        rts = _pings(cluster.port, args)
        spent = window.end()
    out = latency_summary(rts)
    n = args.count + args.count // 10 + 1  # the warm-up's round trips are in the window too
    out["broker_cpu_us_per_msg"] = 1e6 * sum(spent.values()) / n
    out["broker_loop_cpu_us_per_msg"] = 1e6 * spent.get("loop", 0.0) / n
    out["broker_threads_us_per_msg"] = {name: 1e6 * sec / n
                                        for name, sec in sorted(spent.items()) if sec > 0}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=20000, help="round trips per measurement")
    ap.add_argument("--size", type=int, default=1024, help="message body bytes")
    ap.add_argument("--no-pin", action="store_true", help="leave CPU placement to the kernel")
    ap.add_argument("--busy-poll", type=int, default=0, metavar="US",
                    help="the broker's rmqBusyPollMicros (default 0: off)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args(argv)
    floor = measure_floor(args)
    rmq = measure_rmq(args)
    doc = {"floor": floor, "rmq": rmq, "count": args.count, "size": args.size,
           "pinned": not args.no_pin}
    if args.json:
        print(json.dumps(doc))
        return 0
    print(f"one request in flight, {args.size} B bodies, {args.count} round trips, "
          f"{'pinned' if not args.no_pin else 'not pinned'}")
    print(f"{'':8} {'avg µs':>8} {'p50 µs':>8} {'p99 µs':>8}")
    for name, r in (("floor", floor), ("rmq", rmq)):
        print(f"{name:8} {r['avg_ms'] * 1000:8.1f} {r['p50_ms'] * 1000:8.1f} "
              f"{r['p99_ms'] * 1000:8.1f}")
    print(f"rmq - floor: {(rmq['avg_ms'] - floor['avg_ms']) * 1000:.1f} µs avg; broker CPU "
          f"{rmq['broker_cpu_us_per_msg']:.1f} µs/msg (event loop "
          f"{rmq['broker_loop_cpu_us_per_msg']:.1f}); the floor's server CPU "
          f"{floor['server_cpu_us_per_msg']:.1f} µs/request")
    for name, us in rmq["broker_threads_us_per_msg"].items():
        print(f"    {name:28} {us:6.1f} µs/msg")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
