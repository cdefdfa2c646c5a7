"""DLedger's wire form as a Java DLedger 0.3.1.2 node writes and reads it.

The frames below are written out the way 0.3.1.2 produces them
(``DLedgerRpcNettyService`` over RocketMQ remoting 4.9.8, bodies by fastjson):
the remoting header in fastjson's field order, an answer's remoting code
always ``DLedgerResponseCode.SUCCESS`` (200), the DLedger outcome in the
body's ``code``, each response class with exactly the fields its Java code
path sets.  Two directions are checked:

* rmq reading Java: a scripted Java peer (``JavaPeer``) answers an rmq node's
  votes, heartbeats, pushes (compare, truncate, append, commit), leadership
  transfer, metadata and append requests with recorded 0.3.1.2 answers, and
  the rmq node must act on them (become leader, commit, follow a leader);
* Java reading rmq: the requests the rmq node sends, and its answers to
  0.3.1.2-shaped requests of every type, must equal what a Java node sends
  and answers, byte for byte.
"""

from __future__ import annotations

import asyncio
import base64
import json
import struct
from collections.abc import Callable

import pytest

from rmq.dledger.client import DLedgerClient
from rmq.dledger.config import DLedgerConfig
from rmq.dledger.protocol import JavaHashMap, RequestCode, encode
from rmq.dledger.server import DLedgerServer
from rmq.testing.procs import free_port
from rmq.testing.wait import wait_until

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(60)]

HEADER = ('{{"code":{code},"flag":{flag},"language":"JAVA","opaque":{opaque},'
          '"serializeTypeCurrentRPC":"JSON","version":409}}')
VOTE, HEART_BEAT, PUSH = RequestCode.VOTE, RequestCode.HEART_BEAT, RequestCode.PUSH


def java_frame(code: int, opaque: int, flag: int, body: bytes | None) -> bytes:
    """A remoting frame as 4.9.8's RemotingCommand encodes it (JSON header)."""
    header = HEADER.format(code=code, flag=flag, opaque=opaque).encode()
    body = body or b""
    return struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body


async def read_frame(reader: asyncio.StreamReader) -> tuple[bytes, dict, bytes]:
    """One frame: its raw bytes after the length, the header, the body."""
    (length,) = struct.unpack(">i", await reader.readexactly(4))
    frame = await reader.readexactly(length)
    header_len = struct.unpack(">i", frame[:4])[0] & 0xFFFFFF
    return frame, json.loads(frame[4:4 + header_len]), frame[4 + header_len:]


def java_entry(index: int, term: int, body: bytes, pos: int) -> str:
    """A DLedgerEntry as fastjson writes it (getters in name order)."""
    return (f'{{"body":"{base64.b64encode(body).decode()}","bodyCrc":0,"chainCrc":0,'
            f'"channel":0,"index":{index},"magic":1,"pos":{pos},"size":{48 + len(body)},'
            f'"term":{term}}}')


def java_push(term: int, kind: str, commit: int, entries: list[str], batch: bool = False,
              sender: str = "n1", to: str = "n0") -> bytes:
    """A PushEntryRequest from a Java leader: single-entry for APPEND, COMPARE
    and TRUNCATE (``buildPushRequest``), or a batch (``batchEntry``)."""
    first = json.loads(entries[0])["index"] if entries else -1
    last = json.loads(entries[-1])["index"] if entries else -1
    if batch:
        total = sum(json.loads(e)["size"] for e in entries)
        body = (f'{{"batch":true,"batchEntry":[{",".join(entries)}],"code":200,'
                f'"commitIndex":{commit},"count":{len(entries)},"firstEntryIndex":{first},'
                f'"group":"g","lastEntryIndex":{last},"leaderId":"{sender}",'
                f'"localId":"{sender}","remoteId":"{to}","term":{term},'
                f'"totalSize":{total},"type":"{kind}"}}')
    else:
        entry = f'"entry":{entries[0]},' if entries else ""
        body = (f'{{"batch":false,"batchEntry":[],"code":200,"commitIndex":{commit},'
                f'"count":{len(entries)},{entry}"firstEntryIndex":{first},"group":"g",'
                f'"lastEntryIndex":{last},"leaderId":"{sender}","localId":"{sender}",'
                f'"remoteId":"{to}","term":{term},"totalSize":0,"type":"{kind}"}}')
    return body.encode()


