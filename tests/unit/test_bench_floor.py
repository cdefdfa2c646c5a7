"""bench/floor.py's servers' logic without sockets: the answer to a request
frame carries its opaque in its serialization, a read's frames are split
where they end, and a leader answers a read once a quorum acknowledged it."""

from __future__ import annotations

import pytest

from bench.floor import AckReader, Answers, FollowerServer, LeaderServer, Quorum, SingleServer
from bench.raw import RawRequests
from rmq.remoting import RemotingCommand

pytestmark = pytest.mark.timeout(30)


class Sink:
    def __init__(self) -> None:
        self.data = bytearray()

    def write(self, data: bytes) -> None:
        self.data += data


def _frames(data: bytes) -> list[RemotingCommand]:
    out, pos = [], 0
    while pos < len(data):
        size = int.from_bytes(data[pos:pos + 4], "big")
        out.append(RemotingCommand.decode(memoryview(data)[pos + 4:pos + 4 + size]))
        pos += 4 + size
    return out


def _feed(server, data: bytes, cut: int) -> None:
    """``data`` handed to ``server`` in two reads, split at ``cut``."""
    for part in (data[:cut], data[cut:]):
        server.get_buffer(-1)[:len(part)] = part
        server.buffer_updated(len(part))


@pytest.mark.parametrize("java", [False, True])
def test_each_request_is_answered_with_its_opaque_in_its_serialization(java):
    requests = RawRequests("BenchTopic", b"x" * 300, queues=8, java=java)
    made = [requests.frame(i) for i in range(5)]
    answers = Answers()
    for opaque, frame in made:
        buf = bytearray(frame)
        answer = answers.of(buf, 0, len(buf))
        assert int.from_bytes(answer[:4], "big") == len(answer) - 4
        cmd = RemotingCommand.decode(memoryview(answer)[4:])
        assert (cmd.opaque, cmd.code, cmd.serialize_type) == (opaque, 0, 1 if java else 0)
        assert cmd.is_response()


def test_a_read_split_inside_a_frame_is_answered_once_whole():
    requests = RawRequests("BenchTopic", b"y" * 500, queues=8)
    made = [requests.frame(i) for i in range(3)]
    data = b"".join(bytes(f) for _, f in made)
    server, sink = SingleServer(), Sink()
    server.connection_made(sink)
    _feed(server, data, len(made[0][1]) + 7)
    assert [c.opaque for c in _frames(bytes(sink.data))] == [op for op, _ in made]
    assert server.filled == 0


def test_a_leader_answers_a_read_when_a_quorum_acknowledged_its_push():
    requests = RawRequests("BenchTopic", b"z" * 200, queues=8, java=True)
    made = [requests.frame(i) for i in range(4)]
    quorum = Quorum(1)
    client, pushes = Sink(), [Sink(), Sink()]
    peers = []
    for sink in pushes:
        peer = AckReader(quorum, 2)
        peer.connection_made(sink)
        peers.append(peer)
    leader = LeaderServer(quorum, peers)
    leader.connection_made(client)
    _feed(leader, b"".join(bytes(f) for _, f in made[:2]), len(made[0][1]))  # two reads
    _feed(leader, b"".join(bytes(f) for _, f in made[2:]), 0)  # one read of two
    assert client.data == b"" and len(quorum.acks) == 3
    for sink in pushes:  # each follower got the three pushes, the read's frames in each
        assert len(sink.data) == sum(len(f) for _, f in made) + 3 * 4
    ack = FollowerServer.ack
    _feed(peers[1], ack * 2, len(ack) + 3)  # one follower acknowledges the first two pushes
    assert [c.opaque for c in _frames(bytes(client.data))] == [op for op, _ in made[:2]]
    _feed(peers[0], ack * 3, 5)  # the other all three: the first two already answered
    _feed(peers[1], ack, 1)
    assert [c.opaque for c in _frames(bytes(client.data))] == [op for op, _ in made]
    assert quorum.acks == {}


@pytest.mark.parametrize("kind", ["single", "leader"])
def test_the_floors_own_python_is_timed_over_whole_rounds(kind):
    """python_cost runs a server's reads (and a leader's acknowledgements)
    without sockets: a positive CPU time per frame."""
    from bench.floor import python_cost

    assert python_cost(kind, 300, kind == "leader", 3, reads=50) > 0


def test_a_padded_leaders_pushes_are_as_large_as_a_dledger_leaders():
    """With ``pad`` a push carries each read's frames and ``pad`` bytes a
    frame; ``dledger_pad`` makes a frame as large as the entry an rmq
    DLedger leader pushes for its send: its stored record, encoded whole
    here from the request's fields, in an entry's JSON (the comma too)."""
    from bench.floor import dledger_pad
    from rmq.dledger.entry import Entry
    from rmq.store import message_codec as codec
    from rmq.store.message import MessageExt

    size = 1024
    pad = dledger_pad(size)
    requests = RawRequests("BenchTopic", bytes(size), queues=8)
    opaque, frame = requests.frame(12345)
    header = RemotingCommand.decode(memoryview(bytes(frame))[4:]).ext_fields
    props = codec.send_properties(header["i"], "DefaultCluster")[0]
    props.pop("WAIT", None)
    record = codec.encode_message(MessageExt(
        topic="BenchTopic", body=bytes(size), properties=props, queue_id=3, queue_offset=99,
        commit_log_offset=10 ** 9, born_host=("127.0.0.1", 40000),
        store_host=("127.0.0.1", 10911), born_timestamp=1, store_timestamp=2))
    entry = Entry(index=10 ** 7, term=1, body=record, pos=10 ** 10)
    assert len(frame) + pad == len(entry.json_bytes()) + 1

    quorum, push = Quorum(1), Sink()
    peer = AckReader(quorum, 1)
    peer.connection_made(push)
    leader = LeaderServer(quorum, [peer], pad)
    leader.connection_made(Sink())
    made = [bytes(requests.frame(i)[1]) for i in range(3)]
    _feed(leader, b"".join(made), 0)
    assert len(push.data) == 4 + sum(map(len, made)) + 3 * pad
    assert int.from_bytes(push.data[:4], "big") == len(push.data) - 4
