"""The pull lane answers exactly what the general path does.

The same messages are stored, then one stream of requests -- pulls that find
messages (every spelling of the header, JSON and ROCKETMQ binary, from many
offsets, batch sizes and tag filters, with and without an offset commit),
pulls that find nothing (at the end of a queue, held by long polling or not,
beyond it, filtered out, of an unknown topic or queue, without a
subscription, SQL92) and other requests between them -- is written in a few
large writes to a real broker three times: with the compiled lane, with the twin lane
(``RMQ_NO_EXTENSIONS=1``) and with the lane off (``rmqPullLaneEnable=false``).
Every response must be the same bytes (the records' store times and the
producer's port aside), and so must the statistics (GROUP_GET_NUMS /
GROUP_GET_SIZE, the broker's get total) and the committed offsets.  Small
commit-log files make pulls cross file ends, where runs of records split.
Then a run of pulls whose subscriptions hold tags past ASCII (messages tagged
so are at each queue's end), in both header serializations: the lanes must
serve every one of them (rmqPullLaneServed), with the general path's bytes."""

from __future__ import annotations

import asyncio
import random
import re
import struct
from pathlib import Path

import orjson
import pytest

from rmq.client.codec import encode_batch
from rmq.client.headers import pull_header, send_header_v2
from rmq.client.message import Message
from rmq.common.codes import RequestCode
from rmq.remoting.command import RemotingCommand
from rmq.testing.cluster import lane_broker
from rmq.testing.frames import FrameCollector
from rmq.testing.procs import free_port
from rmq.testing.store import BORNHOST_V6_FLAG, MESSAGE_MAGIC

R = RequestCode
TOPIC = "PullLaneTopic"
GROUP = "pullLaneGroup"
QUEUES = 512  # the topic's
# the queues sent to and pulled from: ids past 256 (beyond CPython's cached
# small ints) among them
QUEUE_IDS = (0, 1, 300, 301)
SUB, SUSPEND, COMMIT = 0x4, 0x2, 0x1
WIDE_TAG = "标签"  # a tag past ASCII
WIDE_SUBS = [WIDE_TAG, f"TagA || {WIDE_TAG}", f"é || {WIDE_TAG} || \U0001F600"]


def _frame(code: int, ext: dict, body: bytes | None, opaque: int, stype: int = 0) -> bytes:
    return RemotingCommand(code, 0, 409, opaque, 0, None, ext, body, stype).encode()


def _sends() -> tuple[list[bytes], int]:
    """Single sends (tags A, B or none, bodies of many sizes) and batches,
    spread over the queues (about 1.3 MiB: several commit-log files), and how
    many messages they store."""
    rnd = random.Random(5)
    frames = []
    count = 0
    for i in range(900):
        queue = rnd.choice(QUEUE_IDS)
        size = rnd.choice([0, 10, 300, 1024, 3000])
        body = bytes((i + j) % 251 for j in range(size))
        if rnd.random() < 0.1:
            msgs = [Message(TOPIC, body[:200], properties={"UNIQ_KEY": f"B{i:06d}{j:04d}",
                                                           "TAGS": rnd.choice(["TagA", "TagB"])})
                    for j in range(rnd.randrange(2, 20))]
            ext = send_header_v2("pg", TOPIC, "TBW102", QUEUES, queue, 0, 1_700_000_000_000 + i,
                                 0, "", True, "broker-a")
            frames.append(_frame(R.SEND_BATCH_MESSAGE, ext, encode_batch(msgs), i))
            count += len(msgs)
            continue
        props = {"UNIQ_KEY": f"7F00000100002A9F0000{i:012X}", "WAIT": "true"}
        tag = rnd.choice(["TagA", "TagB", None])
        if tag:
            props["TAGS"] = tag
        ext = send_header_v2("pg", TOPIC, "TBW102", QUEUES, queue, 0, 1_700_000_000_000 + i, 0,
                             "\x02".join(f"{k}\x01{v}" for k, v in props.items()), False,
                             "broker-a")
        frames.append(_frame(R.SEND_MESSAGE_V2, ext, body, i))
        count += 1
    for queue in QUEUE_IDS:  # each queue ends with messages of a tag past ASCII
        for j in range(3):
            ext = send_header_v2("pg", TOPIC, "TBW102", QUEUES, queue, 0, 1_700_000_001_000 + j,
                                 0, f"UNIQ_KEY\x01W{queue}{j}\x02TAGS\x01{WIDE_TAG}", False,
                                 "broker-a")
            frames.append(_frame(R.SEND_MESSAGE_V2, ext, b"wide %d" % j, 900 + queue * 3 + j))
            count += 1
    return frames, count


