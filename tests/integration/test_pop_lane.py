"""The pop lane answers exactly what the general path does.

The same messages are stored, then one stream of pops -- that find messages
(one queue and queueId -1, many batch sizes, TAG filters, JSON and ROCKETMQ
headers), that find nothing, that the lane leaves to the general path
(refusals, orderly pops, SQL92, a missing field) and other requests between
them -- is written in a few large writes to a real broker three times: with
the compiled lane, with the twin lane (``RMQ_NO_EXTENSIONS=1``) and with the
lane off (``rmqPopLaneEnable=false``).  Then the acks of what was popped
(BATCH_ACK_MESSAGE and ACK_MESSAGE, good and bad), then pops again.  Every
answer must be the same bytes (the pop time, the records' store times and the
producer's port aside), and so must the statistics, the group's offsets and
the revive queues' records."""

from __future__ import annotations

import asyncio
import base64
import random
import re
from pathlib import Path

import orjson
import pytest

from rmq.client.headers import send_header_v2
from rmq.common.codes import RequestCode
from rmq.remoting.command import RemotingCommand
from rmq.testing.cluster import lane_broker
from rmq.testing.frames import FrameCollector
from rmq.testing.procs import free_port
from tests.integration.test_pull_lane import QUEUE_IDS, _call, _frame, _normalized

R = RequestCode
TOPIC, ONE, IDLE = "PopLaneTopic", "PopLaneOne", "PopLaneIdle"
GROUP, ORDER_GROUP = "popLaneGroup", "popLaneOrder"
QUEUES = 512  # TOPIC's; sent to and popped from are test_pull_lane's QUEUE_IDS
SENT = 1600
REVIVE = "rmq_sys_REVIVE_LOG_DefaultCluster"
_POP_TIME = re.compile(rb'(popTime(?:":"|\x00\x00\x00\x0d))\d{13}')


def _sends() -> list[bytes]:
    rnd = random.Random(3)
    frames = []
    for i in range(SENT):
        topic, queue = (ONE, 0) if i % 5 == 4 else (TOPIC, rnd.choice(QUEUE_IDS))
        props = f"UNIQ_KEY\x017F0000010000{i:012X}\x02TAGS\x01{rnd.choice(['TagA', 'TagB'])}"
        ext = send_header_v2("pg", topic, "TBW102", QUEUES, queue, 0, 1_700_000_000_000 + i, 0,
                             props, False, "broker-a")
        frames.append(_frame(R.SEND_MESSAGE_V2, ext, bytes(rnd.randrange(256) for _ in
                                                            range(rnd.choice([0, 9, 300]))), i))
    return frames


def _pop(op: int, topic: str, queue: int, nums: int, *, group: str = GROUP, exp: str = "*",
         exp_type: str = "TAG", invisible: int = 60000, poll: int = 0, order: bool = False,
         drop: str | None = None) -> bytes:
    ext = {"consumerGroup": group, "topic": topic, "queueId": str(queue),
           "maxMsgNums": str(nums), "invisibleTime": str(invisible), "pollTime": str(poll),
           "bornTime": "0", "initMode": "0", "expType": exp_type, "exp": exp,
           "order": "true" if order else "false", "bname": "broker-a"}
    if drop:
        del ext[drop]
    return _frame(R.POP_MESSAGE, ext, None, op)


