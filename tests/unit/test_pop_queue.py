"""One queue's part of a pop (``pop_queue_now`` / ``pop_queue_tail`` of the
pop processor): the pure-Python twins and the compiled ones, driven through
the same pops on two brokers filled alike, hand out the same records and
texts and leave the same offsets, checkpoints and locks."""

from __future__ import annotations

import contextlib
import random
import shutil

import pytest

from bench.lane_reads import QUEUES, TOPIC, _controller
from rmq._fast import compiled_or_none
from rmq.broker.pop_context import pop_context
from rmq.broker.pop_records import retry_topic_v1
from rmq.broker.processor import pop as pm
from rmq.store.message import MessageExtBrokerInner
from rmq.store.message_codec import decode_message, message_properties_to_string

GROUP = "g_pop_queue"


def _impls() -> list[tuple[str, object, object]]:
    out = [("twin", pm._pop_queue_now, pm._pop_queue_tail)]
    c = compiled_or_none("pop_queue")
    if c is not None:
        from rmq.common.topics import RETRY_GROUP_TOPIC_PREFIX

        c.bind(pm.PopCheckPoint, pm.FOUND, pm.filter_result, RETRY_GROUP_TOPIC_PREFIX)
        out.append(("compiled", c.pop_queue_now, c.pop_queue_tail))
    return out


RETRY = retry_topic_v1(TOPIC, GROUP)


def _fill(store, per_queue: int) -> None:
    for topic, qid in [*((TOPIC, q) for q in range(QUEUES)), (RETRY, 0)]:
        for i in range(per_queue + qid * 3):
            tags = "a" if i % 3 else "b"
            props = {"TAGS": tags}
            store.put_message(MessageExtBrokerInner(
                topic=topic, queue_id=qid, body=b"m%d-%d" % (qid, i), properties=props,
                properties_string=message_properties_to_string(props), born_timestamp=1,
                born_host=("10.0.0.1", 5000)))
    while store.reput_from_offset < store.commit_log.get_max_offset():
        store.do_reput()


def _records(bodies: list) -> list[tuple]:
    out = []
    for run in bodies:
        data = bytes(run)
        pos = 0
        while pos < len(data):
            size = int.from_bytes(data[pos:pos + 4], "big")
            m = decode_message(data[pos:pos + size])
            out.append((m.topic, m.queue_id, m.queue_offset, m.body,
                        m.properties.get("POP_CK")))
            pos += size
    return out


def _revive_records(controller, revive) -> list[tuple]:
    """The revive topic's records as the pops and acks wrote them: queue,
    offset, tag and body (their write time aside)."""
    store = controller.message_store
    out = []
    for qid in range(revive.queue_num):
        offset = 0
        while True:
            r = store.get_message("t", revive.topic, qid, offset, 32)
            if r is None or not r.sizes:
                break
            for mv in r.message_buffers:
                m = decode_message(bytes(mv))
                out.append((qid, m.queue_offset, m.properties.get("TAGS"), m.body))
            offset = r.next_begin_offset
            r.release()
    return out


@contextlib.asynccontextmanager
async def _broker(root, per_queue: int):
    """A broker controller on a fresh store under ``root``, its queues filled,
    its pop processor and pop context (revive queues read)."""
    root.mkdir()
    controller = await _controller(root)
    try:
        _fill(controller.message_store, per_queue)
        ctx = pop_context(controller)
        ctx.revive.ensure_loaded()
        yield controller, pm.PopMessageProcessor(controller), ctx
    finally:
        await controller.shutdown()
        shutil.rmtree(root, ignore_errors=True)


