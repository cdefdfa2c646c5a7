"""A BATCH_ACK_MESSAGE body read by the compiled reader (``read_batch_ack``)
or by the general JSON reader and ``entry_fields``: on every body the
compiled reader takes, both give the same broker name and the same entry
fields, value and type; every body it does not take goes to the general
reader (the batch ack's twin path), so the decisions are that reader's.
Checked on clients' bodies and on thousands of mutated ones."""

from __future__ import annotations

import random

import orjson
import pytest

from rmq._fast import compiled_or_none
from rmq.broker.processor.ack import entry_fields
from rmq.common import fastjson

pytestmark = pytest.mark.compiled_only


def _entry(i: int) -> dict:
    return {"c": "g_pop", "t": f"Topic{i % 3}", "r": "0", "so": 1000 + i, "q": i % 4,
            "rq": i % 8, "pt": 1_764_300_000_000 + i, "it": 60_000, "b": "/w=="}


SEEDS = [
    orjson.dumps({"brokerName": "broker-a", "acks": [_entry(i) for i in range(3)]}),
    # 5.3.3's Java client: fastjson, properties in name order, brokerName after acks
    b'{"acks":[{"b":"Aw==","c":"g","it":60000,"pt":1764300000000,"q":0,"r":"0","rq":3,'
    b'"so":12,"t":"T"},{"b":"AQ==","c":"g","it":60000,"pt":1764300000001,"q":1,"r":"1",'
    b'"rq":0,"so":7,"t":"T"}],"brokerName":"broker-a"}',
    b' { "acks" : [ { "c" : "g\xc3\xa9" , "t" : "T\xe4\xb8\xad" , "q" : 2 , "so" : 0 ,'
    b' "pt" : -1 , "rq" : 999 , "b" : null , "x" : true } ] , "v" : 1 }\n',
    b'{"acks":[{"c":"g","t":"T","q":0,"so":5,"pt":1,"rq":1,"r":"2","it":0,"b":""}],'
    b'"brokerName":null}',
    b'{"acks":[],"brokerName":""}',
    b'{"acks":null}',
    b"{}",
]

ALPHABET = [b'"', b"{", b"}", b"[", b"]", b",", b":", b"0", b"1", b"-", b".", b"e", b" ",
            b"\\", b"\x80", b"\xc3", b"\x01", b"null", b"true", b'"q"', b'"c"', b'"b"', b'"1"',
            b"00", b"99999999999999999999", b"1.5", b"\t", b"\n", b'"acks"', b'"brokerName"']


def _mutate(rnd: random.Random, body: bytes) -> bytes:
    for _ in range(rnd.randint(1, 3)):
        n = len(body)
        i = rnd.randrange(n + 1)
        r = rnd.random()
        if r < 0.3 and n:
            body = body[:i] + body[i + 1:]  # a byte dropped
        elif r < 0.6:
            body = body[:i] + rnd.choice(ALPHABET) + body[i:]  # something put in
        elif r < 0.75 and n:
            j = min(n, i + rnd.randint(1, 12))  # a piece twice
            body = body[:j] + body[i:j] + body[j:]
        elif r < 0.9 and i < n:
            body = body[:i] + rnd.choice(ALPHABET) + body[i + 1:]  # a byte replaced
        else:
            body = body[:i]  # cut short
    return body


def _general(body: bytes) -> tuple | None:
    """What the batch ack's general path reads of ``body``: (brokerName,
    the entries' fields), or None when it answers an error somewhere (a body
    that is not JSON, an entry it refuses)."""
    try:
        obj = fastjson.loads(bytes(body))
        acks = obj.get("acks") or []
        if not isinstance(acks, list):
            return None
    except (ValueError, AttributeError, fastjson.FastjsonError):
        return None
    try:
        return obj.get("brokerName"), [entry_fields(a) for a in acks]
    except (KeyError, ValueError, TypeError):
        return None


def _typed(read: tuple) -> tuple:
    broker, entries = read
    return (type(broker), broker,
            [tuple((type(v), v) for v in e) for e in entries])


@pytest.mark.timeout(60)
def test_read_batch_ack_reads_what_the_general_reader_reads():
    c = compiled_or_none("ack_entry")
    assert c is not None
    rnd = random.Random(37)
    taken = left = 0
    bodies = [*SEEDS, *(_mutate(rnd, rnd.choice(SEEDS)) for _ in range(6000))]
    for body in bodies:
        got = c.read_batch_ack(body)
        if got is None:
            left += 1
            continue
        taken += 1
        general = _general(body)
        assert general is not None, body
        assert _typed(got) == _typed(general), body
    assert all(c.read_batch_ack(s) is not None for s in SEEDS)
    assert all(c.read_batch_ack(memoryview(s)) == c.read_batch_ack(s) for s in SEEDS)
    assert taken > 300 and left > 300  # both sides of the line were tried


def test_read_batch_ack_leaves_odd_bodies_to_the_general_reader():
    c = compiled_or_none("ack_entry")
    assert c is not None
    ok = b'"c":"g","t":"T","q":0,"so":5,"pt":1,"rq":1'
    for body in (b"", b"[]", b"null", b'{"acks":{}}', b'{"acks":0}', b'{"acks":[1]}',
                 b'{"acks":[{' + ok + b',"q":1}]}',  # a key twice
                 b'{"acks":[{' + ok + b',"it":"5"}]}',  # a number as text
                 b'{"acks":[{' + ok + b',"r":null}]}',  # str(None)
                 b'{"acks":[{' + ok + b',"b":5}]}',
                 b'{"acks":[{' + ok + b',"x":[1]}]}',
                 b'{"acks":[{' + ok + b',"it":1.0}]}',
                 b'{"acks":[{' + ok[:-7] + b'}]}',  # rq missing
                 b'{"acks":[{' + ok.replace(b'"g"', b'"g\\n"') + b'}]}',  # an escape
                 b'{"acks":[{' + ok + b'}],"brokerName":7}',
                 b'{"acks":[{' + ok + b'}]} x', b'{"acks":[{' + ok + b'}],}',
                 b'{"acks":[{' + ok.replace(b"1", b"12345678901234567890") + b"}]}"):
        assert c.read_batch_ack(body) is None, body
    assert c.read_batch_ack(b'{"acks":[{' + ok + b'}]}') == \
        (None, [("g", "0", "T", 0, 5, 1, 0, 1, "")])
