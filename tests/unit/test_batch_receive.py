"""The receive side of a connection streaming large frames (batch sends): the
buffer is compacted in place and grown only when a frame needs it, and every
frame arrives intact whatever the read sizes."""

from __future__ import annotations

import os
import random

import pytest

from rmq.remoting.channel import RemotingProtocol
from rmq.remoting.command import RemotingCommand


class _Service:
    lane = None  # no frame lane: every frame is dispatched
    pacer = None

    def __init__(self) -> None:
        self.got: list[RemotingCommand] = []
        self.errors: list = []

    def _channel_connected(self, channel) -> None:
        pass

    def _on_request(self, channel, cmd) -> None:
        self.got.append(cmd)

    def _on_response(self, cmd) -> None:
        self.got.append(cmd)

    def _frame_error(self, channel, error) -> None:
        self.errors.append(error)


class _Transport:
    def get_extra_info(self, name):
        return ("127.0.0.1", 1)

    def is_closing(self) -> bool:
        return False


@pytest.mark.timeout(60)
@pytest.mark.parametrize("seed", range(6))
async def test_frames_survive_any_read_sizes(seed):
    rnd = random.Random(seed)
    sizes = [rnd.choice([0, 10, 1000, 33_000, 70_000, 200_000]) for _ in range(60)]
    cmds = [RemotingCommand.create_request(310, {"i": str(i)}, os.urandom(n) if n else None)
            for i, n in enumerate(sizes)]
    stream = b"".join(c.encode() for c in cmds)
    service = _Service()
    proto = RemotingProtocol(service, 16 * 1024 * 1024)
    proto.connection_made(_Transport())
    pos = 0
    max_read = rnd.choice([4096, 65536, 300_000])
    while pos < len(stream):
        buf = proto.get_buffer(-1)
        n = min(len(buf), len(stream) - pos, rnd.randrange(1, max_read))
        buf[:n] = stream[pos:pos + n]
        buf.release()
        proto.buffer_updated(n)
        pos += n
    assert not service.errors
    assert [(c.ext_fields["i"], c.body) for c in service.got] == \
        [(c.ext_fields["i"], c.body) for c in cmds]
    assert len(proto._buf) <= 4 * 256 * 1024  # grown for the largest frame only


def _feed(proto: RemotingProtocol, data: bytes) -> int:
    """One read of at most what ``get_buffer`` offers; the bytes it took."""
    buf = proto.get_buffer(-1)
    n = min(len(buf), len(data))
    buf[:n] = data[:n]
    buf.release()
    proto.buffer_updated(n)
    return n


@pytest.mark.timeout(30)
async def test_buffer_kept_after_a_short_read():
    """A pipelining client's reads come in all sizes: a grown receive buffer
    stays grown over short reads, so a burst after a quiet moment is read
    whole, not in 4 KiB pieces; only a run of short reads gives it back."""
    from rmq.remoting.channel import _BUSY_BUFFER, _INITIAL_BUFFER, _QUIET_READS

    service = _Service()
    proto = RemotingProtocol(service, 16 * 1024 * 1024)
    proto.connection_made(_Transport())
    small = RemotingCommand.create_request(310, {"i": "s"}, b"x" * 100).encode()
    burst = b"".join(RemotingCommand.create_request(310, {"i": str(i)}, os.urandom(500)).encode()
                     for i in range(30))
    assert _INITIAL_BUFFER < len(burst) < _BUSY_BUFFER // 2
    assert len(proto._buf) == _INITIAL_BUFFER  # a new connection starts small
    for _ in range(3):
        _feed(proto, small)
    assert len(proto._buf) == _INITIAL_BUFFER  # short reads never grow it
    # the first burst fills the small buffer once; the rest comes in one read
    taken = _feed(proto, burst)
    assert taken == _INITIAL_BUFFER
    assert _feed(proto, burst[taken:]) == len(burst) - taken
    assert len(proto._buf) == _BUSY_BUFFER
    for _ in range(_QUIET_READS - 1):
        _feed(proto, small)  # a quiet moment, one request at a time
        assert len(proto._buf) == _BUSY_BUFFER
    assert _feed(proto, burst) == len(burst)  # the next burst: one read
    for _ in range(_QUIET_READS):
        _feed(proto, small)
    assert len(proto._buf) == _INITIAL_BUFFER  # quiet for long: the room given back
    assert not service.errors
    assert len(service.got) == 3 + 30 + (_QUIET_READS - 1) + 30 + _QUIET_READS
