"""The compiled reader of PUSH bodies (rmq._fast.dledger_push) against its
twin, the general reader (orjson and ``PushEntryRequest.from_json``): for
every body it takes -- the pushes rmq leaders write, batched or not, the
shape a Java 0.3.1.2 leader writes, bodies with fields missing, null or in
another order -- the same request; whatever else (whitespace, escapes,
floats, unknown keys, broken text) it leaves to the general reader, which
reads or refuses it as before."""

from __future__ import annotations

import os
import random

import orjson
import pytest

from rmq._fast import compiled_or_none
from rmq.dledger.entry import Entry
from rmq.dledger.messages import PushEntryRequest, push_append_body, push_request, read_push
from rmq.dledger.protocol import PushType, decode, encode

pytestmark = pytest.mark.timeout(60)
C = compiled_or_none("dledger_push")


def _general(body: bytes) -> PushEntryRequest:
    return PushEntryRequest.from_json(decode(body))


def _entries(n: int, first: int = 7) -> list[Entry]:
    return [Entry(first + i, 3, os.urandom(random.choice([0, 1, 2, 3, 100, 1200])),
                  4096 * i, channel=i % 2, chain_crc=-i, body_crc=2**31 - 1 - i)
            for i in range(n)]


def _pushes() -> list[bytes]:
    bodies = []
    for n in (1, 2, 16):
        es = _entries(n)
        for batch in (True, False):
            if not batch and n > 1:
                continue
            for ids in (("n0", "n1", "n2"), (None, "n1", None)):
                bodies.append(push_append_body("g-0", ids[0], ids[1], ids[2], 5, 6 + n, es, batch))
    bodies.append(encode(push_request("g", "n0", "n1", "n0", 2, PushType.COMMIT, 9)))
    bodies.append(encode(push_request("g", "n0", "n1", "n0", 2, PushType.COMPARE, 9,
                                      entry=_entries(1)[0])))
    bodies.append(encode(push_request("g", "n0", "n1", "n0", 2, PushType.TRUNCATE, 9,
                                      entry=_entries(1)[0])))
    bodies += [b"{}", b'{"entry":null,"batchEntry":null,"group":null,"term":7}',
               b'{"type":"APPEND","entry":{},"code":-1,"term":-3}',
               b'{"entry":{"body":null,"index":4},"batchEntry":[{"body":""}]}']
    return bodies


@pytest.mark.skipif(C is None, reason="compiled extensions not built")
def test_pushes_read_as_the_general_reader_reads_them():
    random.seed(3)
    for body in _pushes():
        assert C.decode_push(body) is not None, body[:80]
        got, want = read_push(body), _general(body)
        assert got == want
        assert [e.size for e in got.entries()] == [e.size for e in want.entries()]
        # the same request written again: byte for byte what was read
        if body.startswith(b'{"batch"') and got.type == PushType.APPEND:
            assert push_append_body(got.group, got.local_id, got.remote_id, got.leader_id,
                                    got.term, got.commit_index, got.entries(),
                                    bool(got.batch_entry)) == body


@pytest.mark.skipif(C is None, reason="compiled extensions not built")
def test_what_is_left_to_the_general_reader():
    random.seed(4)
    good = push_append_body("g", "n0", "n1", "n0", 5, 6, _entries(2), True)
    odd = [good.replace(b",", b", "), good + b" ", b" " + good, good.replace(b'"g"', b'"\\u0067"'),
           good.replace(b'"term":5', b'"term":5.0'), good.replace(b'"term":5', b'"term":05'),
           good.replace(b'"group"', b'"x":1,"group"'), good.replace(b'"index":7', b'"index":null'),
           good.replace(b'"magic":1', b'"magic":4294967296'), good.replace(b'"g"', '"é"'.encode()),
           good.replace(b'"body":"', b'"body":"A', 1), good[:-1], b"[]", b"", b"{", b"nul",
           good.replace(b'"term":5', b'"term":"5"'), good.replace(b'"term":5', b'"term":1' + b"0" * 19)]
    for body in odd:
        assert C.decode_push(body) is None, body[:60]
        try:
            want = _general(body)
        except (ValueError, TypeError) as exc:
            with pytest.raises(type(exc)):
                read_push(body)
        else:
            assert read_push(body) == want