class JavaPeer:
    """A loopback peer that answers like a Java 0.3.1.2 node: every request is
    recorded and answered (remoting code 200) with what ``script`` returns for
    (request code, request body); None sends no answer."""

    def __init__(self, script: Callable[[int, bytes], bytes | None]) -> None:
        self.script = script
        self.port = free_port()
        self.requests: list[tuple[int, dict, bytes]] = []
        self.bad_frames: list[bytes] = []  # requests whose header is not a Java node's
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> JavaPeer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        return self

    async def close(self) -> None:
        self._server.close()
        await self._server.wait_closed()
        assert not self.bad_frames, self.bad_frames[0]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                frame, header, body = await read_frame(reader)
                self.requests.append((header["code"], header, body))
                if frame != java_frame(header["code"], header["opaque"], 0, body)[4:]:
                    self.bad_frames.append(frame)
                answer = self.script(header["code"], body)
                if answer is not None:
                    writer.write(java_frame(200, header["opaque"], 1, answer))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def bodies(self, code: int) -> list[bytes]:
        return [body for c, _, body in self.requests if c == code]


class JavaFollower:
    """The answers of a Java follower with its own ledger (EntryHandler):
    compare, truncate, append in order, commit."""

    def __init__(self, me: str) -> None:
        self.me = me
        self.entries: dict[int, dict] = {}
        self.term = -1

    def begin_end(self) -> tuple[int, int]:
        return (min(self.entries), max(self.entries)) if self.entries else (-1, -1)

    def answer(self, code: int, body: bytes) -> bytes | None:
        req = json.loads(body)
        if code == VOTE:
            return (f'{{"code":200,"group":"g","leaderId":"{req["leaderId"]}",'
                    f'"localId":"{req["localId"]}","remoteId":"{self.me}",'
                    f'"term":{req["term"]},"voteResult":"ACCEPT"}}').encode()
        if code == HEART_BEAT:
            return b'{"code":200,"term":-1}'
        if code == RequestCode.LEADERSHIP_TRANSFER:
            return f'{{"code":200,"term":{req["term"] + 1}}}'.encode()
        if code != PUSH:
            return None
        kind, ok = req["type"], True
        entries = req["batchEntry"] or ([req["entry"]] if "entry" in req else [])
        if kind == "COMPARE":
            ok = self.entries.get(entries[0]["index"]) == entries[0]
        elif kind == "TRUNCATE":
            first = entries[0]["index"]
            self.entries = {i: e for i, e in self.entries.items() if i < first}
            self.entries[first] = entries[0]
        elif kind == "APPEND":
            ok = entries[0]["index"] == self.begin_end()[1] + 1
            if ok:
                self.entries.update((e["index"], e) for e in entries)
        begin, end = self.begin_end()
        count = 0 if kind == "COMMIT" else len(entries)
        index = "" if kind == "COMMIT" else f',"index":{entries[0]["index"]}'
        return (f'{{"beginIndex":{begin},"code":{200 if ok else 406},"count":{count},'
                f'"endIndex":{end},"group":"g"{index},"term":{req["term"]}}}').encode()


