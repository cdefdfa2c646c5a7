"""Remoting exceptions (RocketMQ's ``org.apache.rocketmq.remoting.exception``).

One class per failure kind so callers can tell a dead peer (connect / send)
from a slow one (timeout) from a bad frame or header (command error).
"""

from __future__ import annotations

from rmq.common.exceptions import RemotingCommandError, RemotingError

__all__ = [
    "RemotingCommandError",
    "RemotingConnectError",
    "RemotingError",
    "RemotingSendRequestError",
    "RemotingTimeoutError",
]


class RemotingConnectError(RemotingError):
    """No connection could be made to the address (``RemotingConnectException``)."""

    def __init__(self, addr: str, cause: BaseException | None = None) -> None:
        detail = f": {cause}" if cause is not None else ""
        super().__init__(f"connect to {addr} failed{detail}")
        self.addr = addr


class RemotingSendRequestError(RemotingError):
    """The request could not be written, or the connection died before the
    response came (``RemotingSendRequestException``)."""

    def __init__(self, addr: str, cause: BaseException | str | None = None) -> None:
        detail = f": {cause}" if cause is not None else ""
        super().__init__(f"send request to {addr} failed{detail}")
        self.addr = addr


class RemotingTimeoutError(RemotingError):
    """No response within the timeout (``RemotingTimeoutException``)."""

    def __init__(self, addr: str, timeout_ms: int) -> None:
        super().__init__(f"wait response on the channel <{addr}> timeout, {timeout_ms}(ms)")
        self.addr = addr
        self.timeout_ms = timeout_ms
