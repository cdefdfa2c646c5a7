"""Remoting benchmark: one client connection, a trivial request/response,
N requests in flight; plus the header codec alone.

    .venv/bin/python bench/remoting.py [--seconds 3] [--inflight 1,16,128]
        [--quick] [--json PATH]

Runs the end-to-end part twice, with the compiled codec and with the twins
(a subprocess with RMQ_NO_EXTENSIONS=1); the server runs in its own process
so client and server each get a core.  Prints requests/s and µs/request per
in-flight level, and encode/decode µs of a SEND_MESSAGE_V2-sized header for
both serializations with the compiled/twin ratio (JSON_VARYING: JSON headers
whose per-message fields change from one call to the next).  ``--json PATH`` also writes
``{"compiled": {"e2e": [...], "codec": {...}}, "twin": {...}}`` (what
``bench/run.py`` reads); ``--quick`` is a smoke run (1 s, 1 and 64 in flight).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import socket
import subprocess
import sys
import time
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

V2_EXT = {"a": "please_rename_unique_group_name", "b": "BenchmarkTest", "c": "TBW102",
          "d": "4", "e": "3", "f": "0", "g": "1700000000000", "h": "0",
          "i": "UNIQ_KEY\x017F0000010B3C18B4AAC2A9F3E10000\x02WAIT\x01true\x02TAGS\x01TagA",
          "j": "0", "k": "false", "m": "false", "n": "broker-a"}


class _Pong:
    """The trivial processor: an empty SUCCESS response."""

    def process_request(self, channel, request):
        from rmq.remoting import RemotingCommand

        return RemotingCommand.create_response(0)


async def _serve(port: int) -> None:
    from rmq.remoting import RemotingServer
    from rmq.remoting.config import NettyServerConfig

    server = RemotingServer(NettyServerConfig(listenPort=port, bindAddress="127.0.0.1"))
    server.register_processor(1, _Pong())
    await server.start()
    await asyncio.Event().wait()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"benchmark server did not listen on {port}")


async def _drive(addr: str, inflight: int, seconds: float) -> dict:
    from rmq.remoting import RemotingClient, RemotingCommand

    client = RemotingClient()
    create = RemotingCommand.create_request
    await client.invoke(addr, create(1))  # connect
    count = 0
    stop = False

    async def worker() -> None:
        nonlocal count
        invoke = client.invoke
        while not stop:
            await invoke(addr, create(1, None, None), 3000)
            count += 1

    tasks = [asyncio.ensure_future(worker()) for _ in range(inflight)]
    await asyncio.sleep(0.3)  # warm-up
    start_count, start = count, time.perf_counter()
    await asyncio.sleep(seconds)
    done, elapsed = count - start_count, time.perf_counter() - start
    stop = True
    await asyncio.gather(*tasks)
    await client.close()
    return {"inflight": inflight, "rps": done / elapsed, "us_per_req": elapsed / done * 1e6}


def run_end_to_end(inflight: list[int], seconds: float) -> list[dict]:
    """Server subprocess (same environment) + client here."""
    import uvloop

    port = _free_port()
    server = subprocess.Popen([sys.executable, __file__, "--serve", str(port)], env=os.environ)
    try:
        _wait_port(port)
        return [uvloop.run(_drive(f"127.0.0.1:{port}", n, seconds)) for n in inflight]
    finally:
        server.terminate()
        server.wait(10)


def varying_exts(count: int = 256) -> list[dict]:
    """V2 headers whose per-message fields differ as in real traffic (born
    timestamp, the message's unique key in the properties)."""
    exts = []
    for k in range(count):
        ext = dict(V2_EXT)
        ext["g"] = str(1700000000000 + k * 7919)
        ext["i"] = V2_EXT["i"].replace("E10000", f"E1{k:04X}")
        exts.append(ext)
    return exts


def _best_us(fn, number: int, repeat: int = 10) -> float:
    """µs per call: the best of ``repeat`` runs of ``number // repeat`` calls,
    in process CPU time (on a shared machine a single wall-clock run moves by
    a factor of two with the neighbours' load)."""
    each = max(1, number // repeat)
    return min(timeit.repeat(fn, number=each, repeat=repeat, timer=time.process_time)) / each * 1e6


def codec_micro(number: int = 50000) -> list[dict]:
    """Encode + decode of a SEND_MESSAGE_V2 header, twin vs compiled: the same
    header again and again (JSON, ROCKETMQ), and 256 headers with the
    per-message fields differing, taken in turn (JSON_VARYING)."""
    from rmq._fast import compiled_or_none
    from rmq.remoting import codec

    fast = compiled_or_none("remoting_codec")
    rows = []
    for stype, name, exts in ((0, "JSON", [V2_EXT]), (1, "ROCKETMQ", [V2_EXT]),
                              (0, "JSON_VARYING", varying_exts())):
        row = {"serialization": name}
        for label, enc, dec in (("twin", codec.py_encode, codec.py_decode),
                                ("compiled", fast.encode if fast else None,
                                 fast.decode if fast else None)):
            if enc is None:
                continue
            frames = [enc(310, 0, 409, 123456, 0, None, ext, stype, 0)[4:] for ext in exts]
            next_ext, next_frame = itertools.cycle(exts).__next__, itertools.cycle(frames).__next__
            te = _best_us(lambda e=enc, s=stype, n=next_ext: e(310, 0, 409, 123456, 0, None,
                                                               n(), s, 0), number)
            td = _best_us(lambda d=dec, n=next_frame: d(n()), number)
            row[label] = {"encode_us": te, "decode_us": td, "header_bytes": len(frames[0]) - 4}
        if "compiled" in row:
            row["ratio"] = ((row["twin"]["encode_us"] + row["twin"]["decode_us"])
                            / (row["compiled"]["encode_us"] + row["compiled"]["decode_us"]))
        rows.append(row)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--inflight", default="1,16,128")
    ap.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true", help="smoke run: 1 s, 1 and 64 in flight")
    ap.add_argument("--json", metavar="PATH", help="also write the figures as JSON to PATH")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.quick:
        args.seconds = min(args.seconds, 1.0)
        args.inflight = "1,64"
    if args.serve:
        import uvloop

        uvloop.run(_serve(args.serve))
        return
    levels = [int(x) for x in args.inflight.split(",")]
    if args.child:
        print(json.dumps(run_end_to_end(levels, args.seconds)))
        return
    results = {}
    for label, env in (("compiled", {"RMQ_REQUIRE_EXTENSIONS": "1"}),
                       ("twin", {"RMQ_NO_EXTENSIONS": "1"})):
        out = subprocess.run(
            [sys.executable, __file__, "--child", "--seconds", str(args.seconds),
             "--inflight", args.inflight],
            env={**os.environ, "RMQ_NO_EXTENSIONS": "", "RMQ_REQUIRE_EXTENSIONS": "", **env},
            check=True, capture_output=True, text=True)
        results[label] = json.loads(out.stdout.strip().splitlines()[-1])
    print("end to end (one connection, trivial request/response)")
    print(f"{'in flight':>9} | {'compiled req/s':>14} {'us/req':>7} | {'twin req/s':>10} "
          f"{'us/req':>7} | ratio")
    for c, t in zip(results["compiled"], results["twin"], strict=True):
        print(f"{c['inflight']:>9} | {c['rps']:>14,.0f} {c['us_per_req']:>7.1f} | "
              f"{t['rps']:>10,.0f} {t['us_per_req']:>7.1f} | {c['rps'] / t['rps']:.2f}x")
    print("\ncodec, SEND_MESSAGE_V2 header (13 fields), encode + decode")
    codec_rows = codec_micro()
    if args.json:
        doc = {label: {"e2e": rows, "codec": {r["serialization"]: r[label] for r in codec_rows
                                              if label in r}}
               for label, rows in results.items()}
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=2)
    for row in codec_rows:
        tw, co = row["twin"], row.get("compiled")
        line = (f"{row['serialization']:>8} ({tw['header_bytes']} B): twin "
                f"{tw['encode_us']:.2f} + {tw['decode_us']:.2f} us")
        if co:
            line += (f" | compiled {co['encode_us']:.2f} + {co['decode_us']:.2f} us"
                     f" | {row['ratio']:.1f}x")
        print(line)


if __name__ == "__main__":
    main()
