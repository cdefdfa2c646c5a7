"""Failures raised by the lowest layer: the base remoting failures (header
decoding in common.protocol and the compiled codecs in rmq._fast raise them;
``rmq.remoting.exceptions`` re-exports them beside the transport failures) and
the message-record decoding failure (``rmq.client.exceptions`` re-exports it)."""

from __future__ import annotations


class RemotingError(Exception):
    """Base of every remoting failure."""


class RemotingCommandError(RemotingError):
    """A frame or custom header that cannot be decoded (``RemotingCommandException``)."""


class MessageDecodeError(ValueError):
    """A pull/query body that is not a sequence of complete message records
    (raised by ``rmq.client.codec`` and its compiled twin)."""