async def _run(tmp_path, name: str, now, tail) -> tuple:
    async with _broker(tmp_path / name, 20) as (controller, pop, ctx):
        rnd = random.Random(7)
        matches = {"*": pop._filters(GROUP, TOPIC, "TAG", "*")[0],
                   "a": pop._filters(GROUP, TOPIC, "TAG", "a")[0]}
        seen = []
        staged_seen = 0
        revive = ctx.revive
        for i in range(120):
            out = pm.PopResult()
            qid = rnd.randrange(QUEUES)
            read_topic = TOPIC
            if i % 6 == 5:  # redeliveries: copies with their handle, the original topic
                read_topic, qid = RETRY, 0
            nums = rnd.choice([1, 3, 8, 32])
            orderly = rnd.random() < 0.2
            decline = not orderly and rnd.random() < 0.15
            if decline:  # the record must wait for the store: handed back, queue locked
                revive.write_now = revive.write_ck_now = lambda *_a: None
            try:
                staged = now(pop, out, GROUP, TOPIC, read_topic, qid, nums, 1_000_000 + i,
                             60_000, i % 8, rnd.choice([0, 1]), orderly,
                             matches[rnd.choice(["*", "*", "a"])], None)
            finally:
                if decline:
                    del revive.write_now, revive.write_ck_now
            if staged is not None:
                staged_seen += 1
                key, ck, result, offsets, next_offset, buffers, offset = staged
                assert key in ctx.locks
                stored = await revive.write(i % 8, ck) if i % 2 else False
                tail(pop, out, GROUP, TOPIC, read_topic, qid, offset, offsets, next_offset, buffers,
                     result, stored, True, 1_000_000 + i, 60_000, i % 8)
                ctx.locks.discard(key)
            assert not ctx.locks
            seen.append((_records(out.bodies), out.count, out.start_info, out.msg_info,
                         out.order_info, out.rest, out.size, staged is not None))
        com = controller.consumer_offset_manager
        offsets = {q: com.query_offset(GROUP, TOPIC, q) for q in range(QUEUES)}
        offsets["retry"] = com.query_offset(GROUP, RETRY, 0)
        return seen, offsets, sorted(revive.pending), staged_seen, _revive_records(controller,
                                                                                   revive)


@pytest.mark.timeout(120)
async def test_pop_queue_compiled_and_twin_hand_out_and_leave_the_same(tmp_path):
    got = [await _run(tmp_path, name, now, tail) for name, now, tail in _impls()]
    seen, _offsets, pending, staged, records = got[0]
    assert sum(s[1] for s in seen) > 100 and len(pending) > 20 and staged > 3
    assert len(records) > 20  # the checkpoints' records, byte for byte below
    assert any(s[4] for s in seen)  # orderly pops among them
    assert any(r[4] for s in seen for r in s[0])  # and redeliveries
    assert all(g == got[0] for g in got)


def _ack_impls() -> list[tuple[str, object]]:
    from rmq.broker.processor import ack as am

    out = [("twin", am._ack_entry_now)]
    c = compiled_or_none("ack_entry")
    if c is not None:
        from rmq.broker.pop_records import ORDER_REVIVE_QUEUE, ExtraInfo, real_topic

        c.bind(ExtraInfo, real_topic, am.RC.SYSTEM_ERROR, ORDER_REVIVE_QUEUE)
        out.append(("compiled", c.ack_entry_now))
    return out


