"""The send lane stores and answers exactly what the general path does.

One stream of requests -- plain sends in both header spellings and several
JSON shapes, batches, oneway sends, sends the lane must leave to the general path
(transactional, unknown topic, bad queue, a non-ASCII property name; non-ASCII
values are the lane's), the
same with ROCKETMQ binary headers, and other requests between them -- is written in a few
large writes to a real broker three times: with the compiled lane, with the
twin lane (``RMQ_NO_EXTENSIONS=1``) and with the lane off
(``rmqSendLaneEnable=false``).  The responses, the commit-log records (store
timestamps aside), the consume queues and the index entries must be the same
bytes each time; small store files make the stream cross commit-log,
consume-queue and index file ends, where the lane hands over to the general
path and takes over again."""

from __future__ import annotations

import asyncio
import os
import random
import re
import struct
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from rmq.client.codec import encode_batch
from rmq.client.headers import send_header_v2
from rmq.client.message import Message
from rmq.common.codes import RequestCode
from rmq.remoting.command import RemotingCommand
from rmq.store.index import index_file_size
from rmq.testing.cluster import broker_conf
from rmq.testing.frames import FrameCollector
from rmq.testing.procs import RmqProcess, free_port
from rmq.testing.store import BORNHOST_V6_FLAG, MESSAGE_MAGIC
from rmq.testing.wait import wait_until

R = RequestCode
TOPIC = "LaneTopic"
QUEUES = 512  # LaneTopic's


def _props(**kw: str) -> str:
    return "\x02".join(f"{k}\x01{v}" for k, v in kw.items())


def _frame(code: int, ext: dict, body: bytes, opaque: int, flag: int = 0,
           stype: int = 0) -> bytes:
    return RemotingCommand(code, 0, 409, opaque, flag, None, ext, body, stype).encode()


def _cpp_frame(ext: dict, body: bytes, opaque: int) -> bytes:
    """SEND_MESSAGE as the C++ client writes it: V1 names, numbers unquoted,
    its key order, remark "", a trailing newline, credentials fields."""
    head = orjson.dumps({"code": 10, "extFields": ext, "flag": 0, "language": "CPP",
                         "opaque": opaque, "remark": "", "version": 63}) + b"\n"
    return struct.pack(">ii", 4 + len(head) + len(body), len(head)) + head + body


def _odd_json_frame(ext: dict, body: bytes, opaque: int) -> bytes:
    """SEND_MESSAGE_V2 with another key order, whitespace and unknown keys."""
    head = (b' { "version" : 409 , "opaque":%d,"serializeTypeCurrentRPC":"JSON", "extFields":'
            % opaque + orjson.dumps(ext) + b', "x":[1,{"y":null}],"code":310,"flag":0 }\t')
    return struct.pack(">ii", 4 + len(head) + len(body), len(head)) + head + body


