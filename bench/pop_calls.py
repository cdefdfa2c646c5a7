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

    .venv/bin/python -m bench.pop_calls [--cycles 300] [--repeats 5] [--parts] [--lane]
        [--profile FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import shutil
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson

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


def _wrap(times: dict[str, list[int]], obj: Any, name: str, label: str) -> None:
    f = getattr(obj, name)

    def timed(*args: Any, **kw: Any) -> Any:
        t = time.perf_counter_ns()
        try:
            return f(*args, **kw)
        finally:
            times[label].append(time.perf_counter_ns() - t)

    setattr(obj, name, timed)


async def measure(cycles: int, repeats: int, parts: bool, lane: bool = False,
                  profile: str | None = None) -> dict[str, Any]:
    from rmq.broker import pop_revive
    from rmq.broker.processor import ack as ack_mod
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
            store, revive = controller.message_store, pop.ctx.revive
            for obj, name in ((store, "get_message"), (pop_revive, "put_at_once"),
                              (pop_revive, "put_general"), (pop_revive, "record_body"),
                              (revive, "add_ck"), (revive, "apply_ack"), (pop, "_check"),
                              (pop, "_start_offset"), (pop, "retry_topics"), (pop, "_queue_ids"),
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
    args = ap.parse_args(argv)
    import uvloop

    uvloop.install()
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
