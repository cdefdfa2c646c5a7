"""A DLedger leader's push round (``EntryPusher._push_round``): the compiled
round (rmq._fast.dledger_push.push_round) and its twin (rmq.dledger.pusher
._push_round and the dispatcher's, store's, client's and channel's methods
it calls) push the same entries in the same frames -- the general client's
frame of the same request, byte for byte -- keep the same waits in the
response table, and leave the dispatchers as each other: a follower not
appending, or with MAX_PENDING pushes in flight, woken instead; one not
connected pushed the general way."""

from __future__ import annotations

import asyncio
import random
from types import SimpleNamespace

import pytest

from rmq._fast import compiled_or_none
from rmq.dledger import mmap_store, rpc
from rmq.dledger import pusher as pusher_mod
from rmq.dledger.entry import Entry
from rmq.dledger.member_state import Role
from rmq.dledger.messages import push_append_body
from rmq.dledger.protocol import PushType, RequestCode
from rmq.remoting import RemotingCommand, codec
from rmq.remoting.channel import Channel
from rmq.remoting.command import OPAQUES
from tests.unit.test_dledger_push_frames import Peer

pytestmark = pytest.mark.timeout(60)
P = compiled_or_none("dledger_push")
ROUNDS = [pusher_mod._push_round] + ([P.push_round] if P is not None else [])
if P is not None:  # (as rmq.dledger.pusher binds it, also when the twins run there)
    P.bind_push(pusher_mod._Acked, Role.LEADER, PushType.APPEND, PushType.COMPARE, Channel,
                pusher_mod.MAX_PENDING, rpc.RPC_TIMEOUT_MS, rpc.PUSH_HEAD, rpc.PUSH_TAIL, OPAQUES)
PEERS = ("n1", "n2", "n3", "n4", "n5")


class _Wake:
    def __init__(self) -> None:
        self.sets = 0

    def set(self) -> None:
        self.sets += 1


class _Store:
    """A leader's log of entries 0 to 11, those from 3 kept (``get`` reads
    the others, as the files would)."""

    def __init__(self) -> None:
        rnd = random.Random(5)
        self.log = [Entry(i, 3, rnd.randbytes(rnd.choice([0, 7, 90, 200])), 1000 * i,
                          body_crc=i, size=0) for i in range(12)]
        for e in self.log:
            e.compute_size()
        self._recent = self.log[3:]
        self._recent_first = 3
        self.ledger_begin_index = 0
        self.ledger_end_index = 11
        self.committed_index = 1
        self.reads: list[int] = []

    def get(self, index: int) -> Entry:
        self.reads.append(index)
        return self.log[index]

    kept_run = mmap_store.DLedgerMmapFileStore.kept_run


class _Pusher:
    """What a push round reaches of an ``EntryPusher``."""

    def __init__(self, peer_rpc: rpc.PeerRpc, batch: bool) -> None:
        self.ms = SimpleNamespace(role=Role.LEADER, curr_term=3, group="g", self_id="n0")
        self.store = _Store()
        self.config = SimpleNamespace(enable_batch_push=batch, max_batch_push_size=500)
        self.rpc = peer_rpc
        self._open = object()
        self._push_soon = True
        self.loop = asyncio.get_running_loop()  # (set by EntryPusher.start)
        self._round_run = None
        self.dispatchers = {}
        # n1 and n2 level (one run read for both), n3 behind, n4 comparing,
        # n5 with MAX_PENDING pushes in flight
        for peer, at in zip(PEERS, (2, 2, 0, 2, 2), strict=True):
            d = self.dispatchers[peer] = pusher_mod.PeerDispatcher(self, peer)
            d.state = PushType.COMPARE if peer == "n4" else PushType.APPEND
            d.term = 3
            d.write_index = at
            d.wake = _Wake()
            if peer == "n5":
                d.pending.update(dict.fromkeys(range(-pusher_mod.MAX_PENDING, 0), 1.0))


