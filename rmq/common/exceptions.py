"""The base remoting failures, kept in common because header decoding (common.protocol)
raises them; ``rmq.remoting.exceptions`` re-exports them beside the transport failures."""

from __future__ import annotations


class RemotingError(Exception):
    """Base of every remoting failure."""


class RemotingCommandError(RemotingError):
    """A frame or custom header that cannot be decoded (``RemotingCommandException``)."""
