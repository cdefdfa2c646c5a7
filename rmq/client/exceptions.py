"""Client errors: every failure the broker or name server reports keeps its code
and remark, so callers can branch on ``err.code`` the way Java code branches on
``MQBrokerException.getResponseCode()``."""

from __future__ import annotations

from rmq.common.exceptions import MessageDecodeError as MessageDecodeError


class MQClientError(Exception):
    """A client-side failure (bad argument, no route, all retries used up, I/O).

    ``code`` is the response code when the failure came from a remote peer, or
    -1 for purely local errors, mirroring ``MQClientException``.
    """

    def __init__(self, code: int, remark: str | None = None) -> None:
        self.code = code
        self.remark = remark or ""
        super().__init__(f"CODE: {code}  DESC: {self.remark}" if code >= 0 else self.remark)


class MQBrokerError(MQClientError):
    """An error answer from a broker or name server (``MQBrokerException``).

    ``broker_addr`` tells which peer answered, when known.
    """

    def __init__(self, code: int, remark: str | None = None, broker_addr: str | None = None) -> None:
        self.broker_addr = broker_addr
        super().__init__(code, remark)
        if broker_addr:
            self.args = (f"CODE: {code}  DESC: {self.remark}  BROKER: {broker_addr}",)