def config(tmp_path, ports: dict[str, int], me: str = "n0", **extra) -> DLedgerConfig:
    peers = ";".join(f"{p}-127.0.0.1:{port}" for p, port in ports.items())
    settings = dict(heart_beat_time_interval_ms=200, min_vote_interval_ms=100,
                    max_vote_interval_ms=300, max_wait_ack_time_ms=3000,
                    mapped_file_size_for_entry_data=256 * 1024,
                    mapped_file_size_for_entry_index=32 * 4096)
    settings.update(extra)
    return DLedgerConfig(group="g", self_id=me, peers=peers, store_base_dir=str(tmp_path / me),
                         **settings)


class Wire:
    """A raw connection to an rmq DLedger server, sending Java frames."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.opaque = 100

    async def __aenter__(self) -> Wire:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        return self

    async def __aexit__(self, *exc) -> None:
        self.writer.close()

    async def ask(self, code: int, body: bytes) -> tuple[bytes, dict, bytes]:
        self.opaque += 1
        self.writer.write(java_frame(code, self.opaque, 0, body))
        frame, header, answer = await asyncio.wait_for(read_frame(self.reader), 10)
        assert header["opaque"] == self.opaque
        return frame, header, answer

    async def answer(self, code: int, body: bytes) -> bytes:
        """The body of the answer, after checking its header is 0.3.1.2's."""
        frame, _, answer = await self.ask(code, body)
        expected = java_frame(200, self.opaque, 1, answer)[4:]
        assert frame == expected
        return answer


# ---- rmq reading Java answers, and the requests it sends --------------------------------

async def test_rmq_leader_with_java_followers(tmp_path):
    """Votes, heartbeats and pushes answered by Java followers (remoting code
    200): the rmq node becomes leader, commits, and every request it sent is
    byte for byte a Java leader's."""
    followers = {p: JavaFollower(p) for p in ("n1", "n2")}
    peers = {p: await JavaPeer(f.answer).start() for p, f in followers.items()}
    server = DLedgerServer(config(tmp_path, {"n0": free_port(), "n1": peers["n1"].port,
                                             "n2": peers["n2"].port}))
    await server.start()
    try:
        await wait_until(server.member_state.is_leader)
        term = server.member_state.curr_term
        entries = [await asyncio.wait_for(server.append(b"m%d" % i), 10) for i in range(3)]
        assert [e.index for e in entries] == [0, 1, 2]
        await wait_until(lambda: all(f.begin_end() == (0, 2) for f in followers.values()))
        await wait_until(lambda: any(b'"type":"COMMIT"' in b for b in peers["n1"].bodies(PUSH)),
                       timeout=5)
    finally:
        await server.shutdown()
        for peer in peers.values():
            await peer.close()
    n1 = peers["n1"]
    vote = n1.bodies(VOTE)[-1]
    assert vote == (f'{{"code":200,"group":"g","leaderId":"n0","ledgerEndIndex":-1,'
                    f'"ledgerEndTerm":-1,"localId":"n0","remoteId":"n1","term":{term}}}').encode()
    assert n1.bodies(HEART_BEAT)[0] == (f'{{"code":200,"group":"g","leaderId":"n0",'
                                        f'"localId":"n0","remoteId":"n1","term":{term}}}').encode()
    pushes = {json.loads(b)["type"]: b for b in reversed(n1.bodies(PUSH))}
    e0, e1 = java_entry(0, term, b"m0", 0), java_entry(1, term, b"m1", 50)
    assert pushes["COMPARE"] == java_push(term, "COMPARE", -1, [e0], sender="n0", to="n1")
    assert pushes["TRUNCATE"] == java_push(term, "TRUNCATE", json.loads(
        pushes["TRUNCATE"])["commitIndex"], [e0], sender="n0", to="n1")
    append = next(b for b in n1.bodies(PUSH) if b'"type":"APPEND"' in b and b'"index":1,' in b)
    assert append == java_push(term, "APPEND", json.loads(append)["commitIndex"], [e1],
                               sender="n0", to="n1")
    commit = pushes["COMMIT"]
    assert commit == (f'{{"batch":false,"batchEntry":[],"code":200,"commitIndex":2,"count":0,'
                      f'"firstEntryIndex":-1,"group":"g","lastEntryIndex":-1,"leaderId":"n0",'
                      f'"localId":"n0","remoteId":"n1","term":{term},"totalSize":0,'
                      f'"type":"COMMIT"}}').encode()