@pytest.mark.skipif(C is None, reason="compiled extensions not built")
def test_random_bytes_never_crash_and_agree():
    rnd = random.Random(9)
    random.seed(9)
    good = push_append_body("g", "n0", "n1", "n0", 5, 6, _entries(3), True)
    for _ in range(3000):
        body = bytearray(good)
        for _ in range(rnd.randrange(1, 4)):
            body[rnd.randrange(len(body))] = rnd.randrange(256)
        got = C.decode_push(bytes(body))
        if got is not None:
            assert read_push(bytes(body)) == _general(bytes(body))


def test_java_shaped_push_reads_the_same():
    """A push as a Java 0.3.1.2 leader writes it (fastjson: getters in name
    order), read by whichever reader is built."""
    entry = ('{"body":"aGVsbG8=","bodyCrc":0,"chainCrc":0,"channel":0,"index":0,"magic":1,'
             '"pos":0,"size":53,"term":1}')
    body = ('{"batch":false,"batchEntry":[],"code":200,"commitIndex":-1,"count":1,"entry":'
            + entry + ',"firstEntryIndex":0,"group":"g","lastEntryIndex":0,"leaderId":"n0",'
            '"localId":"n0","remoteId":"n1","term":1,"totalSize":0,"type":"APPEND"}').encode()
    req = read_push(body)
    assert req == _general(body) and req.entry.body == b"hello" and req.entry.size == 53
    assert orjson.loads(body)["entry"]["size"] == req.entry.size


@pytest.mark.skipif(C is None, reason="compiled extensions not built")
def test_pushes_written_as_the_twin_writes_them():
    """``encode_push`` against ``_push_body`` and the generic JSON walk: the
    same bytes for batches and single entries, whether the entries' JSON is
    made here or was kept from an earlier push, and the same entries' sizes."""
    from rmq.dledger.messages import _names, _push_body

    random.seed(5)
    for n, batch in ((1, False), (1, True), (3, True), (40, True)):
        for ids in (("g", "n0", "n1", "n0"), ("g\"é", None, "n1", None)):
            for commit in (-1, 0, 2**40):
                a, b = _entries(n, first=random.choice([0, 9, 2**33])), None
                b = [Entry(e.index, e.term, e.body, e.pos, e.magic, e.channel, e.chain_crc,
                           e.body_crc) for e in a]
                names = _names(*ids)
                got = C.encode_push(*names, -5 if commit == 0 else 7, commit, a, batch)
                want = _push_body(*names, -5 if commit == 0 else 7, commit, b, batch)
                assert got == want
                assert [e.size for e in a[:n if batch else 1]] == [e.size for e in b[:n if batch else 1]]
                assert [e.wire for e in a[:n if batch else 1]] == [e.wire for e in b[:n if batch else 1]]
                assert C.encode_push(*names, 7 if commit else -5, commit, a, batch) == \
                    _push_body(*names, 7 if commit else -5, commit, b, batch)  # kept JSON
                generic = encode(push_request(ids[0], ids[1], ids[2], ids[3],
                                              -5 if commit == 0 else 7, PushType.APPEND, commit,
                                              entry=None if batch else b[0],
                                              batch=b if batch else None))
                assert got == generic
    with pytest.raises(IndexError):
        C.encode_push(b'"g"', b"", 1, 1, [], True)