def _odd_base64(b: str, bits: int, kind: int) -> str:
    """The bit map ``b`` (of ``bits``) written otherwise: unpadded, with a
    line break, with the bits its padding leaves over set, with ``=`` inside
    it, with a bit far past its checkpoint (a long text), not a whole quad;
    or another map: whole bytes of offsets past its checkpoint's, more of
    them than an entry's C array holds."""
    import base64

    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    if kind == 0:
        return b.rstrip("=")
    if kind == 1:
        return b[:4] + "\n" + b[4:]
    if kind == 2 and b.endswith("="):
        pad = len(b) - len(b.rstrip("="))
        at = len(b) - pad - 1
        return b[:at] + alphabet[alphabet.index(b[at]) | (15 if pad == 2 else 3)] + b[at + 1:]
    if kind == 3:
        return b[:4] + "=" + b[4:]
    if kind in (4, 6, 7):
        more = {4: 1 << 3000, 6: 0xFFFF << 8, 7: (1 << 72) - 1 << 8}[kind]
        more |= bits
        return base64.b64encode(more.to_bytes((more.bit_length() + 7) // 8, "little")).decode()
    return b + "A"


def _entries(rnd: random.Random, cks: list) -> list:
    """Batch ack entries of the checkpoints ``cks`` (some offsets, all of
    them, none) and bad ones: fields missing or not numbers, bitsets not
    base64, queues and topics that do not exist, revive queues of no one,
    orderly handles."""
    import base64

    out: list = []
    for i, ck in enumerate(cks):
        so = ck.start_offset
        bits = 0
        for d in ck.offset_diffs:
            if rnd.random() < 0.7:
                bits |= 1 << d
        b = base64.b64encode(bits.to_bytes((bits.bit_length() + 7) // 8, "little")).decode()
        e = {"c": ck.cid, "t": ck.topic, "r": "0", "so": so, "q": ck.queue_id, "rq": i % 8,
             "pt": ck.pop_time, "it": 60_000, "b": b}
        r = rnd.random()
        if r < 0.05:
            del e["pt"]
        elif r < 0.1:
            e["so"] = "x1"
        elif r < 0.13:
            e["b"] = "*not base64"
        elif r < 0.16:
            e["q"] = 99
        elif r < 0.19:
            e["t"] = "NoSuchTopic"
        elif r < 0.22:
            e["rq"] = 77
        elif r < 0.25:
            e["rq"] = 999
        elif r < 0.28:
            e["b"] = ""
        elif r < 0.3:
            e = [1, 2]
        elif r < 0.42:  # bit maps in base64 of other shapes, read as a2b_base64 reads them
            e["b"] = _odd_base64(b, bits, int(r * 1000) % 8)
        out.append(e)
    return out


async def _ack_run(tmp_path, name: str, entry_now) -> tuple:
    from rmq.broker.processor.ack import AckMessageProcessor

    async with _broker(tmp_path / ("ack-" + name), 40) as (controller, pop, ctx):
        ack = AckMessageProcessor(controller)
        for i in range(60):
            out = pm.PopResult()
            staged = pm._pop_queue_now(pop, out, GROUP, TOPIC, TOPIC, i % QUEUES, 1 + i % 5,
                                       2_000_000 + i, 60_000, i % 8, 0, False, None, None)
            if staged is not None:  # a revive queue's first record: the general put
                await pop._pop_queue_later(out, GROUP, TOPIC, staged, 2_000_000 + i, 60_000,
                                           i % 8)
        cks = sorted((e.ck for e in ctx.revive.pending.values()), key=lambda c: c.pop_time)
        rnd = random.Random(11)
        answers = []
        for e in _entries(rnd, cks):
            decline = rnd.random() < 0.1
            if decline:  # the record must wait for the store: nothing done, handed back
                ctx.revive.write_now = ctx.revive.write_ack_now = lambda *_a: None
            try:
                answers.append(entry_now(ack, e, "lane-reads"))
            finally:
                if decline:
                    del ctx.revive.write_now, ctx.revive.write_ack_now
        left = {k: sorted(v.left) for k, v in ctx.revive.pending.items()}
        return answers, left, _revive_records(controller, ctx.revive)


@pytest.mark.timeout(120)
async def test_batch_ack_entry_compiled_and_twin_answer_and_apply_the_same(tmp_path):
    got = [await _ack_run(tmp_path, name, now) for name, now in _ack_impls()]
    answers, left, records = got[0]
    assert any(r[2] != "ck" for r in records)  # ack records among them, byte for byte below
    kinds = {None if a is None else len(a) for a in answers}
    assert kinds == {None, 2, 5} and len(left) < 60
    assert all(g == got[0] for g in got)


class _Processor(pm.PopMessageProcessor):
    """A processor of another class: the compiled pop reads its fields
    through their attributes, not at the slots of PopMessageProcessor."""


def _lane_impls() -> list[tuple]:
    from rmq.broker.processor import ack as am

    out = [("twin", pm._lane_pop, am._batch_ack_now)]
    c, ca = compiled_or_none("pop_queue"), compiled_or_none("ack_entry")
    if c is not None and ca is not None:
        out.append(("compiled", c.lane_pop, ca.batch_ack_now))
        out.append(("compiled-attrs", c.lane_pop, ca.batch_ack_now, _Processor))
    return out


def _lane_pops(rnd: random.Random) -> list[dict]:
    """POP_MESSAGE headers: the usual ones (one queue, all queues, TAG
    filters) and every kind the compiled pop hands to its twin."""
    out = []
    for _ in range(160):
        ext = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": str(rnd.randrange(-1, QUEUES)),
               "maxMsgNums": str(rnd.choice([1, 5, 32])), "invisibleTime": "60000",
               "pollTime": "0", "bornTime": "0", "initMode": "0", "expType": "TAG",
               "exp": rnd.choice(["*", "*", "a", "b || a"])}
        r = rnd.random()
        if r < 0.04:
            ext["maxMsgNums"] = rnd.choice(["0", "33", "x"])
        elif r < 0.07:
            ext["invisibleTime"] = "0"
        elif r < 0.1:
            ext["order"] = "true"
        elif r < 0.13:
            ext["pollTime"] = "20"  # may find: served; else left to the general path
        elif r < 0.16:
            ext["bornTime"] = rnd.choice(["1", str(1 << 62)])
        elif r < 0.19:
            ext["topic"] = rnd.choice(["NoSuchTopic", "%LMQ%x"])
        elif r < 0.22:
            ext["consumerGroup"] = "no_such_group"
        elif r < 0.25:
            ext["queueId"] = str(rnd.choice([QUEUES, -2]))
        elif r < 0.28:
            ext["expType"], ext["exp"] = "SQL92", "a > 1"
        elif r < 0.3:
            del ext["topic"]
        out.append(ext)
    return out


def _answer(got) -> tuple:
    """A lane pop's answer with the pop time (the clock's) left out."""
    if got is None or len(got) == 2:
        return got
    code, remark, out, bodies, size = got
    if type(out) is not pm.PopResult:
        return code, remark, out, bodies, size
    pt = str(out.pop_time)
    records = [tuple(x.replace(pt, "PT") if type(x) is str else x for x in r)
               for r in _records(bodies)]
    return (code, remark, records, out.count, out.start_info, out.msg_info, out.rest, out.size,
            out.invisible, out.revive_qid, out.orderly)


async def _lane_run(tmp_path, name: str, lane_pop, batch_ack_now,
                    processor: type = pm.PopMessageProcessor) -> tuple:
    from rmq.broker.processor.ack import AckMessageProcessor
    from rmq.broker.processor.pop import answer_ext
    from rmq.common.topic_config import TopicConfig
    from tests.unit.test_pop_answer_now import _ack_body, _Channel

    async with _broker(tmp_path / ("lane-" + name), 150) as (controller, pop, ctx):
        tcm = controller.topic_config_manager
        tcm.table[RETRY] = TopicConfig(RETRY, 1, 1, 6)  # redeliveries read too
        tcm.lmq = True
        ack = AckMessageProcessor(controller)
        pop = processor(controller)
        ch = _Channel()
        rnd = random.Random(5)
        answers, acks = [], []
        for i, ext in enumerate(_lane_pops(rnd)):
            decline = rnd.random() < 0.1
            if decline:  # a checkpoint record that must wait for the store
                ctx.revive.write_now = lambda _qid, _ck: None
            random.seed(i)  # the queue order and the retry topics' turn alike
            try:
                got = lane_pop(pop, ch, ext)
            finally:
                if decline:
                    del ctx.revive.write_now
            if got is not None and type(got) is not tuple:
                got = await got
            answers.append(_answer(got))
            if got is not None and got[0] == 0 and i % 3:
                body = _ack_body(answer_ext(got[2]))
                if i % 7 == 0:
                    body = body.replace(b'"acks"', b'"acks" ', 1)  # the general reader's
                got = batch_ack_now(ack, body)
                acks.append(got if type(got) is tuple else await got)
        acks.append(batch_ack_now(ack, b'{"acks": 5}'))
        com = controller.consumer_offset_manager
        offsets = {q: com.query_offset(GROUP, TOPIC, q) for q in range(QUEUES)}
        left = sorted(sorted(v.left) for v in ctx.revive.pending.values())  # keys: pop times
        # the records of both (pop times differ: their keys and bodies hold them)
        records = [(q, o, tag) for q, o, tag, _body in _revive_records(controller, ctx.revive)]
        return answers, acks, offsets, left, records


@pytest.mark.timeout(120)
async def test_lane_pop_and_batch_ack_compiled_and_twin_answer_the_same(tmp_path):
    """The pop lane's whole pop (``lane_pop``) and batch ack
    (``batch_ack_now``): the compiled ones serve the usual requests in one
    call and hand anything else to their twins; both answer every request
    alike and leave the same offsets and checkpoints."""
    handed = []
    c = compiled_or_none("pop_queue")
    if c is not None:  # count what the compiled one hands its twin
        def twin(*args):
            handed.append(args[2])
            return pm._lane_pop(*args)

        c.bind_lane(twin, pm.PopResult, pm.PopRequest, pm.pop_header, pm.RC.SUCCESS,
                    pm.RC.POLLING_TIMEOUT)
    impls = _lane_impls()
    try:
        got = [await _lane_run(tmp_path, *impl) for impl in impls]
    finally:
        if c is not None:
            c.bind_lane(pm._lane_pop, pm.PopResult, pm.PopRequest, pm.pop_header,
                        pm.RC.SUCCESS, pm.RC.POLLING_TIMEOUT)
    answers, acks, _offsets, _left, records = got[0]
    assert {"ck", "bAck"} <= {r[2] for r in records}
    if c is not None:  # the usual pops served in C, the rest by the twin (each compiled run)
        runs = len(impls) - 1
        assert len(handed) % runs == 0 and 30 < len(handed) // runs < 100, len(handed)
    codes = {None if a is None else a[0] for a in answers}
    assert codes == {None, 0, 210} and answers.count(None) > 20, codes  # refusals: general
    assert sum(1 for a in answers if a and a[0] == 0) > 40 and len(acks) > 20
    for g in got[1:]:
        for i, (a, b) in enumerate(zip(g[0], answers, strict=True)):
            assert a == b, i
        assert g == got[0]


class _Spent:
    """A read whose records were handed out: nothing left behind it."""

    max_offset = 0


@pytest.mark.parametrize("offsets", [
    [0], [7, 8, 9], [-3, 0, 2**63 - 1], list(range(10**12, 10**12 + 32)),
    # runs counted up from the digits before: carries, a digit more, a word more
    list(range(-2, 12)), list(range(990, 1022)), [9, 10, 11, 99, 100, 5, 6],
    list(range(99_999_990, 100_000_010)), [10**17 - 1, 10**17, 10**18 - 1, 10**18],
    [2**63 - 3, 2**63 - 2, 2**63 - 1], [5, 6, 5, 6, 6, 7],
    list(range(40)),  # more than a pop's 32: the f-strings' way
    [2**63, 1],  # past 64 bits: likewise
])
@pytest.mark.parametrize("read_topic", [TOPIC, RETRY])
def test_pop_queue_tail_offsets_texts_compiled_and_twin_the_same(offsets, read_topic):
    got = []
    for _name, _now, tail in _impls():
        out = pm.PopResult()
        for qid, offset in ((3, offsets[0]), (-1, 2**40), (0, -5)):
            tail(None, out, GROUP, read_topic, read_topic, qid, offset, offsets, 0, [],
                 _Spent(), True, False, 0, 60_000, 0)
        got.append((out.start_info, out.msg_info, out.count))
    assert got[0][0][0] == f"{'1' if read_topic == RETRY else '0'} 3 {offsets[0]}"
    assert all(g == got[0] for g in got)


@pytest.mark.compiled_only
def test_lane_pop_writes_its_pop_result_in_the_slots_it_finds_at_bind():
    """``lane_pop`` makes and fills its PopResult at the slots ``bind_lane``
    found: a class naming the fields without holding them as plain slots is
    refused there (the defaults of one made in C are checked there too)."""
    c = compiled_or_none("pop_queue")

    class Named:  # the fields' names, no slots behind them
        pass

    Named.__slots__ = pm.PopResult.__slots__
    args = (pm._lane_pop, pm.PopRequest, pm.pop_header, pm.RC.SUCCESS, pm.RC.POLLING_TIMEOUT)
    try:
        with pytest.raises(TypeError, match="not a plain slot"):
            c.bind_lane(args[0], Named, *args[1:])
    finally:
        c.bind_lane(args[0], pm.PopResult, *args[1:])
