"""Bounds on the connections one server process accepts.

4.9.8 accepts every connection; a single misbehaving client that opens
sockets in a loop can then exhaust the broker's file descriptors and memory
and starve everyone else.  rmq adds two settings, both off (0) by default:
``serverMaxConnections`` bounds the connections of the whole process (the
broker's two ports share one limiter) and ``serverMaxConnectionsPerAddress``
those from one remote IP address.  A connection over either bound is closed
at once, before a byte of it is read, with a log line; the ones already
accepted are not touched.
"""

from __future__ import annotations

import logging
import time

log = logging.getLogger("rmq.remoting")

_LOG_EVERY_S = 1.0  # refusals come in floods: one line per second, with a count


class ConnectionLimiter:
    """Counts open connections in total and per remote host."""

    __slots__ = ("max_total", "max_per_address", "total", "per_host", "refused",
                 "_unlogged", "_logged_at")

    def __init__(self, max_total: int = 0, max_per_address: int = 0) -> None:
        self.max_total = max(0, int(max_total))
        self.max_per_address = max(0, int(max_per_address))
        self.total = 0
        self.per_host: dict[str, int] = {}
        self.refused = 0  # since start, for the runtime statistics
        self._unlogged = 0
        self._logged_at = 0.0

    @property
    def enabled(self) -> bool:
        return bool(self.max_total or self.max_per_address)

    def admit(self, host: str) -> str | None:
        """Count a new connection from ``host``; None when admitted, else why not
        (nothing is counted then)."""
        if self.max_total and self.total >= self.max_total:
            return f"{self.total} connections open, serverMaxConnections={self.max_total}"
        held = self.per_host.get(host, 0)
        if self.max_per_address and held >= self.max_per_address:
            return (f"{held} connections open from {host}, "
                    f"serverMaxConnectionsPerAddress={self.max_per_address}")
        self.total += 1
        self.per_host[host] = held + 1
        return None

    def release(self, host: str) -> None:
        """An admitted connection from ``host`` closed."""
        self.total -= 1
        held = self.per_host.get(host, 0) - 1
        if held > 0:
            self.per_host[host] = held
        else:
            self.per_host.pop(host, None)

    def log_refusal(self, server: str, remote: str, reason: str) -> None:
        """One warning per second at most; the lines in between are counted."""
        self.refused += 1
        now = time.monotonic()
        if now - self._logged_at < _LOG_EVERY_S:
            self._unlogged += 1
            return
        more = f" ({self._unlogged} more refused since the last line)" if self._unlogged else ""
        log.warning("%s: connection from %s refused: %s%s", server, remote, reason, more)
        self._unlogged = 0
        self._logged_at = now


def remote_host(remote_addr: str) -> str:
    """The host part of ``host:port`` (IPv6 hosts keep their colons)."""
    host, sep, _port = remote_addr.rpartition(":")
    return host if sep else remote_addr