def _pops(first: int) -> list[bytes]:
    """Pops (JSON headers: a ROCKETMQ header's code is 16 bits, the 5.x request
    codes do not fit), each topic's in its own opaque range."""
    rnd = random.Random(7)
    frames = []
    for i in range(160):
        op = first + i
        roll = rnd.random()
        if roll < 0.55:
            frames.append(_pop(op, TOPIC, rnd.choice(QUEUE_IDS), rnd.choice([1, 5, 16, 32]),
                               exp=rnd.choice(["*", "*", "TagA", "TagA || TagB"])))
        elif roll < 0.65:
            frames.append(_pop(op + 5000, ONE, -1, rnd.choice([3, 32])))
        elif roll < 0.7:
            frames.append(_pop(op, TOPIC, rnd.choice(QUEUE_IDS), 4, group=ORDER_GROUP,
                               order=True))
        elif roll < 0.73:
            frames.append(_pop(op, TOPIC, 0, 8, exp="a > 1", exp_type="SQL92"))
        elif roll < 0.76:
            frames.append(_pop(op, "NoSuchTopic", 0, 8))
        elif roll < 0.79:
            frames.append(_pop(op, TOPIC, QUEUES + 5, 8))
        elif roll < 0.82:
            frames.append(_pop(op, TOPIC, 0, 40))
        elif roll < 0.84:
            frames.append(_pop(op, TOPIC, 0, 8, invisible=0))
        elif roll < 0.86:
            frames.append(_pop(op, TOPIC, 0, 8, drop="consumerGroup"))
        elif roll < 0.92:
            frames.append(_pop(op, IDLE, rnd.choice([-1, 0]), 8))  # nothing there
        else:
            frames.append(_frame(R.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": "1"}, None, op))
    return frames


def _acks(answers: dict[int, bytes], first: int) -> list[bytes]:
    """Acks of what the pops answered: batch acks of some answers, single acks
    of others, and bad ones."""
    frames = []
    op = first
    for opaque in sorted(answers):
        r = RemotingCommand.decode(answers[opaque][4:])
        ext = r.ext_fields or {}
        if r.code != 0 or "startOffsetInfo" not in ext or "orderCountInfo" in ext:
            continue
        entries = []
        topic = ONE if opaque % 10_000 >= 5000 else TOPIC
        for so, mo in zip(ext["startOffsetInfo"].split(";"), ext["msgOffsetInfo"].split(";"),
                          strict=True):
            _retry, qid, start = so.split(" ")
            offsets = [int(x) for x in mo.split(" ")[2].split(",")]
            entries.append((topic, int(qid), int(start), offsets))
        op += 1
        if opaque % 3 == 0:  # one ACK_MESSAGE per message
            for topic, qid, start, offsets in entries:
                for o in offsets:
                    handle = (f"{start} {ext['popTime']} {ext['invisibleTime']} "
                              f"{ext['reviveQid']} 0 broker-a {qid} {o}")
                    frames.append(_frame(R.ACK_MESSAGE, {
                        "consumerGroup": GROUP, "topic": topic, "queueId": str(qid),
                        "offset": str(o), "extraInfo": handle}, None, op))
                    op += 1
            continue
        acks = []
        for topic, qid, start, offsets in entries:
            raw = bytearray((max(offsets) - start) // 8 + 1)
            for o in offsets[:: 1 + opaque % 2]:  # some acks leave messages out
                raw[(o - start) // 8] |= 1 << ((o - start) % 8)
            acks.append({"c": GROUP, "t": topic, "r": "0", "so": start, "q": qid,
                         "rq": int(ext["reviveQid"]), "pt": int(ext["popTime"]),
                         "it": int(ext["invisibleTime"]),
                         "b": base64.b64encode(bytes(raw)).decode()})
        frames.append(_frame(R.BATCH_ACK_MESSAGE, None,
                             orjson.dumps({"brokerName": "broker-a", "acks": acks}), op))
    bad = [
        (R.BATCH_ACK_MESSAGE, None, b"{not json"),
        (R.BATCH_ACK_MESSAGE, None, orjson.dumps({"acks": [{"c": GROUP, "t": "NoSuchTopic",
                                                            "q": 0, "so": 0, "rq": 0, "pt": 1,
                                                            "b": "AQ=="}]})),
        (R.BATCH_ACK_MESSAGE, None, orjson.dumps({"acks": [{"c": GROUP, "t": TOPIC}]})),
        (R.ACK_MESSAGE, {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "0",
                         "offset": "999999", "extraInfo": "0 1 60000 0 0 broker-a 0 0"}, None),
        (R.ACK_MESSAGE, {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "9",
                         "offset": "0", "extraInfo": "0 1 60000 0 0 broker-a 9 0"}, None),
        (R.ACK_MESSAGE, {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "0",
                         "offset": "0", "extraInfo": "bad"}, None),
    ]
    for code, ext, body in bad:
        op += 1
        frames.append(_frame(code, ext, body, op))
    return frames


async def _write(transport, reader: FrameCollector, frames: list[bytes]) -> dict[int, bytes]:
    reader.frames.clear()
    done = reader.expect(len(frames))
    for i in range(0, len(frames), 40):  # a few large writes: runs of requests per read
        transport.write(b"".join(frames[i:i + 40]))
        await asyncio.sleep(0.02)
    await asyncio.wait_for(done, 60)
    got = dict(reader.frames)
    reader.frames.clear()
    return got


async def _run(tmp: Path, port: int, mode: str) -> tuple[list[dict], dict]:
    proc = lane_broker(tmp, port, mode, "enablePropertyFilter=true\n"
                       f"rmqPopLaneEnable={'false' if mode == 'general' else 'true'}\n")
    try:
        loop = asyncio.get_running_loop()
        reader = FrameCollector()
        transport, _ = await loop.create_connection(lambda: reader, "127.0.0.1", port)
        for topic, n in ((TOPIC, QUEUES), (ONE, 1), (IDLE, 2)):
            created = await _call(transport, reader, R.UPDATE_AND_CREATE_TOPIC, {
                "topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(n),
                "writeQueueNums": str(n), "perm": "6", "topicFilterType": "SINGLE_TAG"}, 1)
            assert created.code == 0, created.remark
        sent = await _write(transport, reader, _sends())
        assert all(RemotingCommand.decode(f[4:]).code == 0 for f in sent.values())
        for _ in range(200):  # until every message is dispatched to its consume queue
            total = 0
            for topic, q in [(TOPIC, q) for q in QUEUE_IDS] + [(ONE, 0)]:
                got = await _call(transport, reader, R.GET_MAX_OFFSET,
                                  {"topic": topic, "queueId": str(q)}, 3)
                total += int(got.ext_fields["offset"])
            if total == SENT:
                break
            await asyncio.sleep(0.05)
        assert total == SENT
        pops = await _write(transport, reader, _pops(10_000))
        acks = await _write(transport, reader, _acks(pops, 20_000))
        again = await _write(transport, reader, _pops(30_000))
        # held: one with nothing to pop (the general path), one whose messages are
        # all filtered out (the lane takes it, it waits, it is answered later)
        ext = send_header_v2("pg", TOPIC, "TBW102", QUEUES, 0, 0, 1_700_000_002_000, 0,
                             "TAGS\x01TagA", False, "broker-a")
        sent = await _write(transport, reader, [_frame(R.SEND_MESSAGE_V2, ext, b"late", 3)])
        assert RemotingCommand.decode(sent[3][4:]).code == 0
        await asyncio.sleep(0.3)  # dispatched
        held = await _write(transport, reader, [_pop(40_000, IDLE, -1, 8, poll=300),
                                                _pop(40_001, TOPIC, 0, 8, poll=300,
                                                     exp="NoSuchTag")])
        facts: dict = {}
        info = await _call(transport, reader, R.GET_BROKER_RUNTIME_INFO, None, 4)
        table = orjson.loads(info.body)["table"]
        facts["served"] = int(table["rmqPopLaneServed"])
        facts["get_total"] = table["msgGetTotalTodayNow"]
        for group, topic in ((GROUP, TOPIC), (GROUP, ONE), (ORDER_GROUP, TOPIC)):
            view = await _call(transport, reader, R.VIEW_BROKER_STATS_DATA,
                               {"statsName": "GROUP_GET_NUMS", "statsKey": f"{topic}@{group}"}, 5)
            facts[f"nums {topic}@{group}"] = orjson.loads(view.body)["statsMinute"]["sum"]
            for q in QUEUE_IDS if topic == TOPIC else (0,):
                got = await _call(transport, reader, R.QUERY_CONSUMER_OFFSET,
                                  {"consumerGroup": group, "topic": topic, "queueId": str(q)}, 6)
                facts[f"offset {topic}@{group} {q}"] = (got.code, got.ext_fields)
        for q in range(8):
            got = await _call(transport, reader, R.GET_MAX_OFFSET,
                              {"topic": REVIVE, "queueId": str(q)}, 3)
            facts[f"revive {q}"] = got.ext_fields
        transport.close()
    finally:
        assert proc.stop() == 0, proc.output()
    return [pops, acks, again, held], facts


def _same_answer(frame: bytes) -> tuple:
    head, body = _normalized(frame)
    return _POP_TIME.sub(rb"\g<1>0000000000000", head), body


@pytest.mark.timeout(240)
async def test_lane_twin_and_general_path_answer_the_same(tmp_path):
    port = free_port(span=4) + 2
    results = {mode: await _run(tmp_path, port, mode) for mode in ("lane", "twin", "general")}
    base, base_facts = results["general"]
    assert base_facts.pop("served") == 0
    pops = [RemotingCommand.decode(f[4:]) for f in base[0].values()]
    codes = [p.code for p in pops]
    assert codes.count(0) > 80 and {0, 1, 17, 29, 210} <= set(codes), sorted(set(codes))
    acks = [RemotingCommand.decode(f[4:]).code for f in base[1].values()]
    assert acks.count(0) > 60 and set(acks) - {0}, sorted(set(acks))
    for opaque in (40_000, 40_001):  # held, then timed out
        assert RemotingCommand.decode(base[3][opaque][4:]).code == 210
    twin_served = results["twin"][1]["served"]
    for mode in ("lane", "twin"):
        answers, facts = results[mode]
        assert facts.pop("served") == twin_served > 140, mode  # the same requests
        assert facts == base_facts, mode
        for phase, want in zip(answers, base, strict=True):
            assert phase.keys() == want.keys(), mode
            for opaque, frame in want.items():
                assert _same_answer(phase[opaque]) == _same_answer(frame), (mode, opaque)
