"""A connection of a remoting server in the benches' own process: its
protocol handed reads as the event loop hands them, its answers written to
a transport that keeps only the last one and counts them."""

from __future__ import annotations


class Transport:
    """A connection's transport that counts the writes and keeps the last one."""

    def __init__(self) -> None:
        self.writes = 0
        self.last = b""  # the last write

    def get_extra_info(self, name: str, default=None):
        return ("127.0.0.1", 40000) if name in ("peername", "sockname") else default

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass

    def write(self, data) -> None:
        self.writes += 1
        self.last = data

    def writelines(self, parts) -> None:
        self.writes += 1
        self.last = b"".join(parts)


class Connection:
    """One connection's protocol of a remoting server: ``serve``
    hands it a read as the event loop does (the room it offers, filled, then
    ``buffer_updated``; a read larger than the room in several)."""

    def __init__(self, server) -> None:
        from rmq.remoting.channel import RemotingProtocol

        self.transport = Transport()
        self.protocol = RemotingProtocol(server, server.config.frameMaxLength)
        self.protocol.connection_made(self.transport)
        self.lane = self  # (``_serve_all`` asks ``lane.serve``)

    def serve(self, _channel, buf: bytes, pos: int, end: int) -> tuple[int, None]:
        protocol = self.protocol
        while pos < end:
            room = protocol.get_buffer(-1)
            n = min(len(room), end - pos)
            room[:n] = buf[pos:pos + n]
            pos += n
            protocol.buffer_updated(n)
        return end, None