async def test_rmq_batch_push_to_java_follower(tmp_path):
    """With enableBatchPush the pushes are 0.3.1.2's batch requests and the
    Java answers (index + count) raise the follower's water mark."""
    followers = {p: JavaFollower(p) for p in ("n1", "n2")}
    peers = {p: await JavaPeer(f.answer).start() for p, f in followers.items()}
    server = DLedgerServer(config(tmp_path, {"n0": free_port(), "n1": peers["n1"].port,
                                             "n2": peers["n2"].port}, enable_batch_push=True))
    await server.start()
    try:
        await wait_until(server.member_state.is_leader)
        await asyncio.wait_for(asyncio.gather(*(server.append(b"b%d" % i) for i in range(6))), 10)
        await wait_until(lambda: all(f.begin_end() == (0, 5) for f in followers.values()))
        term = server.member_state.curr_term
    finally:
        await server.shutdown()
        for peer in peers.values():
            await peer.close()
    batches = [b for b in peers["n1"].bodies(PUSH) if b'"batch":true' in b]
    assert batches
    req = json.loads(batches[-1])
    entries = [java_entry(e["index"], term, base64.b64decode(e["body"]), e["pos"])
               for e in req["batchEntry"]]
    assert batches[-1] == java_push(term, "APPEND", req["commitIndex"], entries, batch=True,
                                    sender="n0", to="n1")


async def test_leadership_transfer_to_a_java_node(tmp_path):
    """The rmq leader hands over to a Java transferee: its take-leadership
    request is 0.3.1.2's, and the Java answer (code and term only) is what
    the asker gets back."""
    followers = {p: JavaFollower(p) for p in ("n1", "n2")}
    peers = {p: await JavaPeer(f.answer).start() for p, f in followers.items()}
    port = free_port()
    server = DLedgerServer(config(tmp_path, {"n0": port, "n1": peers["n1"].port,
                                             "n2": peers["n2"].port}))
    await server.start()
    try:
        await wait_until(server.member_state.is_leader)
        await asyncio.wait_for(server.append(b"x"), 10)
        await wait_until(lambda: followers["n1"].begin_end() == (0, 0))
        term = server.member_state.curr_term
        async with Wire(port) as wire:
            answer = await wire.answer(RequestCode.LEADERSHIP_TRANSFER, (
                f'{{"code":200,"group":"g","remoteId":"n0","takeLeadershipLedgerIndex":0,'
                f'"term":{term},"transferId":"n0","transfereeId":"n1"}}').encode())
    finally:
        await server.shutdown()
        for peer in peers.values():
            await peer.close()
    assert answer == f'{{"code":200,"term":{term + 1}}}'.encode()
    assert peers["n1"].bodies(RequestCode.LEADERSHIP_TRANSFER) == [(
        f'{{"code":200,"group":"g","leaderId":"n0","localId":"n0","remoteId":"n1",'
        f'"takeLeadershipLedgerIndex":0,"term":{term},"transferId":"n0",'
        f'"transfereeId":"n1"}}').encode()]