def _cpp_pull(opaque: int, queue: int, offset: int, nums: int, sub: str) -> bytes:
    """A pull as the C++ client writes it (numbers unquoted for some fields,
    language CPP, credentials fields, a trailing newline)."""
    ext = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": queue, "queueOffset": str(offset),
           "maxMsgNums": nums, "sysFlag": SUB, "commitOffset": "0",
           "suspendTimeoutMillis": "0", "subscription": sub, "subVersion": "0",
           "AccessKey": "", "OnsChannel": "ALIYUN", "Signature": "c2ln"}
    head = orjson.dumps({"code": 11, "extFields": ext, "flag": 0, "language": "CPP",
                         "opaque": opaque, "remark": "", "version": 63}) + b"\n"
    return struct.pack(">ii", 4 + len(head), len(head)) + head


def _pulls(max_offsets: dict[int, int]) -> tuple[list[bytes], int]:
    """The pull stream and how many answers it gets (every request is answered)."""
    rnd = random.Random(11)
    frames: list[bytes] = []
    op = 10_000

    def pull(queue: int, offset: int, nums: int = 32, flag: int = SUB, sub: str | None = "*",
             topic: str = TOPIC, group: str = GROUP, commit: int = 0, suspend: int = 0,
             expression: str = "TAG", stype: int = 0) -> None:
        nonlocal op
        op += 1
        ext = pull_header(group, topic, queue, offset, nums, flag, commit, suspend, sub, 0,
                          expression, "broker-a")
        frames.append(_frame(R.PULL_MESSAGE, ext, None, op, stype))

    for _ in range(400):
        queue = rnd.choice(QUEUE_IDS)
        top = max_offsets[queue]
        roll = rnd.random()
        if roll < 0.55:  # found: from anywhere, any batch size, some commit the offset
            commit = rnd.random() < 0.3
            pull(queue, rnd.randrange(top), rnd.choice([1, 3, 16, 32, 64]),
                 SUB | (COMMIT if commit else 0), commit=rnd.randrange(top) if commit else 0,
                 stype=1 if rnd.random() < 0.3 else 0)  # some with the ROCKETMQ header
        elif roll < 0.65:  # tag filters: some match, some never do
            pull(queue, rnd.randrange(top), 32,
                 sub=rnd.choice(["TagA", "TagA || TagB", "TagB", "TagC"]))
        elif roll < 0.7:
            op += 1
            frames.append(_cpp_pull(op, queue, rnd.randrange(top), 32, "TagA || TagB"))
        elif roll < 0.75:
            pull(queue, top)  # caught up: PULL_NOT_FOUND
        elif roll < 0.78:
            pull(queue, top, flag=SUB | SUSPEND, suspend=300)  # held, answered at its timeout
        elif roll < 0.82:
            pull(queue, top + rnd.randrange(1, 50))  # beyond the end: OFFSET_MOVED
        elif roll < 0.84:
            pull(queue, 0, topic="NoSuchTopic")
        elif roll < 0.86:
            pull(QUEUES + 3, 0)  # no such queue
        elif roll < 0.88:
            pull(queue, 0, flag=0, sub=None)  # no subscription in the request, no heartbeat
        elif roll < 0.9:
            pull(queue, 0, sub="a > 1", expression="SQL92")
        elif roll < 0.92:
            pull(queue, rnd.randrange(top), stype=1)  # ROCKETMQ header
        elif roll < 0.94:
            op += 1
            frames.append(_frame(R.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": str(queue)},
                                 None, op))
        else:
            pull(queue, rnd.randrange(top), rnd.choice([1, 32]), group=f"other{queue}")
    return frames, len(frames)


def _wide_pulls(max_offsets: dict[int, int]) -> list[bytes]:
    """Pulls near each queue's end whose subscriptions hold tags past ASCII,
    JSON and ROCKETMQ headers: every one finds messages."""
    frames = []
    for i, (queue, sub, stype) in enumerate(
            (q, sub, stype) for q in QUEUE_IDS for sub in WIDE_SUBS for stype in (0, 1)):
        ext = pull_header(GROUP, TOPIC, queue, max_offsets[queue] - 6, 32, SUB, 0, 0, sub, 0,
                          "TAG", "broker-a")
        frames.append(_frame(R.PULL_MESSAGE, ext, None, 20_000 + i, stype))
    return frames


async def _served(transport, reader: FrameCollector) -> int:
    info = await _call(transport, reader, R.GET_BROKER_RUNTIME_INFO, None, 4)
    return int(orjson.loads(info.body)["table"]["rmqPullLaneServed"])


async def _call(transport, reader: FrameCollector, code: int, ext: dict | None, opaque: int):
    done = reader.expect(1)
    transport.write(_frame(code, ext, None, opaque))
    await asyncio.wait_for(done, 10)
    return RemotingCommand.decode(reader.frames.pop(opaque)[4:])