def _stream(seed: int) -> tuple[list[bytes], set[int]]:
    """The request frames and the opaques that expect no answer."""
    rnd = random.Random(seed)
    frames: list[bytes] = []
    oneway: set[int] = set()
    op = 0
    for i in range(1500):
        op += 1
        body = os.urandom(rnd.choice([0, 10, 300, 1024, 3000]))
        kw = {"UNIQ_KEY": f"7F00000100002A9F0000{i:012X}", "WAIT": rnd.choice(["true", "false"])}
        if rnd.random() < 0.7:
            kw["TAGS"] = rnd.choice(["TagA", "TagB", 'q"uote', "back\\slash"])
        if rnd.random() < 0.9:
            kw["KEYS"] = rnd.choice([f"k{i} a{i} b{i}", f"k{i} shared", f" k{i}  x{i % 7} y{i} "])
        roll = rnd.random()
        if roll < 0.03:
            kw["TRAN_MSG"] = "true"
        elif roll < 0.04:
            kw["TAGS"] = "café"  # non-ASCII values: tagsCode over UTF-16 units
        elif roll < 0.05:
            kw["CLUSTER"] = "Mine"
        elif roll < 0.07:
            kw["TAGS"] = "标签\U0001F600"  # a code point past U+FFFF: a surrogate pair
            kw["KEYS"] = f"键{i} ключ{i % 5} k{i}"  # index slots hashed the same way
        elif roll < 0.075:
            kw["名字"] = "值"  # a non-ASCII key: the general path places it
        items = list(kw.items())
        rnd.shuffle(items)
        props = _props(**dict(items))
        topic = TOPIC if rnd.random() > 0.02 else f"Auto{i % 3}"
        where = rnd.random()
        # queue ids past 256 (beyond CPython's cached small ints) among them,
        # and an illegal one
        queue = rnd.randrange(4) if where < 0.9 else 300 + rnd.randrange(3) if where < 0.99 \
            else QUEUES + 5
        ext = send_header_v2("pg", topic, "TBW102", 4, queue, rnd.choice([0, 0, 1]),
                             1_700_000_000_000 + i, rnd.randrange(3), props, False, "broker-a")
        kind = rnd.random()
        if kind < 0.1:  # a batch of a few messages, keys and tags of their own
            inner = [Message(topic, os.urandom(rnd.choice([0, 200, 1024])),
                             properties={"UNIQ_KEY": f"B{i:08d}{j:04d}", "KEYS": f"b{i} c{j}",
                                         "TAGS": rnd.choice(["TagA", "TagB"])})
                     for j in range(rnd.randrange(1, 12))]
            ext["m"] = "true"
            ext["i"] = rnd.choice(["", "WAIT\x01true", "WAIT\x01false\x02KEYS\x01all"])
            flag = 2 if rnd.random() < 0.05 else 0
            if flag:
                oneway.add(op)
            frames.append(_frame(R.SEND_BATCH_MESSAGE, ext, encode_batch(inner), op, flag,
                                 rnd.choice([0, 1])))
        elif kind < 0.6:
            flag = 2 if rnd.random() < 0.05 else 0
            if flag:
                oneway.add(op)
            # a third with the ROCKETMQ binary header (rocketmq.serialize.type=ROCKETMQ)
            frames.append(_frame(R.SEND_MESSAGE_V2, ext, body, op, flag,
                                 1 if rnd.random() < 0.35 else 0))
        elif kind < 0.8:
            v1 = {"producerGroup": "pg", "topic": topic, "defaultTopic": "TBW102",
                  "defaultTopicQueueNums": 4, "queueId": queue, "sysFlag": 0,
                  "bornTimestamp": str(1_700_000_000_000 + i), "flag": 0, "properties": props,
                  "reconsumeTimes": "0", "unitMode": "0", "batch": "0", "AccessKey": "",
                  "OnsChannel": "ALIYUN", "Signature": "c2lnbmF0dXJl"}
            frames.append(_cpp_frame(v1, body, op))
        elif kind < 0.97:
            frames.append(_odd_json_frame(ext, body, op))
        else:  # SEND_MESSAGE with the ROCKETMQ header, an empty value (absent) among its fields
            v1 = {"producerGroup": "pg", "topic": topic, "defaultTopic": "TBW102",
                  "defaultTopicQueueNums": "4", "queueId": str(queue), "sysFlag": "0",
                  "bornTimestamp": str(1_700_000_000_000 + i), "flag": "0", "properties": props,
                  "reconsumeTimes": "0", "unitMode": "false", "batch": "", "bname": "broker-a"}
            frames.append(_frame(R.SEND_MESSAGE, v1, body, op, 0, 1))
        if rnd.random() < 0.02:
            op += 1
            frames.append(_frame(R.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": "1"}, b"", op))
    return frames, oneway


async def _run(tmp: Path, port: int, mode: str, frames: list[bytes], want: int,
               extra: str, ready: Callable[[Any, FrameCollector], Awaitable[None]] | None = None
               ) -> tuple[dict, Path, int]:
    """Start a broker (``extra`` lines in its conf), create the topic, await
    ``ready(transport, reader)`` when given (it pops the answers it asked
    for), write ``frames``; the answers by opaque, the store and the lane's
    count."""
    store = tmp / mode
    conf = broker_conf(tmp, port, f"rmqSendLaneEnable={'false' if mode == 'general' else 'true'}\n"
                       f"autoCreateTopicEnable=true\n{extra}", store=mode)
    env = {"ROCKETMQ_HOME": str(tmp / f"home-{mode}")}
    if mode == "twin":
        env["RMQ_NO_EXTENSIONS"] = "1"
    proc = RmqProcess("rmq.broker.startup", ["-c", conf], tmp / f"broker-{mode}.out", env=env)
    proc.start(wait_for_port=port)
    try:
        loop = asyncio.get_running_loop()
        admin = RemotingCommand.create_request(R.UPDATE_AND_CREATE_TOPIC, {
            "topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": str(QUEUES),
            "writeQueueNums": str(QUEUES), "perm": "6", "topicFilterType": "SINGLE_TAG"})
        admin.opaque = 0
        reader = FrameCollector()
        done = reader.expect(want + 1)
        transport, _ = await loop.create_connection(lambda: reader, "127.0.0.1", port)
        transport.write(admin.encode())
        await wait_until(lambda: 0 in reader.frames, 10, 0.01, "the topic created")
        if ready is not None:
            await ready(transport, reader)
        for i in range(0, len(frames), 200):  # a few large writes: runs of frames per read
            transport.write(b"".join(frames[i:i + 200]))
            await asyncio.sleep(0.05)
        await asyncio.wait_for(done, 60)
        info = RemotingCommand.create_request(R.GET_BROKER_RUNTIME_INFO)
        info.opaque = 10**9
        done = reader.expect(1)
        transport.write(info.encode())
        await asyncio.wait_for(done, 10)
        table = orjson.loads(RemotingCommand.decode(reader.frames.pop(10**9)[4:]).body)["table"]
        served = int(table["rmqSendLaneServed"])
        # the put statistics: messages, bytes, and puts (a batch is one) by latency bucket
        puts = sum(int(part.rpartition(":")[2])
                   for part in table["putMessageDistributeTime"].split())
        reader.frames["stats"] = (table["msgPutTotalTodayNow"], table["putMessageTimesTotal"],
                                  table["putMessageSizeTotal"], puts)
        transport.close()
    finally:
        assert proc.stop() == 0, proc.output()
    return reader.frames, store, served


def _answer(frame: bytes) -> bytes:
    """A response frame; a refusal's remark without the client's port (it
    names the connection)."""
    cmd = RemotingCommand.decode(frame[4:])
    if cmd.code == 0 or not cmd.remark:
        return frame
    return b"%d:%s" % (cmd.code, re.sub(r"127\.0\.0\.1:\d+", "ADDR", cmd.remark).encode())


def _records(store: Path) -> list[bytes]:
    out = []
    for path in sorted((store / "commitlog").iterdir()):
        data = path.read_bytes()
        pos = 0
        while pos + 8 <= len(data):
            size, magic = struct.unpack_from(">ii", data, pos)
            if magic != MESSAGE_MAGIC:
                break
            rec = bytearray(data[pos:pos + size])
            sys_flag = struct.unpack_from(">i", rec, 36)[0]
            ts_at = 48 + (20 if sys_flag & BORNHOST_V6_FLAG else 8)
            rec[48:ts_at + 8] = bytes(ts_at + 8 - 48)  # born host (the client's port), store time
            out.append(bytes(rec))
            pos += size
    return out


def _queues(store: Path) -> dict[str, bytes]:
    return {str(p.relative_to(store)): p.read_bytes().rstrip(b"\0")
            for p in sorted((store / "consumequeue").rglob("*")) if p.is_file()}


def _index(store: Path, slots: int, entries: int) -> list[tuple]:
    """Every index file's slots and entries, time differences aside."""
    out = []
    for path in sorted((store / "index").iterdir()):
        data = path.read_bytes()
        assert len(data) == index_file_size(slots, entries)
        count = struct.unpack_from(">i", data, 36)[0]
        base = 40 + slots * 4
        out.append((data[40:base], [struct.unpack_from(">iqxxxxi", data, base + 20 * i)
                                    for i in range(1, count)]))
    return out


@pytest.mark.timeout(240)
@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
async def test_lane_twin_and_general_path_store_and_answer_the_same(tmp_path, flush):
    frames, oneway = _stream(23)
    want = len(frames) - len(oneway)
    port = free_port(span=4) + 2
    extra = f"flushDiskType={flush}\n"
    results = {}
    for mode in ("lane", "twin", "general"):
        results[mode] = await _run(tmp_path, port, mode, frames, want, extra)
    base_frames, base_store, served = results["general"]
    assert served == 0
    base_stats = base_frames.pop("stats")
    base = (_records(base_store), _queues(base_store), _index(base_store, 1000, 4000))
    assert len(base[0]) > 1300 and len(base[1]) > 8 and len(base[2]) > 1
    assert len(list((base_store / "commitlog").iterdir())) >= 2
    codes = {RemotingCommand.decode(f[4:]).code for f in base_frames.values()}
    assert codes >= {0, 1}  # stored, and the general path's refusals among them
    for mode in ("lane", "twin"):
        got_frames, store, served = results[mode]
        assert got_frames.pop("stats") == base_stats, mode
        assert served > 0.85 * len(base[0]), (mode, served)  # what the lane left: see _stream
        assert got_frames.keys() == base_frames.keys()
        diff = [op for op in base_frames
                if _answer(got_frames[op]) != _answer(base_frames[op])]
        assert not diff, (mode, diff[:3], got_frames[diff[0]], base_frames[diff[0]])
        assert _records(store) == base[0], mode
        assert _queues(store) == base[1], mode
        assert _index(store, 1000, 4000) == base[2], mode


def _lane_served(table_body: bytes) -> int:
    return int(orjson.loads(table_body)["table"]["rmqSendLaneServed"])


@pytest.mark.timeout(120)
@pytest.mark.parametrize("twin", [False, True], ids=["compiled", "twin"])
async def test_non_ascii_values_are_served_by_the_lane(tmp_path, twin):
    """Tags and keys in Chinese, Cyrillic and past U+FFFF: the lane stores
    them (every one counted in rmqSendLaneServed), a tag subscription finds
    them by their tagsCode (Java's hashCode over UTF-16 units) and the index
    by their keys."""
    import time

    from rmq.client.codec import decode_messages
    from rmq.common.codes import ResponseCode
    from rmq.testing.cluster import Cluster
    from tests.integration.test_messaging_raw import props, pull, send

    c = Cluster(tmp_path, env={"RMQ_NO_EXTENSIONS": "1"} if twin else None)
    c.start_broker()
    try:
        await c.create_topic("Wide", 1)
        first = props(TAGS="a", UNIQ_KEY="0" * 32)  # (makes the first index file)
        assert (await send(c, "Wide", b"first", 0, first)).code == ResponseCode.SUCCESS
        before = _lane_served((await c.call(R.GET_BROKER_RUNTIME_INFO)).body)
        tags = ["标签\U0001F600", "café"]
        for i in range(20):
            kw = {"TAGS": tags[i % 2], "KEYS": f"键{i} ключ", "UNIQ_KEY": f"{i + 1:032X}"}
            if i == 19:
                kw["名"] = "x"
            r = await send(c, "Wide", b"w%d" % i, 0, props(**kw))
            assert r.code == ResponseCode.SUCCESS, r.remark
        after = _lane_served((await c.call(R.GET_BROKER_RUNTIME_INFO)).body)
        assert after - before == 19  # the last one has a non-ASCII key: the general path
        p = await pull(c, "Wide", 0, 0, sub=tags[0])
        assert [m.body for m in decode_messages(p.body)] == [b"w%d" % i for i in range(0, 20, 2)]
        assert all(m.properties["TAGS"] == tags[0] for m in decode_messages(p.body))
        now = int(time.time() * 1000) + 60_000
        qh = {"topic": "Wide", "maxNum": "32", "beginTimestamp": "0", "endTimestamp": str(now)}
        r = await c.call(R.QUERY_MESSAGE, {**qh, "key": "键7"})
        assert [m.body for m in decode_messages(r.body)] == [b"w7"]
        r = await c.call(R.QUERY_MESSAGE, {**qh, "key": "ключ"})
        assert sorted(m.body for m in decode_messages(r.body)) == \
            sorted(b"w%d" % i for i in range(20))
    finally:
        await c.close()