async def test_rmq_follows_a_java_leader_and_votes(tmp_path):
    """A Java candidate's votes and a Java leader's heartbeats reach an rmq
    node; its answers are a Java node's."""
    ports = {"n0": free_port(), "n1": free_port(), "n2": free_port()}
    server = DLedgerServer(config(tmp_path, ports, heart_beat_time_interval_ms=2000,
                                  min_vote_interval_ms=5000, max_vote_interval_ms=6000))
    server.store.startup()
    await _listen_only(server)
    try:
        async with Wire(ports["n0"]) as wire:
            vote = (b'{"code":200,"group":"g","leaderId":"n1","ledgerEndIndex":-1,'
                    b'"ledgerEndTerm":-1,"localId":"n1","remoteId":"n0","term":%d}')
            assert await wire.answer(VOTE, vote % 3) == (
                b'{"code":200,"group":"g","leaderId":"n1","localId":"n1","remoteId":"n0",'
                b'"term":0,"voteResult":"REJECT_TERM_NOT_READY"}')
            server.member_state.next_term()
            term = server.member_state.curr_term
            assert term == 3
            assert await wire.answer(VOTE, vote % 3) == (
                b'{"code":200,"group":"g","leaderId":"n1","localId":"n1","remoteId":"n0",'
                b'"term":3,"voteResult":"ACCEPT"}')
            other = vote.replace(b'"n1"', b'"n2"') % 3
            assert await wire.answer(VOTE, other) == (
                b'{"code":200,"group":"g","leaderId":"n2","localId":"n2","remoteId":"n0",'
                b'"term":3,"voteResult":"REJECT_ALREADY_VOTED"}')
            assert await wire.answer(VOTE, vote % 2) == (
                b'{"code":200,"group":"g","leaderId":"n1","localId":"n1","remoteId":"n0",'
                b'"term":3,"voteResult":"REJECT_EXPIRED_VOTE_TERM"}')
            beat = b'{"code":200,"group":"g","leaderId":"%s","localId":"%s","remoteId":"%s","term":%d}'
            assert await wire.answer(HEART_BEAT, beat % (b"n1", b"n1", b"n0", 3)) == \
                b'{"code":200,"term":-1}'
            assert server.member_state.is_follower() and server.member_state.leader_id == "n1"
            assert await wire.answer(HEART_BEAT, beat % (b"n2", b"n2", b"n0", 3)) == \
                b'{"code":409,"term":-1}'
            assert await wire.answer(HEART_BEAT, beat % (b"n1", b"n1", b"n0", 2)) == \
                b'{"code":403,"term":3}'
            assert await wire.answer(HEART_BEAT, beat % (b"n9", b"n9", b"n0", 3)) == \
                b'{"code":401,"term":3}'
            assert await wire.answer(HEART_BEAT, beat % (b"n1", b"n1", b"n7", 3)) == \
                b'{"code":401,"group":"g","leaderId":"n1","localId":"n1","remoteId":"n7","term":3}'
            assert await wire.answer(VOTE, vote.replace(b'"g"', b'"h"') % 3) == (
                b'{"code":400,"group":"h","leaderId":"n1","localId":"n1","remoteId":"n0",'
                b'"term":3,"voteResult":"UNKNOWN"}')
    finally:
        await server.shutdown()


async def _listen_only(server: DLedgerServer) -> None:
    """The server's remoting side alone: no elector, so the state each answer
    depends on is set by the test."""
    from rmq.dledger.server import _Processor
    from rmq.remoting import RemotingServer
    from rmq.remoting.config import NettyServerConfig

    port = int(server.config.self_addr.rsplit(":", 1)[1])
    server.remoting = RemotingServer(NettyServerConfig(listenPort=port), None, name="dledger")
    server.remoting.register_default_processor(_Processor(server))
    await server.remoting.start()


