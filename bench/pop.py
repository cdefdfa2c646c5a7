"""POP consumption benchmark: pop + ack msgs/s and the broker's CPU per
message, beside the pull path's on the same data.

Starts its own name server and broker (compiled; ``--twin`` for the pure-Python
twins), fills a topic with ``--messages`` messages of ``--size`` bytes, then
reads them ``--rounds`` times over with ``--inflight`` concurrent readers,
each round

* pull: ``--pull-passes`` passes over all of them, PULL_MESSAGE of 32 per
  queue, offsets kept by the reader (what a 4.9.8 push/lite-pull consumer
  costs the broker);
* pop: one pass, POP_MESSAGE of 32 (queueId -1), each answer acked with one
  BATCH_ACK_MESSAGE (``--ack single``: one ACK_MESSAGE per message), by a
  group of its own (the first round's is ``bench_pop``, a later round's
  ``bench_pop<round>``: each starts at the queues' start);

and prints msgs/s, broker CPU µs per message and the ratio pop / pull, each
over all rounds' windows of the path.  A pass of pull over 300,000 messages
takes about 0.3 s: one such window's CPU moves by a tenth with the machine's
other work and the clock tick, so the pull side is measured over several
passes, and both paths' windows alternate (a change of the machine's load
falls on both alike).

    .venv/bin/python -m bench.pop [--messages 50000] [--size 256] [--inflight 8]
        [--rounds 3] [--pull-passes 2] [--ack batch|single] [--no-pull-lane]
        [--no-pop-lane] [--twin] [--json] [--spy FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import sys
import time

from bench.cluster import Cluster, create_topic
from bench.measured import figures, start_cluster, window

TOPIC = "BenchPop"
QUEUES = 8
# before each window: what the last one left to the broker's own tasks and
# threads (offsets, revive bookkeeping, flushes) is done outside both windows
SETTLE_S = 1.0


async def fill(c: Cluster, n: int, size: int) -> None:
    from rmq.client import ClientConfig, Message, Producer

    async with Producer("bench_pop_fill", client_config=ClientConfig(
            namesrv_addr=c.namesrv_addr, client_ip="127.0.0.1", instance_name="fill")) as p:
        queues = await p.fetch_publish_queues(TOPIC)
        body = b"x" * size
        sent, i = 0, 0
        while sent < n:
            k = min(128, n - sent)
            await p.send_batch([Message(TOPIC, body) for _ in range(k)],
                               mq=queues[i % len(queues)])
            sent += k
            i += 1


async def pull_all(c: Cluster, n: int, inflight: int, passes: int = 1) -> int:
    """``passes`` reads of every queue from its start; the messages read."""
    from rmq.client.codec import decode_messages
    from rmq.client.headers import pull_header
    from rmq.common.codes import RequestCode
    from rmq.remoting import RemotingClient, RemotingCommand

    client = RemotingClient()
    got = 0
    todo = [qid for _ in range(passes) for qid in range(QUEUES)]

    async def reader() -> None:
        nonlocal got
        while todo:
            qid = todo.pop()
            offset = 0
            while True:
                ext = pull_header("bench_pull", TOPIC, qid, offset, 32, 4, 0, 0, "*", 0, "TAG",
                                  "broker-a")
                r = await client.invoke(c.broker_addr, RemotingCommand.create_request(
                    RequestCode.PULL_MESSAGE, ext), 5000)
                if r.code != 0:
                    break
                got += len(decode_messages(bytes(r.body)))
                offset = int(r.ext_fields["nextBeginOffset"])

    try:
        await asyncio.gather(*(reader() for _ in range(min(inflight, QUEUES))))
    finally:
        await client.close()
    return got


def _bitset(offsets: list[int], start: int) -> str:
    raw = bytearray((max(offsets) - start) // 8 + 1)
    for o in offsets:
        raw[(o - start) // 8] |= 1 << ((o - start) % 8)
    return base64.b64encode(bytes(raw)).decode()


async def pop_all(c: Cluster, n: int, inflight: int, ack: str, group: str = "bench_pop") -> int:
    """``n`` messages popped and acked by ``group``; the messages popped."""
    import orjson

    from rmq.client.pop import PopClient, handle_of
    from rmq.common.codes import RequestCode
    from rmq.remoting import RemotingClient, RemotingCommand

    client = RemotingClient()
    pop = PopClient(c.broker_addr, "broker-a", client)
    got = 0
    empty = 0

    async def worker() -> None:
        nonlocal got, empty
        while got < n and empty < 20:
            r = await pop.pop(group, TOPIC, max_nums=32, invisible_ms=60000)
            if not r.messages:
                empty += 1
                continue
            got += len(r.messages)
            if ack == "single":
                for m in r.messages:
                    await pop.ack(group, TOPIC, handle_of(m))
                continue
            groups: dict[tuple, list[int]] = {}
            for m in r.messages:
                f = handle_of(m).split(" ")
                groups.setdefault((f[4], int(f[6]), int(f[0]), int(f[3])), []).append(int(f[7]))
            acks = [{"c": group, "t": TOPIC, "r": retry, "so": so, "q": qid, "rq": rq,
                     "pt": r.pop_time, "it": r.invisible_time, "b": _bitset(offs, so)}
                    for (retry, qid, so, rq), offs in groups.items()]
            resp = await client.invoke(c.broker_addr, RemotingCommand.create_request(
                RequestCode.BATCH_ACK_MESSAGE, None,
                orjson.dumps({"brokerName": "broker-a", "acks": acks})), 5000)
            if resp.code != 0:
                raise RuntimeError(f"batch ack failed: {resp.remark}")

    try:
        await asyncio.gather(*(worker() for _ in range(inflight)))
    finally:
        await client.close()
    return got


async def redelivery_lateness(c: Cluster, rounds: int) -> dict:
    """How long after popTime + invisibleTime an unacked message is popped
    again (a held pop waiting for it), ms."""
    from rmq.client import ClientConfig, Message, Producer
    from rmq.client.pop import PopClient, handle_of
    from rmq.remoting import RemotingClient

    await create_topic(c.broker_addr, c.namesrv_addr, "BenchRevive", 1)
    client = RemotingClient()
    pop = PopClient(c.broker_addr, "broker-a", client)
    late: list[float] = []
    try:
        async with Producer("bench_pop_revive", client_config=ClientConfig(
                namesrv_addr=c.namesrv_addr, client_ip="127.0.0.1", instance_name="rv")) as p:
            for _ in range(rounds):
                await p.send(Message("BenchRevive", b"r"))
                first = await pop.pop("bench_revive", "BenchRevive", invisible_ms=1000,
                                      poll_ms=3000)
                again = await pop.pop("bench_revive", "BenchRevive", invisible_ms=1000,
                                      poll_ms=5000)
                late.append(time.time() * 1000 - (first.pop_time + 1000))
                for m in again.messages:
                    await pop.ack("bench_revive", "BenchRevive", handle_of(m))
    finally:
        await client.close()
    late.sort()
    if not late:  # --revive-rounds 0: not measured
        return {"rounds": 0}
    return {"rounds": rounds, "late_ms_min": round(late[0], 1),
            "late_ms_median": round(late[len(late) // 2], 1), "late_ms_max": round(late[-1], 1)}


def _path(what: str, windows: list[tuple[int, float, float]], passes: int) -> dict:
    """A path's figures over all its windows, with each window's CPU µs per
    message beside them."""
    out = figures(what, sum(w[0] for w in windows), sum(w[1] for w in windows),
                  sum(w[2] for w in windows))
    out["passes"] = passes
    out["cpu_us_per_msg"] = round(sum(w[2] for w in windows) / max(out["msgs"], 1) * 1e6, 3)
    out["rounds_us_per_msg"] = [round(w[2] / max(w[0], 1) * 1e6, 3) for w in windows]
    print(json.dumps(out), flush=True)
    return out


async def rounds(c: Cluster, args: argparse.Namespace) -> tuple[dict, dict]:
    """``args.rounds`` alternations of the pull passes and a pop pass: the two
    paths' figures, each over its windows together."""
    pulls: list[tuple[int, float, float]] = []
    pops: list[tuple[int, float, float]] = []
    for r in range(args.rounds):
        await asyncio.sleep(SETTLE_S)
        pulls.append(await window(c, lambda cpu: pull_all(c, args.messages, args.inflight,
                                                          args.pull_passes)))
        group = "bench_pop" if r == 0 else f"bench_pop{r}"
        await asyncio.sleep(SETTLE_S)
        pops.append(await window(c, lambda cpu, g=group: pop_all(c, args.messages, args.inflight,
                                                                 args.ack, g),
                                 args.spy if r == 0 else None))
    return (_path("pull", pulls, args.rounds * args.pull_passes),
            _path(f"pop+{args.ack}-ack", pops, args.rounds))


