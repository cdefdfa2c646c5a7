"""A DLedger client (0.3.1.2's ``DLedgerClient``): METADATA, APPEND to the
leader (found and followed on NOT_LEADER) and GET of one entry."""

from __future__ import annotations

import asyncio

from rmq.dledger.config import parse_peers
from rmq.dledger.entry import Entry
from rmq.dledger.messages import (
    AppendEntryRequest,
    AppendEntryResponse,
    GetEntriesRequest,
    MetadataRequest,
    MetadataResponse,
    RequestOrResponse,
    base,
)
from rmq.dledger.protocol import Code, DLedgerError, RequestCode
from rmq.dledger.rpc import PeerRpc
from rmq.remoting.exceptions import RemotingConnectError, RemotingError

_NOT_APPENDED = (Code.NOT_LEADER, Code.LEADER_TRANSFERRING, Code.LEADER_PENDING_FULL)


class DLedgerClient:
    def __init__(self, group: str, peers: str, timeout_ms: int = 3000) -> None:
        self.group = group
        self.peers = parse_peers(peers)
        self.timeout_ms = timeout_ms
        self.leader: str | None = None
        self.rpc = PeerRpc(self.peers)

    async def close(self) -> None:
        await self.rpc.close()

    async def call(self, peer: str, code: int, body: RequestOrResponse) -> RequestOrResponse:
        """One request; its answer, which alone decides (as
        ``DLedgerClientRpcNettyService`` reads it)."""
        return await self.rpc.call(peer, code, body, self.timeout_ms)

    async def metadata(self, peer: str) -> MetadataResponse:
        return await self.call(peer, RequestCode.METADATA,
                               base(MetadataRequest, self.group, None, peer, None, -1))

    async def find_leader(self) -> str | None:
        for peer in self.peers:
            try:
                leader = (await self.metadata(peer)).leader_id
            except (DLedgerError, RemotingError, OSError, TimeoutError):
                continue
            if leader:
                self.leader = leader
                return leader
        return None

    async def append(self, body: bytes, retry_s: float = 10.0) -> AppendEntryResponse:
        """Append through the leader.  Retried (for up to ``retry_s``) only where
        the body surely was not appended: no leader known, the connection
        refused, or an answer of NOT_LEADER, LEADER_TRANSFERRING or
        LEADER_PENDING_FULL.  A timeout, a connection lost after sending, or
        WAIT_QUORUM_ACK_TIMEOUT / TERM_CHANGED leave it unknown: DLedgerError,
        and the caller decides (a retry could store it twice).  Returns the
        committed append's response (``index``, ``term``, ``pos``)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + retry_s
        last: Exception | None = None
        while loop.time() < deadline:
            leader = self.leader or await self.find_leader()
            if leader is None:
                await asyncio.sleep(0.1)
                continue
            req = base(AppendEntryRequest, self.group, None, leader, None, -1, body=body)
            try:
                resp = await self.call(leader, RequestCode.APPEND, req)
            except RemotingConnectError as exc:
                last, self.leader = exc, None
                await asyncio.sleep(0.1)
                continue
            except (RemotingError, OSError, TimeoutError) as exc:
                self.leader = None
                raise DLedgerError(Code.NETWORK_ERROR, f"append via {leader} unknown: {exc}") \
                    from exc
            code = resp.code
            if code == Code.SUCCESS:
                return resp
            if code not in _NOT_APPENDED:
                raise DLedgerError(Code(code) if code in Code._value2member_map_ else Code.UNKNOWN,
                                   f"append via {leader}")
            last = DLedgerError(Code(code), f"append via {leader}")
            self.leader = resp.leader_id if resp.leader_id != leader else None
            await asyncio.sleep(0.05)
        raise DLedgerError(Code.LEADER_NOT_READY, f"no leader took the append: {last}")

    async def get(self, peer: str, index: int) -> Entry | None:
        req = base(GetEntriesRequest, self.group, None, peer, None, -1, begin_index=index,
                   max_size=0)
        resp = await self.call(peer, RequestCode.GET, req)
        if resp.code != Code.SUCCESS or not resp.entries:
            return None
        return resp.entries[0]