async def test_rmq_follower_answers_java_pushes(tmp_path):
    """Compare, truncate, append (single and batch) and commit from a Java
    leader, answered as a Java follower answers (``buildResponse``)."""
    ports = {"n0": free_port(), "n1": free_port(), "n2": free_port()}
    server = DLedgerServer(config(tmp_path, ports))
    server.store.startup()
    await _listen_only(server)
    server.elector.change_to_follower(2, "n1")
    e = [java_entry(0, 2, b"a0", 0), java_entry(1, 2, b"a1", 50),
         java_entry(2, 2, b"a2", 100), java_entry(3, 2, b"a3", 150)]
    try:
        async with Wire(ports["n0"]) as wire:
            assert await wire.answer(PUSH, java_push(2, "COMPARE", -1, [e[0]])) == \
                b'{"beginIndex":-1,"code":406,"count":1,"endIndex":-1,"group":"g","index":0,"term":2}'
            assert await wire.answer(PUSH, java_push(2, "TRUNCATE", -1, [e[0]])) == \
                b'{"beginIndex":0,"code":200,"count":1,"endIndex":0,"group":"g","index":0,"term":2}'
            assert await wire.answer(PUSH, java_push(2, "APPEND", 0, [e[1]])) == \
                b'{"beginIndex":0,"code":200,"count":1,"endIndex":1,"group":"g","index":1,"term":2}'
            assert await wire.answer(PUSH, java_push(2, "APPEND", 1, e[2:], batch=True)) == \
                b'{"beginIndex":0,"code":200,"count":2,"endIndex":3,"group":"g","index":2,"term":2}'
            assert await wire.answer(PUSH, java_push(2, "COMMIT", 3, [])) == \
                b'{"beginIndex":0,"code":200,"count":0,"endIndex":3,"group":"g","term":2}'
            assert server.store.committed_index == 3
            assert await wire.answer(PUSH, java_push(2, "COMPARE", 3, [e[3]])) == \
                b'{"beginIndex":0,"code":200,"count":1,"endIndex":3,"group":"g","index":3,"term":2}'
            assert await wire.answer(PUSH, java_push(2, "APPEND", 3, [e[1]])) == \
                b'{"beginIndex":0,"code":200,"count":1,"endIndex":3,"group":"g","index":1,"term":2}'
            assert await wire.answer(PUSH, java_push(2, "APPEND", 3, [e[1]], to="n5")) == (
                b'{"beginIndex":0,"code":401,"count":0,"endIndex":0,"group":"g",'
                b'"leaderId":"n1","localId":"n1","remoteId":"n5","term":2}')
        assert [server.store.get(i).body for i in range(4)] == [b"a0", b"a1", b"a2", b"a3"]
    finally:
        await server.shutdown()


async def test_rmq_answers_java_client_requests(tmp_path):
    """METADATA, APPEND, GET, PULL and LEADERSHIP_TRANSFER as 0.3.1.2's
    DLedgerClient and admin send them, to a follower and to a leader."""
    ports = {"n0": free_port(), "n1": free_port(), "n2": free_port()}
    follower = DLedgerServer(config(tmp_path, ports))
    follower.store.startup()
    await _listen_only(follower)
    follower.elector.change_to_follower(4, "n1")
    peers = ",".join(f'"{p}":"127.0.0.1:{ports[p]}"' for p in ("n0", "n1", "n2"))
    try:
        async with Wire(ports["n0"]) as wire:
            assert await wire.answer(RequestCode.METADATA,
                                     b'{"code":200,"group":"g","remoteId":"n0","term":-1}') == (
                f'{{"code":200,"group":"g","leaderId":"n1","peers":{{{peers}}},'
                f'"term":-1}}').encode()
            append = b'{"body":"aGk=","code":200,"group":"g","remoteId":"n0","term":-1}'
            assert await wire.answer(RequestCode.APPEND, append) == (
                b'{"code":404,"group":"g","index":-1,"leaderId":"n1","pos":-1,"remoteId":"n0",'
                b'"term":-1}')
            get = b'{"beginIndex":0,"code":200,"group":"g","maxSize":0,"remoteId":"n0","term":-1}'
            assert await wire.answer(RequestCode.GET, get) == (
                b'{"code":419,"entries":[],"group":"g","leaderId":"n1","remoteId":"n0",'
                b'"term":-1}')
            transfer = (b'{"code":200,"group":"g","remoteId":"n0","takeLeadershipLedgerIndex":0,'
                        b'"term":4,"transferId":"%s","transfereeId":"%s"}')
            assert await wire.answer(RequestCode.LEADERSHIP_TRANSFER, transfer % (b"n0", b"n2")) \
                == b'{"code":404,"group":"g","leaderId":"n1","remoteId":"n0","term":4}'
            assert await wire.answer(RequestCode.LEADERSHIP_TRANSFER, transfer % (b"n0", b"n8")) \
                == b'{"code":401,"group":"g","leaderId":"n1","remoteId":"n0","term":4}'
            assert await wire.answer(RequestCode.LEADERSHIP_TRANSFER, transfer % (b"n2", b"n1")) \
                == b'{"code":411,"term":4}'
            assert await wire.answer(RequestCode.LEADERSHIP_TRANSFER, transfer % (b"n2", b"n0")) \
                == b'{"code":409,"group":"g","leaderId":"n1","remoteId":"n0","term":4}'
            frame, header, body = await wire.ask(RequestCode.PULL, (
                b'{"beginIndex":0,"code":200,"group":"g","nodeId":"n1","remoteId":"n0",'
                b'"term":4}'))
            assert header["code"] == 1 and body == b""
    finally:
        await follower.shutdown()

    port = free_port()
    leader = DLedgerServer(config(tmp_path / "solo", {"n0": port}))
    await leader.start()
    try:
        await wait_until(leader.member_state.is_leader)
        term = leader.member_state.curr_term
        async with Wire(port) as wire:
            body = await wire.answer(RequestCode.APPEND, append)
            assert body == (f'{{"code":200,"group":"g","index":0,"leaderId":"n0","pos":0,'
                            f'"term":{term}}}').encode()
            assert await wire.answer(RequestCode.GET, get) == (
                f'{{"code":200,"entries":[{java_entry(0, term, b"hi", 0)}],"group":"g",'
                f'"term":-1}}').encode()
    finally:
        await leader.shutdown()


