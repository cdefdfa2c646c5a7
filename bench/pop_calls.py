"""The POP processors' cost per call, in one process: a broker controller is
initialized on a throw-away store (no sockets, no name server, as
``bench.lane_reads`` does), a topic of 8 queues filled, and then each cycle
hands the pop processor a POP_MESSAGE of 32 (queueId -1) and the ack
processor one BATCH_ACK_MESSAGE of what it answered, as ``bench.pop`` does
over the wire.  Printed: CPU µs per pop and per batch ack (best and median
of ``--repeats``), without the framing, header codec and socket work a
request also costs; ``--parts`` adds the median wall time of the pieces
(each wrapped, so a little more than alone).

``--lane`` hands the same requests to the pop lane instead, as whole frames
(the remoting decoder, the processors' functions and the answers' encoding,
still no sockets); ``--profile FILE`` writes cProfile statistics of the
measured cycles.

``--wire`` hands each request's frame to the broker's own connection
reader (``RemotingProtocol.buffer_updated`` of the main port, its answer
taken from a stand-in transport once the loop's turn ends): everything the
broker does for a request but the socket calls, the lanes as configured
(``--no-pop-lane``: the pop lane left out, the general path).
``--instructions`` counts instead of timing: the wire cycles alone run under
valgrind's callgrind twice, with ``--cycles`` and with ``--cycles`` + 200,
and the difference of the loop thread's two totals over the difference of
the cycles the two runs ran (each runs a quarter more first: 250) gives
the instructions of one cycle.  The loop thread's total moves with the
machine's load by a few per cent (work that runs by the clock);
``--in-lane`` counts only within the compiled pop lane's ``serve`` -- the
broker's work on the requests, without the loop, the connection reader and
the bench's client side -- which the load hardly moves.

    .venv/bin/python -m bench.pop_calls [--cycles 300] [--repeats 5] [--parts] [--lane]
        [--profile FILE]
    .venv/bin/python -m bench.pop_calls --wire [--no-pop-lane] [--instructions [--in-lane]]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson

from bench.callgrind import callgrind_total
from bench.lane_reads import QUEUES, TOPIC, _controller
from bench.pop import _bitset
from rmq.common.codes import RequestCode
from rmq.remoting import RemotingCommand
from rmq.store.message import MessageExtBrokerInner
from rmq.store.message_codec import message_properties_to_string

GROUP = "bench_pop_calls"


class _Channel:
    attrs: dict = {}
    remote_addr = "127.0.0.1:40000"

    @staticmethod
    def write_bytes(frames: bytes) -> None:
        raise RuntimeError("the lane's answers are returned, not written")

    @staticmethod
    def is_active() -> bool:
        return True


def _fill(store: Any, per_queue: int) -> None:
    """``per_queue`` 256-byte messages in each queue, a queue at a time (the
    records of a queue lie back to back, as batch sends leave them)."""
    props = {"TAGS": "a"}
    text = message_properties_to_string(props)
    for qid in range(QUEUES):
        for _ in range(per_queue):
            store.put_message(MessageExtBrokerInner(
                topic=TOPIC, queue_id=qid, body=b"x" * 256, properties=dict(props),
                properties_string=text, born_timestamp=1, born_host=("10.0.0.1", 5000)))
    while store.reput_from_offset < store.commit_log.get_max_offset():
        store.do_reput()


def _ack_body(r: RemotingCommand) -> bytes:
    ext = r.ext_fields
    acks = []
    for so, mo in zip(ext["startOffsetInfo"].split(";"), ext["msgOffsetInfo"].split(";"),
                      strict=True):
        retry, qid, start = so.split(" ")
        offsets = [int(x) for x in mo.split(" ")[2].split(",")]
        acks.append({"c": GROUP, "t": TOPIC, "r": retry, "so": int(start), "q": int(qid),
                     "rq": int(ext["reviveQid"]), "pt": int(ext["popTime"]),
                     "it": int(ext["invisibleTime"]), "b": _bitset(offsets, int(start))})
    return orjson.dumps({"brokerName": "lane-reads", "acks": acks})


class _Transport:
    """A connection's transport that keeps what is written."""

    def __init__(self) -> None:
        self.out: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.out.append(bytes(data))

    def writelines(self, parts: list) -> None:
        self.out.append(b"".join(bytes(p) for p in parts))

    @staticmethod
    def is_closing() -> bool:
        return False

    @staticmethod
    def get_extra_info(name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40000) if name in ("peername", "sockname") else default

    def take(self) -> bytes:
        data, self.out = b"".join(self.out), []
        return data