async def _run(tmp: Path, port: int, mode: str) -> tuple[dict, dict]:
    proc = lane_broker(tmp, port, mode,
                       f"rmqPullLaneEnable={'false' if mode == 'general' else 'true'}"
                       "\nenablePropertyFilter=true\nmappedFileSizeCommitLog=262144\n")
    try:
        loop = asyncio.get_running_loop()
        reader = FrameCollector()
        transport, _ = await loop.create_connection(lambda: reader, "127.0.0.1", port)
        created = await _call(transport, reader, R.UPDATE_AND_CREATE_TOPIC, {
            "topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": str(QUEUES),
            "writeQueueNums": str(QUEUES), "perm": "6", "topicFilterType": "SINGLE_TAG"}, 1)
        assert created.code == 0, created.remark
        sends, stored = _sends()
        done = reader.expect(len(sends))
        transport.write(b"".join(sends))
        await asyncio.wait_for(done, 60)
        assert all(RemotingCommand.decode(f[4:]).code == 0 for f in reader.frames.values())
        reader.frames.clear()
        for _ in range(200):  # until every message is dispatched to its consume queue
            max_offsets = {q: int((await _call(transport, reader, R.GET_MAX_OFFSET,
                                               {"topic": TOPIC, "queueId": str(q)}, 3))
                                  .ext_fields["offset"]) for q in QUEUE_IDS}
            if sum(max_offsets.values()) == stored:
                break
            await asyncio.sleep(0.05)
        assert sum(max_offsets.values()) == stored
        frames, want = _pulls(max_offsets)
        done = reader.expect(want)
        for i in range(0, len(frames), 60):  # a few large writes: runs of pulls per read
            transport.write(b"".join(frames[i:i + 60]))
            await asyncio.sleep(0.02)
        await asyncio.wait_for(done, 60)
        before = await _served(transport, reader)
        wide = _wide_pulls(max_offsets)
        done = reader.expect(len(wide))
        transport.write(b"".join(wide))
        await asyncio.wait_for(done, 30)
        answers = dict(reader.frames)
        facts: dict = {"max": max_offsets, "wide_served": await _served(transport, reader) - before}
        info = await _call(transport, reader, R.GET_BROKER_RUNTIME_INFO, None, 4)
        table = orjson.loads(info.body)["table"]
        facts["get_total"] = table["msgGetTotalTodayNow"]
        facts["served"] = int(table["rmqPullLaneServed"])
        for name in ("GROUP_GET_NUMS", "GROUP_GET_SIZE"):
            view = await _call(transport, reader, R.VIEW_BROKER_STATS_DATA,
                               {"statsName": name, "statsKey": f"{TOPIC}@{GROUP}"}, 5)
            minute = orjson.loads(view.body)["statsMinute"]
            facts[name] = (minute["sum"], minute["avgpt"])
        for q in QUEUE_IDS:
            got = await _call(transport, reader, R.QUERY_CONSUMER_OFFSET,
                              {"consumerGroup": GROUP, "topic": TOPIC, "queueId": str(q)}, 6)
            facts[f"offset{q}"] = (got.code, got.ext_fields)
        transport.close()
    finally:
        assert proc.stop() == 0, proc.output()
    return answers, facts


def _normalized(frame: bytes) -> tuple:
    """A response: its header bytes (a refusal's remark without the client's
    port: it names the connection), and its records with the store time and
    the born host (the producer connection's port) zeroed."""
    hlen = struct.unpack_from(">i", frame, 4)[0] & 0xFFFFFF
    head, body = frame[:8 + hlen], bytearray(frame[8 + hlen:])
    cmd = RemotingCommand.decode(frame[4:])
    if cmd.remark and "127.0.0.1:" in cmd.remark:
        head = re.sub(rb"127\.0\.0\.1:\d+", b"ADDR", head[8:])
    if cmd.code == 0 and body:  # records (a FOUND pull's, a pop's)
        pos = 0
        while pos < len(body):
            size, magic = struct.unpack_from(">ii", body, pos)
            assert magic == MESSAGE_MAGIC
            sys_flag = struct.unpack_from(">i", body, pos + 36)[0]
            ts_at = pos + 48 + (20 if sys_flag & BORNHOST_V6_FLAG else 8)
            body[pos + 48:ts_at + 8] = bytes(ts_at + 8 - pos - 48)
            pos += size
    return head, bytes(body)


@pytest.mark.timeout(240)
async def test_lane_twin_and_general_path_answer_the_same(tmp_path):
    port = free_port(span=4) + 2
    results = {mode: await _run(tmp_path, port, mode) for mode in ("lane", "twin", "general")}
    base, base_facts = results["general"]
    assert base_facts.pop("served") == 0 and base_facts.pop("wide_served") == 0
    wide = [RemotingCommand.decode(f[4:]) for op, f in base.items() if op >= 20_000]
    assert len(wide) == 24 and all(c.code == 0 and c.remark == "FOUND" for c in wide)
    codes = [RemotingCommand.decode(f[4:]).code for f in base.values()]
    assert codes.count(0) > 200 and {19, 20, 21, 17, 24} <= set(codes), sorted(set(codes))
    for mode in ("lane", "twin"):
        answers, facts = results[mode]
        assert facts.pop("served") > 150, mode
        assert facts.pop("wide_served") == 24, mode  # every pull past ASCII, both headers
        assert facts == base_facts, mode
        assert answers.keys() == base.keys(), mode
        for opaque, frame in base.items():
            assert _normalized(answers[opaque]) == _normalized(frame), (mode, opaque)
