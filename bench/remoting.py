"""Remoting benchmark: one client connection, a trivial request/response,
N requests in flight; plus the header codec alone.

    .venv/bin/python -m bench.remoting [--seconds 3] [--inflight 1,16,128]
        [--quick] [--codec-only] [--json PATH]

Runs the end-to-end part twice, with the compiled codec and with the twins
(a subprocess with RMQ_NO_EXTENSIONS=1); the server runs in its own process
so client and server each get a core.  Prints requests/s and µs/request per
in-flight level, then encode and decode µs of the headers the codec serves
(``shapes()``: pull request and response, the C++ client's pull request, send
and batch responses, heartbeat, route request and response), twin and
compiled, beside orjson's own ``dumps``/``loads`` of the same header (JSON_VARYING:
V2 send headers whose per-message fields change from one call to the next;
ROCKETMQ: the V2 header in the binary serialization).  ``--json PATH`` also writes
``{"compiled": {"e2e": [...], "codec": {...}}, "twin": {...}, "orjson": {...}}`` (what
``bench/run.py`` reads); ``--quick`` is a smoke run (1 s, 1 and 64 in flight);
``--codec-only`` skips the servers.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import subprocess
import sys
import time
import timeit

from bench.modes import ROOT
from rmq.testing.procs import free_port, wait_port

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

    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "bench.remoting", "--serve", str(port)],
                              env=os.environ, cwd=ROOT)
    try:
        wait_port(port, proc=server)
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


# The headers the codec serves, as their senders write them: (row, code,
# language, version, opaque, flag, remark, extFields).  Codes are the IntEnum
# members the callers pass; language 0 is JAVA; flag 1 marks a response.
# Plain single sends are read by the send lane, not by this codec; the rest
# of the traffic is these.
PULL_EXT = {"consumerGroup": "bench_consumer_group", "topic": "BenchConsumeTopic",
            "queueId": "3", "queueOffset": "1048576", "maxMsgNums": "32", "sysFlag": "20",
            "commitOffset": "0", "suspendTimeoutMillis": "0", "subVersion": "1700000000123",
            "expressionType": "TAG", "bname": "broker-a", "subscription": "*"}


def shapes() -> tuple:
    from rmq.common.codes import RequestCode, ResponseCode

    ok = ResponseCode.SUCCESS
    return (
        ("pull_request", RequestCode.PULL_MESSAGE, 0, 409, 123456, 0, None, PULL_EXT),
        ("pull_response", ok, 0, 409, 123456, 1, "FOUND",
         {"suggestWhichBrokerId": "0", "nextBeginOffset": "1048608", "minOffset": "0",
          "maxOffset": "2097152"}),
        ("send_v2_request", RequestCode.SEND_MESSAGE_V2, 0, 409, 123456, 0, None, V2_EXT),
        ("send_response", 0, 0, 409, 123456, 1, None,
         {"msgId": "7F00000100002A9F0000000012345678", "queueId": "3",
          "queueOffset": "1048576", "MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}),
        ("batch_response", 0, 0, 409, 123456, 1, None,
         {"msgId": ",".join(f"7F00000100002A9F00000000{i:08X}" for i in range(32)),
          "queueId": "3", "queueOffset": "1048576", "MSG_REGION": "DefaultRegion",
          "TRACE_ON": "true"}),
        ("heartbeat_request", RequestCode.HEART_BEAT, 0, 409, 123456, 0, None, None),
        ("route_request", RequestCode.GET_ROUTEINFO_BY_TOPIC, 0, 409, 123456, 0, None,
         {"topic": "BenchTopic"}),
        ("route_response", ok, 0, 409, 123456, 1, None, None),
    )


def cpp_pull_request() -> bytes:
    """A PULL_MESSAGE header as the C++ client (1.2.x) writes it: keys in
    byte order, some extFields values numbers, its ACL extras, remark "",
    version 63 and a trailing newline (spec/CLIENTS.md)."""
    import orjson

    ext = {"AccessKey": "", "OnsChannel": "ALIYUN", "Signature": "l3ZW0yfnMSx8LIZcjOuJ40VA6hM=",
           "commitOffset": "0", "consumerGroup": "bench_consumer_group", "maxMsgNums": 32,
           "queueId": 3, "queueOffset": "1048576", "subVersion": "1700000000123",
           "subscription": "*", "suspendTimeoutMillis": "15000", "sysFlag": 6,
           "topic": "BenchConsumeTopic"}
    return orjson.dumps({"code": 11, "extFields": ext, "flag": 0, "language": "CPP",
                         "opaque": 123456, "remark": "", "version": 63}) + b"\n"


def _best_us(fn, number: int, repeat: int = 10) -> float:
    """µs per call: the best of ``repeat`` runs of ``number // repeat`` calls,
    in process CPU time (on a shared machine a single wall-clock run moves by
    a factor of two with the neighbours' load)."""
    each = max(1, number // repeat)
    return min(timeit.repeat(fn, number=each, repeat=repeat, timer=time.process_time)) / each * 1e6


def _timings(enc, dec, args_list: list[tuple] | None, frames: list[bytes],
             number: int) -> dict:
    """encode_us / decode_us of one implementation, taking the argument
    tuples and frames in turn (no encode_us when only frames are given)."""
    row: dict = {"header_bytes": len(frames[0]) - 4}
    if args_list is not None:
        next_args = itertools.cycle(args_list).__next__
        row["encode_us"] = _best_us(lambda: enc(*next_args()), number)
    next_frame = itertools.cycle(frames).__next__
    row["decode_us"] = _best_us(lambda: dec(next_frame()), number)
    return row


def codec_micro(number: int = 50000) -> list[dict]:
    """Encode and decode of every header shape, twin vs compiled, with orjson
    alone beside them (``loads`` of the header text, ``dumps`` of the dict the
    twin builds): the floor of any codec built on it.  JSON_VARYING takes 256
    V2 headers whose per-message fields differ in turn; ROCKETMQ is the V2
    header in the binary serialization."""
    import orjson

    from rmq._fast import compiled_or_none
    from rmq.remoting import codec

    fast = compiled_or_none("remoting_codec")
    impls = [("twin", codec.py_encode, codec.py_decode)]
    if fast is not None:
        impls.append(("compiled", fast.encode, fast.decode))
    cases = []  # (row, args list or None, frames)
    for name, code, lang, ver, opaque, flag, remark, ext in shapes():
        args = (code, lang, ver, opaque, flag, remark, ext, 0, 0)
        cases.append((name, [args], [codec.py_encode(*args)[4:]]))
    raw = cpp_pull_request()
    cases.append(("pull_request_cpp", None, [len(raw).to_bytes(4, "big") + raw]))
    varying = [(310, 0, 409, 123456, 0, None, ext, 0, 0) for ext in varying_exts()]
    cases.append(("JSON_VARYING", varying, [codec.py_encode(*a)[4:] for a in varying]))
    binary = (310, 0, 409, 123456, 0, None, V2_EXT, 1, 0)
    cases.append(("ROCKETMQ", [binary], [codec.py_encode(*binary)[4:]]))
    rows = []
    for name, args_list, frames in cases:
        row: dict = {"serialization": name}
        for label, enc, dec in impls:
            row[label] = _timings(enc, dec, args_list, frames, number)
        if name != "ROCKETMQ":
            text = frames[0][4:]
            row["orjson"] = {"decode_us": _best_us(lambda t=text: orjson.loads(t), number)}
            if args_list is not None:
                obj = orjson.loads(text)
                row["orjson"]["encode_us"] = _best_us(lambda o=obj: orjson.dumps(o), number)
        if "compiled" in row:
            tw, co = row["twin"], row["compiled"]
            row["ratio"] = ((tw.get("encode_us", 0) + tw["decode_us"])
                            / (co.get("encode_us", 0) + co["decode_us"]))
        rows.append(row)
    return rows


def _us(row: dict, key: str) -> str:
    return f"{row[key]:5.2f}" if key in row else "    -"


def print_codec(rows: list[dict]) -> None:
    print(f"{'header':>18} {'bytes':>5} | {'twin enc':>8} {'dec':>5} | {'compiled enc':>12} "
          f"{'dec':>5} | {'orjson dumps':>12} {'loads':>5} | twin/compiled")
    for row in rows:
        tw, co, oj = row["twin"], row.get("compiled", {}), row.get("orjson", {})
        ratio = f"{row['ratio']:.1f}x" if "ratio" in row else "-"
        print(f"{row['serialization']:>18} {tw['header_bytes']:>5} | {_us(tw, 'encode_us'):>8} "
              f"{_us(tw, 'decode_us')} | {_us(co, 'encode_us'):>12} {_us(co, 'decode_us')} | "
              f"{_us(oj, 'encode_us'):>12} {_us(oj, 'decode_us')} | {ratio}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--inflight", default="1,16,128")
    ap.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true", help="smoke run: 1 s, 1 and 64 in flight")
    ap.add_argument("--json", metavar="PATH", help="also write the figures as JSON to PATH")
    ap.add_argument("--codec-only", action="store_true",
                    help="only the header codec timings (no servers)")
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
    number = 10_000 if args.quick else 50_000
    if args.codec_only:
        codec_rows = codec_micro(number)
        print_codec(codec_rows)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"codec": codec_rows}, f, indent=2)
        return
    results = {}
    for label, env in (("compiled", {"RMQ_REQUIRE_EXTENSIONS": "1"}),
                       ("twin", {"RMQ_NO_EXTENSIONS": "1"})):
        out = subprocess.run(
            [sys.executable, "-m", "bench.remoting", "--child", "--seconds", str(args.seconds),
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
    print("\nheader codec, µs per header (best of 10 runs, process CPU time)")
    codec_rows = codec_micro(number)
    print_codec(codec_rows)
    if args.json:
        doc = {label: {"e2e": rows, "codec": {r["serialization"]: r[label] for r in codec_rows
                                              if label in r}}
               for label, rows in results.items()}
        doc["orjson"] = {"codec": {r["serialization"]: r["orjson"] for r in codec_rows
                                   if "orjson" in r}}
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=2)


if __name__ == "__main__":
    main()
