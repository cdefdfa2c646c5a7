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
    busy_poll = None

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