def test_push_answers_written_as_the_generic_walk_writes_them():
    from rmq.dledger.messages import PushEntryResponse, failure, push_response, push_response_body
    from rmq.dledger.protocol import Code, RequestCode

    random.seed(6)
    for push_type in (PushType.APPEND, PushType.COMMIT, PushType.COMPARE):
        for group in ("g-0", "a\"b", "é", "x\\y", "tab\t", None):
            req = push_request(group, "n0", "n1", "n0", 4, push_type, 3,
                               batch=_entries(random.choice([1, 3])))
            for code in (Code.SUCCESS, Code.INCONSISTENT_STATE, 200):
                resp = push_response(req, code, -1 if code == 200 else 0, 2**35)
                assert push_response_body(resp) == encode(resp)
            wrong = failure(req, Code.UNKNOWN_MEMBER, "n0", RequestCode.PUSH)
            assert push_response_body(wrong) == encode(wrong)
    assert push_response_body(PushEntryResponse()) == encode(PushEntryResponse())


def _answers() -> list[bytes]:
    """Follower answers to pushes: rmq's, the Java shape (ids, nulls, another
    order), and bodies the compiled reader must leave to the general one."""
    from rmq.dledger.messages import failure, push_response, push_response_body
    from rmq.dledger.protocol import Code, RequestCode

    bodies = []
    for push_type in (PushType.APPEND, PushType.COMMIT):
        req = push_request("g-0", "n0", "n1", "n0", 4, push_type, 3, batch=_entries(3))
        for code in (Code.SUCCESS, Code.INCONSISTENT_STATE, Code.REPEATED_PUSH):
            bodies.append(push_response_body(push_response(req, code, 0, 2**35)))
        bodies.append(encode(failure(req, Code.UNKNOWN_MEMBER, "n0", RequestCode.PUSH)))
    bodies += [b"{}", b"", b"[]", b"null", b"{", b'{"code":200}x', b'{"code":200,}',
               b'{"index":null,"code":null,"term":null,"count":null,"group":null}',
               b'{"index":5,"index":null,"term":3,"term":4}',
               b'{"term":7,"leaderId":"n0","localId":"n1","remoteId":"n0","index":-1,'
               b'"code":200,"beginIndex":-1,"endIndex":-1,"count":0,"group":"g"}',
               b'{"code":"200","index":4}', b'{"code":2.0e2}', b'{"code":true}',
               b'{"index":1234567890123456789012}', b'{"group":"\\u00e9","code":200}',
               b'{"code": 200}', b'{"other":1,"code":200}', b'{"code":-0,"term":007}',
               b'{"index":{"a":1}}', b'{"group":5}']
    return bodies


@pytest.mark.compiled_only
def test_push_answers_read_as_the_general_reader_reads_them():
    """``decode_push_answer`` gives what ``_push_answer`` (orjson,
    ``from_json``) gives for every answer it takes, and takes rmq's and
    Java's."""
    from rmq.dledger.messages import _push_answer

    taken = 0
    for body in _answers():
        got = C.decode_push_answer(body) if body else None
        if got is not None:
            taken += 1
            assert got == _push_answer(body), body
    assert taken >= 10
    random.seed(7)
    for _ in range(3000):  # broken answers: never a crash, never a different reading
        body = bytearray(random.choice(_answers()[:8]))
        for _ in range(random.randint(1, 3)):
            if body:
                body[random.randrange(len(body))] = random.randrange(256)
        got = C.decode_push_answer(bytes(body))
        if got is not None:
            assert got == _push_answer(bytes(body)), bytes(body)


def test_push_answer_reads_what_from_json_reads():
    """``push_answer`` (compiled or twin, whichever this run has) against
    ``PushEntryResponse.from_json``: the same (code, term, index), None where
    the general reader refuses the body."""
    from rmq.dledger.messages import PushEntryResponse, push_answer

    for body in _answers():
        try:
            resp = PushEntryResponse.from_json(decode(body))
        except (ValueError, TypeError):
            assert push_answer(body) is None, body
            continue
        assert push_answer(body) == (resp.code, resp.term, resp.index), body