async def test_rmq_client_reads_java_answers():
    """rmq's DLedgerClient against Java nodes: metadata finds the leader, an
    append is taken from a 200-coded answer, and its requests are the Java
    client's."""
    peers_json: list[str] = []

    def answer(code: int, body: bytes) -> bytes:
        if code == RequestCode.METADATA:
            return (f'{{"code":200,"group":"g","leaderId":"n1","peers":{{{",".join(peers_json)}}},'
                    f'"term":-1}}').encode()
        return b'{"code":200,"group":"g","index":7,"leaderId":"n1","pos":448,"term":5}'

    nodes = {p: await JavaPeer(answer).start() for p in ("n0", "n1")}
    peers_json.extend(f'"{p}":"127.0.0.1:{n.port}"' for p, n in nodes.items())
    client = DLedgerClient("g", ";".join(f"{p}-127.0.0.1:{n.port}" for p, n in nodes.items()))
    try:
        assert await client.find_leader() == "n1"
        resp = await client.append(b"hi")
        assert resp["index"] == 7 and resp["pos"] == 448
    finally:
        await client.close()
        for node in nodes.values():
            await node.close()
    assert nodes["n0"].bodies(RequestCode.METADATA)[0] == \
        b'{"code":200,"group":"g","remoteId":"n0","term":-1}'
    assert nodes["n1"].bodies(RequestCode.APPEND) == [
        b'{"body":"aGk=","code":200,"group":"g","remoteId":"n1","term":-1}']


async def test_peers_in_java_hashmap_order():
    """MetadataResponse.peers in the order a Java HashMap iterates: by bucket
    of the spread String hash (n0, n1, n2 in buckets 2, 3, 4; n10 in 12)."""
    peers = {f"n{i}": f"h:{i}" for i in (2, 10, 0, 1)}
    assert list(JavaHashMap(peers)) == ["n0", "n1", "n2", "n10"]
    assert encode({"peers": JavaHashMap({"b": "1", "a": "2"}), "code": 200}) == \
        b'{"code":200,"peers":{"a":"2","b":"1"}}'