async def wire(cycles: int, pop_lane: bool, fill: int) -> list[float]:
    """CPU µs of the pop and of the batch ack (the loop's thread: the store's
    flush threads aside), each frame read by the main port's connection
    reader (lanes as configured; without ``pop_lane`` the pop lane is left
    out of them)."""
    from rmq.remoting.channel import RemotingProtocol

    root = Path(tempfile.mkdtemp(prefix="pop-calls-"))
    controller = await _controller(root)
    try:
        _fill(controller.message_store, fill // QUEUES + 64)
        server = controller.remoting_server
        if not pop_lane:
            from rmq.broker.lanes import Lanes

            lane = server.lane
            kept = [x for x in (lane.lanes if isinstance(lane, Lanes) else (lane,))
                    if type(x).__name__ != "PopLane"]
            server.lane = kept[0] if len(kept) == 1 else Lanes(*kept)
        proto = RemotingProtocol(server, server.config.frameMaxLength)
        transport = _Transport()
        proto.connection_made(transport)
        ext = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "-1", "maxMsgNums": "32",
               "invisibleTime": "60000", "pollTime": "0", "bornTime": "0", "initMode": "0",
               "expType": "TAG", "exp": "*"}
        opaque = 0

        async def call(code: int, ext: dict | None, body: bytes | None) -> tuple[Any, int]:
            nonlocal opaque
            opaque += 1
            frame = RemotingCommand(code, 0, 409, opaque, 0, None, ext, body, 0).encode()
            t0 = time.thread_time_ns()
            buf = proto.get_buffer(len(frame))
            buf[:len(frame)] = frame
            proto.buffer_updated(len(frame))
            await asyncio.sleep(0)  # the turn ends: queued answers are written
            t1 = time.thread_time_ns()
            answer = transport.take()
            if not answer:
                raise RuntimeError(f"no answer to request code {code}")
            return RemotingCommand.decode(answer[4:]), t1 - t0

        total = [0, 0]
        for i in range(cycles // 4 + cycles):  # a quarter more first, not counted
            if i == cycles // 4:
                gc.collect()
                await asyncio.sleep(0.5)  # the store's threads done with the fill
                total = [0, 0]
            r, tp = await call(RequestCode.POP_MESSAGE, dict(ext), None)
            if r.code != 0:
                raise RuntimeError(f"pop answered {r.code} {r.remark}")
            a, ta = await call(RequestCode.BATCH_ACK_MESSAGE, None, _ack_body(r))
            if a.code != 0:
                raise RuntimeError(f"batch ack answered {a.code} {a.remark}")
            total[0] += tp
            total[1] += ta
        return [t / cycles / 1000 for t in total]
    finally:
        await controller.shutdown()
        shutil.rmtree(root, ignore_errors=True)


EXTRA_CYCLES = 200  # what --instructions adds to the second run


def lane_serve_symbol() -> str:
    """The C symbol of the compiled pop lane's ``serve`` (--in-lane counts only
    within it), read from the built module: Cython numbers a method's wrapper
    by its place in the class, so the name is not fixed."""
    from rmq._fast import pop_lane

    names = subprocess.run(["nm", pop_lane.__file__], capture_output=True, text=True,
                           check=True).stdout
    found = re.search(r"\b(__pyx_pw_\w*PopLane_\d+serve)\b", names)
    if found is None:
        raise SystemExit(f"no PopLane.serve symbol in {pop_lane.__file__}")
    return found.group(1)


def _callgrind_total(cycles: int, fill: int, pop_lane: bool, in_lane: bool = False) -> int:
    """Instructions of the loop's thread (the store's flush threads, which
    wake by the clock and so run more the slower the run, aside) over a whole
    --wire run under callgrind; ``in_lane``: only those within the compiled
    pop lane's ``serve`` (the broker's work on the requests, without the
    loop, the connection reader and the bench's client side)."""
    return callgrind_total("bench.pop_calls", [
        "--wire", "--cycles", str(cycles), "--fill", str(fill),
        *([] if pop_lane else ["--no-pop-lane"])], main_thread=not in_lane,
        inside=lane_serve_symbol() if in_lane else None)


def _runs(cycles: int) -> int:
    """Cycles a --wire run of ``cycles`` runs: a quarter more first, not timed."""
    return cycles // 4 + cycles


def instructions(cycles: int, pop_lane: bool, in_lane: bool = False) -> float:
    """Instructions per pop + batch ack cycle: the difference of two callgrind
    totals over the difference of the cycles the two runs ran."""
    if shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind (apt-get install valgrind)")
    fill = (cycles + EXTRA_CYCLES) * 40 + 1024
    low = _callgrind_total(cycles, fill, pop_lane, in_lane)
    high = _callgrind_total(cycles + EXTRA_CYCLES, fill, pop_lane, in_lane)
    return (high - low) / (_runs(cycles + EXTRA_CYCLES) - _runs(cycles))


def _wrap(times: dict[str, list[int]], obj: Any, name: str, label: str) -> None:
    f = getattr(obj, name)

    def timed(*args: Any, **kw: Any) -> Any:
        t = time.perf_counter_ns()
        try:
            return f(*args, **kw)
        finally:
            times[label].append(time.perf_counter_ns() - t)

    try:
        setattr(obj, name, timed)
    except AttributeError:  # an instance of a slots class: its class's method, in this
        setattr(type(obj), name, staticmethod(timed))  # process of one such instance


async def measure(cycles: int, repeats: int, parts: bool, lane: bool = False,
                  profile: str | None = None) -> dict[str, Any]:
    from rmq.broker import pop_revive
    from rmq.broker.processor import ack as ack_mod
    from rmq.broker.processor import pop as pop_mod
    from rmq.broker.processor.ack import AckMessageProcessor
    from rmq.broker.processor.pop import PopMessageProcessor

    root = Path(tempfile.mkdtemp(prefix="pop-calls-"))
    controller = await _controller(root)
    try:
        _fill(controller.message_store, (cycles * (repeats + 1) * 32) // QUEUES + 64)
        pop, ack = PopMessageProcessor(controller), AckMessageProcessor(controller)
        channel = _Channel()
        ext = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "-1", "maxMsgNums": "32",
               "invisibleTime": "60000", "pollTime": "0", "bornTime": "0", "initMode": "0",
               "expType": "TAG", "exp": "*"}

        serve = None
        if lane:
            from rmq.broker.pop_lane import PopLaneSupport, make_pop_lane

            serve = make_pop_lane(PopLaneSupport(pop, ack), 1 << 24).serve

        def lane_call(frame: bytes) -> tuple[RemotingCommand, int]:
            t0 = time.process_time_ns()
            taken, out = serve(channel, frame, 0, len(frame))
            t1 = time.process_time_ns()
            if taken != len(frame) or out is None:
                raise RuntimeError("the lane left the request")
            return RemotingCommand.decode(out[4:]), t1 - t0

        def lane_cycle() -> tuple[int, int]:
            r, tp = lane_call(RemotingCommand.create_request(RequestCode.POP_MESSAGE,
                                                             dict(ext)).encode())
            if r.code != 0:
                raise RuntimeError(f"pop answered {r.code} {r.remark}")
            a, ta = lane_call(RemotingCommand.create_request(
                RequestCode.BATCH_ACK_MESSAGE, None, _ack_body(r)).encode())
            if a.code != 0:
                raise RuntimeError(f"batch ack answered {a.code} {a.remark}")
            return tp, ta

        def cycle() -> tuple[int, int]:
            if lane:
                return lane_cycle()
            req = RemotingCommand.create_request(RequestCode.POP_MESSAGE, dict(ext))
            t0 = time.process_time_ns()
            r = pop.process_request(channel, req)
            t1 = time.process_time_ns()
            if r.code != 0:
                raise RuntimeError(f"pop answered {r.code} {r.remark}")
            req = RemotingCommand.create_request(RequestCode.BATCH_ACK_MESSAGE, None,
                                                 _ack_body(r))
            t2 = time.process_time_ns()
            a = ack.process_request(channel, req)
            t3 = time.process_time_ns()
            if a.code != 0:
                raise RuntimeError(f"batch ack answered {a.code} {a.remark}")
            return t1 - t0, t3 - t2

        for _ in range(cycles // 4):
            cycle()
        gc.collect()
        times: dict[str, list[int]] = defaultdict(list)
        if parts:
            store = controller.message_store
            for obj, name in ((store, "get_message"), (pop_revive, "put_at_once"),
                              (pop_revive, "put_general"), (pop_revive, "record_body"),
                              (pop_revive, "written"), (pop.ctx.revive, "write_now"),
                              (pop, "_check"),
                              (pop, "_start_offset"), (pop, "retry_topics"), (pop, "_queue_ids"),
                              (pop_mod, "pop_queue_now"), (ack_mod, "ack_entry_now"),
                              (ack_mod, "bitset_offsets"), (ack, "_check_queue"),
                              (ack_mod.fastjson, "loads")):
                _wrap(times, obj, name, name)
        out: dict[str, Any] = {"pop_us": [], "batch_ack_us": []}
        prof = None
        if profile:
            import cProfile

            prof = cProfile.Profile()
            prof.enable()
        for _ in range(repeats):
            await asyncio.sleep(0.02)  # the loop's callbacks run between repeats
            tp = ta = 0
            for _ in range(cycles):
                p, a = cycle()
                tp += p
                ta += a
            out["pop_us"].append(tp / cycles / 1000)
            out["batch_ack_us"].append(ta / cycles / 1000)
        if prof is not None:
            prof.disable()
            prof.dump_stats(profile)
        if parts:
            calls = cycles * repeats
            out["parts"] = {k: (statistics.median(v) / 1000, len(v) / calls)
                            for k, v in times.items()}
        return out
    finally:
        await controller.shutdown()
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cycles", type=int, default=300, help="pop + batch ack cycles per repeat")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--parts", action="store_true", help="time the pieces too")
    ap.add_argument("--lane", action="store_true", help="whole frames through the pop lane")
    ap.add_argument("--profile", help="write cProfile statistics of the cycles here")
    ap.add_argument("--wire", action="store_true",
                    help="whole frames through the broker's connection reader")
    ap.add_argument("--no-pop-lane", action="store_true",
                    help="--wire without the pop lane (the general path)")
    ap.add_argument("--instructions", action="store_true",
                    help="--wire: count instructions per cycle under callgrind")
    ap.add_argument("--in-lane", action="store_true",
                    help="--instructions: count only within the compiled pop lane's serve")
    ap.add_argument("--fill", type=int, default=0, help="--wire: messages stored first")
    args = ap.parse_args(argv)
    import uvloop

    uvloop.install()
    if args.instructions:
        if args.in_lane and args.no_pop_lane:
            raise SystemExit("--in-lane counts within the pop lane: not with --no-pop-lane")
        per = instructions(args.cycles, not args.no_pop_lane, args.in_lane)
        where = ("within the pop lane's serve" if args.in_lane
                 else "general path" if args.no_pop_lane else "lanes")
        print(f"instructions_per_cycle (pop of 32 + batch ack, {where}): {per:,.0f}")
        return 0
    if args.wire:
        pop_us, ack_us = asyncio.run(wire(args.cycles, not args.no_pop_lane,
                                          args.fill or args.cycles * 40 + 1024))
        print(f"wire cycle ({'general path' if args.no_pop_lane else 'lanes'}): pop {pop_us:.1f} "
              f"µs, batch ack {ack_us:.1f} µs, together {pop_us + ack_us:.1f} µs")
        return 0
    got = asyncio.run(measure(args.cycles, args.repeats, args.parts, args.lane, args.profile))
    for key in ("pop_us", "batch_ack_us"):
        values = got[key]
        print(f"{key} (32 messages a call): best {min(values):.1f}, median "
              f"{statistics.median(values):.1f} ({', '.join(f'{v:.1f}' for v in values)})")
    for name, (median, per_cycle) in sorted(got.get("parts", {}).items(),
                                            key=lambda kv: -kv[1][0] * kv[1][1]):
        print(f"  {name:16s} {median:6.2f} µs x {per_cycle:.0f} a cycle")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
