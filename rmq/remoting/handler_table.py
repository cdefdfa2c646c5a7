"""Processors that route requests by code through a table of handlers.

The name server's default processor, the broker's admin processor and the
client's processor each serve dozens of codes; 4.9.8 writes them as one big
``switch`` ending in REQUEST_CODE_NOT_SUPPORTED.  rmq keeps a dict
``code -> handler`` instead, and the answer for a code nobody handles is
built here once, with the remark 4.9.8 uses (the remoting layer gives the same
answer for codes without a processor).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rmq.common.codes import ResponseCode
from rmq.remoting.channel import Channel
from rmq.remoting.command import RemotingCommand

Handler = Callable[[Channel, RemotingCommand], Any]


def not_supported_remark(code: int) -> str:
    """Remark of a REQUEST_CODE_NOT_SUPPORTED answer (leading space as in 4.9.8)."""
    return f" request type {code} not supported"


def not_supported(code: int) -> RemotingCommand:
    """The REQUEST_CODE_NOT_SUPPORTED response for ``code``."""
    return RemotingCommand.create_response(
        ResponseCode.REQUEST_CODE_NOT_SUPPORTED, not_supported_remark(code))


class HandlerTableProcessor:
    """``process_request`` through ``self.handlers``; a handler returns the
    response, None (answered later or oneway) or an awaitable of either."""

    handlers: dict[int, Handler]

    def process_request(self, channel: Channel, request: RemotingCommand) -> Any:
        handler = self.handlers.get(request.code)
        if handler is None:
            return not_supported(request.code)
        return handler(channel, request)