async def main(args: argparse.Namespace) -> dict:
    conf = {}
    if args.no_pull_lane:  # pulls through the processor table, as pops are served
        conf["rmqPullLaneEnable"] = "false"
    if args.no_pop_lane:  # pops and acks through the processor table
        conf["rmqPopLaneEnable"] = "false"
    c = start_cluster(args.twin, conf)
    try:
        await create_topic(c.broker_addr, c.namesrv_addr, TOPIC, QUEUES)
        await fill(c, args.messages, args.size)
        await asyncio.sleep(1)  # everything dispatched
        pull, pop = await rounds(c, args)
        revive = await redelivery_lateness(c, args.revive_rounds)
        print(json.dumps(revive), flush=True)
    finally:
        c.stop()
    return {"pull": pull, "pop": pop, "revive": revive,
            "pop_vs_pull_msgs_per_s": round(pop["msgs_per_s"] / pull["msgs_per_s"], 2),
            # of the unrounded figures (the printed ones have one decimal)
            "pop_vs_pull_cpu_per_msg": round(pop["cpu_us_per_msg"] / pull["cpu_us_per_msg"], 2),
            "pop_vs_pull_cpu_per_msg_rounds": [
                round(p / q, 2) for p, q in zip(pop["rounds_us_per_msg"], pull["rounds_us_per_msg"],
                                                strict=True)]}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=50000)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--inflight", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3,
                    help="alternations of the pull passes and a pop pass, each path's figures "
                         "over all of its windows")
    ap.add_argument("--pull-passes", type=int, default=2,
                    help="passes of pull over the messages per round")
    ap.add_argument("--ack", choices=("batch", "single"), default="batch")
    ap.add_argument("--twin", action="store_true")
    ap.add_argument("--revive-rounds", type=int, default=10)
    ap.add_argument("--no-pull-lane", action="store_true",
                    help="serve pulls through the processor (rmqPullLaneEnable=false)")
    ap.add_argument("--no-pop-lane", action="store_true",
                    help="serve pops and acks through the processor (rmqPopLaneEnable=false)")
    ap.add_argument("--spy", help="write py-spy's collapsed stacks of the pop path here")
    ap.add_argument("--json", action="store_true")
    result = asyncio.run(main(ap.parse_args()))
    print(json.dumps(result) if "--json" in sys.argv else
          f"pop/pull msgs/s {result['pop_vs_pull_msgs_per_s']}x, broker CPU per message "
          f"{result['pop_vs_pull_cpu_per_msg']}x")
