"""The requests a DLedger member sends to its peers, over one remoting client
(``DLedgerRpcNettyService``'s sending half): the elector and the pusher hold
this object, not the server, so that each sees only the wire."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from rmq.dledger.messages import RESPONSE_OF, RequestOrResponse
from rmq.dledger.protocol import Code, DLedgerError, RequestCode, encode, read_answer
from rmq.remoting import RemotingClient, RemotingCommand

RPC_TIMEOUT_MS = 3000


class PeerRpc:
    def __init__(self, peer_map: dict[str, str]) -> None:
        """``peer_map``: peer id -> address, as the member state holds it."""
        self.peer_map = peer_map
        self.client = RemotingClient()

    async def close(self) -> None:
        await self.client.close()

    async def call(self, peer: str, code: int, body: RequestOrResponse | bytes,
                   timeout_ms: int = RPC_TIMEOUT_MS) -> RequestOrResponse:
        """One DLedger request to ``peer`` (``body`` a request, or its JSON
        already encoded); its answer, of the response class of ``code``.  As 0.3.1.2 reads it: the body decides, whatever the
        remoting code (200 from DLedger, 0 from older rmq nodes); an answer
        without a JSON body (a remoting error such as SYSTEM_ERROR), or with
        one that does not bind to the response class, is a NETWORK_ERROR."""
        request = RemotingCommand.create_request(
            int(code), None, body if type(body) is bytes else encode(body))
        response = await self.client.invoke(self.peer_map[peer], request, timeout_ms)
        answer = read_answer(peer, response)
        try:
            return RESPONSE_OF[code].from_json(answer)
        except (ValueError, TypeError) as exc:
            raise DLedgerError(Code.NETWORK_ERROR, f"{peer} answered {answer}: {exc}") from None

    def call_then(self, peer: str, code: int, body: RequestOrResponse | bytes,
                  done: Callable[[RequestOrResponse | None], None],
                  timeout_ms: int = RPC_TIMEOUT_MS) -> None:
        """``call`` without a task or a coroutine (the leader's pushes, one per
        follower and batch): ``done(answer)`` on the loop, or ``done(None)``
        when no answer came or it does not bind to the response class."""
        request = RemotingCommand.create_request(
            int(code), None, body if type(body) is bytes else encode(body))

        def finished(response: RemotingCommand | None, error: BaseException | None) -> None:
            if error is not None:
                done(None)
                return
            try:
                answer = RESPONSE_OF[code].from_json(read_answer(peer, response))
            except (DLedgerError, ValueError, TypeError):
                done(None)
                return
            done(answer)

        self.client.invoke_callback(self.peer_map[peer], request, timeout_ms, finished)

    def push_then(self, peer: str, body: bytes,
                  done: Callable[[RemotingCommand | None, BaseException | None], None],
                  timeout_ms: int = RPC_TIMEOUT_MS) -> None:
        """An APPEND push (its JSON ``body``) sent without a task, a coroutine
        or a closure: ``done(response, None)`` or ``done(None, error)`` on the
        loop, the remoting client's callback itself (the pusher reads the
        answer with ``messages.push_answer``)."""
        request = RemotingCommand.create_request(RequestCode.PUSH, None, body)
        self.client.invoke_callback(self.peer_map[peer], request, timeout_ms, done)

    def spawn_call(self, peer: str, code: int, body: RequestOrResponse | bytes) -> asyncio.Task:
        """``call`` as a task whose failure is read even when nobody awaits it
        (a heartbeat or vote answered after the quorum was reached)."""
        task = asyncio.ensure_future(self.call(peer, code, body))
        task.add_done_callback(_read_failure)
        return task


def _read_failure(task: asyncio.Task) -> None:
    if not task.cancelled():
        task.exception()