async def _round(push_round, batch: bool, connected: bool) -> tuple:
    peers = {p: Peer() for p in PEERS}
    for peer in peers.values():
        peer.mode = "none"  # (the waits stay in the table)
        await peer.start()
    peer_rpc = rpc.PeerRpc({p: peer.addr for p, peer in peers.items()})
    client = peer_rpc.client
    try:
        if connected:
            for peer in peers.values():
                await client._channel(peer.addr)
        pusher = _Pusher(peer_rpc, batch)
        push_round(pusher)
        table = sorted((type(w).__name__, w.dispatcher.peer, w.count, w.told,
                        ch.remote_addr == peers[w.dispatcher.peer].addr, timeout)
                       for w, ch, _at, timeout in client._responses.values())
        states = {p: (d.write_index, sorted(d.pending)[-3:], len(d.pending), d.wake.sets,
                      d.state, d.last_push_commit > 0)
                  for p, d in pusher.dispatchers.items()}
        n = sum(len(d.pending) for d in pusher.dispatchers.values()) - pusher_mod.MAX_PENDING
        for _ in range(500):
            if sum(len(peer.frames) for peer in peers.values()) == n:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        sent = {}
        for p, peer in peers.items():
            sent[p] = []
            for frame in peer.frames:
                code, _lang, _version, opaque, flag, remark, ext, _stype, at = \
                    codec.py_decode(frame[4:])
                body = frame[4 + at:]
                request = RemotingCommand.create_request(RequestCode.PUSH, None, body)
                request.opaque = opaque
                assert (code, flag, remark, ext) == (RequestCode.PUSH, 0, None, None)
                assert frame == request.encode()  # the general client's frame
                sent[p].append(body)
        return (sent, table, states, pusher._open, pusher._push_soon, pusher._round_run,
                pusher.store.reads)
    finally:
        await peer_rpc.close()
        for peer in peers.values():
            await peer.stop()


@pytest.mark.asyncio
@pytest.mark.parametrize("batch", [True, False])
@pytest.mark.parametrize("connected", [True, False])
async def test_compiled_and_twin_push_rounds_push_alike(batch: bool, connected: bool) -> None:
    got = [await _round(push_round, batch, connected) for push_round in ROUNDS]
    assert all(g == got[0] for g in got)
    sent, table, states, opened, soon, run, reads = got[0]
    assert opened is None and soon is False and run is None
    log = _Store().log
    runs = []  # the pushes from index 2 (n1, n2) and 0 (n3), as the twin store reads them
    for first in (2, 0):
        at, pushes = first, []
        while at <= 11:
            pushes.append(mmap_store._kept_run(_Store(), at, 500 if batch else 0))
            at += len(pushes[-1])
        runs.append(pushes)
    for peer, pushes in (("n1", runs[0]), ("n2", runs[0]), ("n3", runs[1])):
        assert sent[peer] == [push_append_body("g", "n0", peer, "n0", 3, 1,
                                               [log[e.index] for e in entries],
                                               batch or len(entries) > 1)
                              for entries in pushes]
        assert states[peer][:2] == (12, sorted(e[0].index for e in pushes)[-3:])
        assert states[peer][3:] == (0, PushType.APPEND, True)
    assert sent["n4"] == sent["n5"] == []
    assert states["n4"][3] == 1 and states["n5"][3] == 1  # woken instead
    if connected:  # (else the general way keeps them once connected)
        assert len(table) == sum(len(pushes) for pushes in (runs[0], runs[0], runs[1]))
        assert {t[0] for t in table} == {"_Acked"} and not any(t[3] for t in table)
        assert {t[4:] for t in table} == {(True, rpc.RPC_TIMEOUT_MS)}
    # the entries not kept read from the log: 2 by n1's first push, again by
    # n2's when n1's last push did not start there, 0 to 2 by n3's
    assert sorted(reads) == [0, 1] + [2] * (2 + (len(runs[0]) > 1))


@pytest.mark.compiled_only
@pytest.mark.asyncio
async def test_the_compiled_round_makes_its_waits_without_their_constructor(monkeypatch) -> None:
    """The compiled round fills each push's ``_Acked`` in place (its
    ``told`` slot is its base's, ``FrameWait``'s): no Python frame of
    ``_Acked.__init__`` per push, the same waits as the twin's (above)."""
    made = []
    init = pusher_mod._Acked.__init__

    def counted(self, dispatcher, count) -> None:
        made.append(count)
        init(self, dispatcher, count)

    monkeypatch.setattr(pusher_mod._Acked, "__init__", counted)
    sent, table, *_ = await _round(P.push_round, True, True)
    assert sum(len(pushes) for pushes in sent.values()) == len(table) > 0
    assert made == []
    await _round(pusher_mod._push_round, True, True)
    assert len(made) == len(table)
