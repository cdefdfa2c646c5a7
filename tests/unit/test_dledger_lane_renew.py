"""The DLedger leader's send lane keeps what every read is stored and
answered with (the cluster name's bytes, the message ids' host part, the
store and born hosts' sysFlag bits, the answer tails) from one read to the
next, and makes each again when its source changes at runtime: a broker
whose cluster name, store host, region or trace switch changes, or a read
from a connection with another born host, is served with the new values,
as if made afresh for that read.

The compiled lane (``DLedgerLane``: a read served and its answers written
once the quorum holds, with no Python frame) and its twin
(``DLedgerSendLane``) serve the same reads alike: what each takes, its
request counts, the put statistics, the quorum waits, the answers written
(or the general path's failure answers), such changes between reads
included."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from rmq._fast import compiled_or_none
from rmq.broker import dledger_lane
from rmq.broker.send_lane import SendLane, SendLaneSupport
from rmq.common import message as mc
from rmq.common.message_id import socket_address_bytes
from rmq.dledger.commit_log import _put_status
from rmq.dledger.protocol import Code
from rmq.remoting.channel import Channel
from rmq.remoting.command import RPC_ONEWAY
from rmq.store.results import PutMessageStatus
from rmq.store.stats import PutCounters
from tests.unit.test_dledger_lane_answers import _processor
from tests.unit.test_dledger_plain_runs import (
    ROOMS,
    _commit_log,
    _frame,
    _many_frames,
    _Store,
    _Topics,
)
from tests.unit.test_dledger_plain_runs import _file_store as _ledger
from tests.unit.test_dledger_store import _hosts
from tests.unit.test_lane_answers_joined import _Transport

_LANE = compiled_or_none("send_lane")
_STATS = compiled_or_none("store_stats")

pytestmark = pytest.mark.timeout(30)

V4 = bytes(8)
V6 = bytes(20)


class _Support:
    """What the lane reads of its ``SendLaneSupport`` each read."""

    def __init__(self) -> None:
        self.cl = SimpleNamespace(store_host_field=V4, msg_id_prefix="7F00000100002A9F")
        self.processor = SimpleNamespace(cluster="DefaultCluster")
        self.bc = SimpleNamespace(regionId="DefaultRegion", traceOn=True)
        self._tails_of = (None, None)
        self._tail_pair = (b"", b"")
        self.made_tails = 0

    def new_tails(self) -> tuple[bytes, bytes]:
        self.made_tails += 1
        self._tails_of = (self.bc.regionId, self.bc.traceOn)
        self._tail_pair = (f"{self.bc.regionId}/{self.bc.traceOn}".encode(), b"rocketmq")
        return self._tail_pair

    def born_field(self, channel) -> bytes:
        born = channel.attrs["born_field"] = channel.born
        return born

    tails = SendLaneSupport.tails  # (the support's own check, over these fields)


def _fresh(support: _Support, channel) -> tuple:
    """The read's values made afresh (as the lane made them every read)."""
    cl = support.cl
    return (support.processor.cluster.encode(),
            (mc.BORNHOST_V6_FLAG if len(channel.born) == 20 else 0)
            | (mc.STOREHOSTADDRESS_V6_FLAG if len(cl.store_host_field) == 20 else 0),
            channel.born, cl.msg_id_prefix.encode(),
            f"{support.bc.regionId}/{support.bc.traceOn}".encode())


def test_the_lane_serves_each_read_with_its_sources_current_values():
    support = _Support()
    lane = dledger_lane.DLedgerSendLane(support, None)
    seen = []

    def store(cluster, buf, pos, end, cl, host_bits, born, now, host_hex, tails, sizes, counts):
        seen.append((cluster, host_bits, born, host_hex, tails[0]))
        return 0, pos, None, None, b"", b""

    lane._store = store
    v4 = SimpleNamespace(attrs={}, born=V4)
    v6 = SimpleNamespace(attrs={}, born=V6)

    def serve(channel) -> None:
        assert lane.serve(channel, b"", 0, 0) == (0, None)
        assert seen[-1] == _fresh(support, channel)

    serve(v4)
    serve(v4)
    assert support.made_tails == 1  # kept from one read to the next
    serve(v6)  # another connection's born host
    serve(v4)
    support.processor.cluster = "OtherCluster"
    serve(v4)
    support.cl.store_host_field = V6  # the store host now an IPv6 address
    support.cl.msg_id_prefix = "00000000000000000000000000000001000A"
    serve(v4)
    serve(v6)
    support.bc.regionId = "OtherRegion"
    serve(v4)
    support.bc.traceOn = False
    serve(v6)
    assert support.made_tails == 3
    assert len({s[0] for s in seen}) == 2 and len({s[3] for s in seen}) == 2
    assert {s[1] for s in seen} == {0, mc.BORNHOST_V6_FLAG, mc.STOREHOSTADDRESS_V6_FLAG,
                                    mc.BORNHOST_V6_FLAG | mc.STOREHOSTADDRESS_V6_FLAG}


class _Recording:
    """Put statistics of a class of their own (told through ``on_puts``)."""

    def __init__(self) -> None:
        self.told: list = []

    def on_puts(self, topic, count, size, puts) -> None:
        self.told.append((topic, count, size, puts))

    def state(self) -> list:
        return self.told


def _counted(stats) -> object:
    if isinstance(stats, _Recording):
        return stats.state()
    return (stats.topic_put_nums, stats.topic_put_size, stats.put_message_times_total,
            stats.put_message_size_total, list(stats.put_latency))


class _LaneSupport(_Topics):
    """What the DLedger lanes read of a ``SendLaneSupport`` (and the frame
    readers of its topics)."""

    def __init__(self, cl, stats) -> None:
        super().__init__()
        self.cl = cl
        self.processor = _processor()
        self.processor.cluster = "DefaultCluster"
        self.bc = SimpleNamespace(regionId="DefaultRegion", traceOn="true")
        self.store = SimpleNamespace(stats=stats)
        self.served = 0
        self._tails_of = (None, None)
        self._tail_pair = (b"", b"")
        self.lanes: list = []

    def new_tails(self) -> tuple[bytes, bytes]:
        self._tails_of = (self.bc.regionId, self.bc.traceOn)
        region = self.bc.regionId
        self._tail_pair = (
            f'","MSG_REGION":"{region}","TRACE_ON":"{self.bc.traceOn}","opaque":'.encode(),
            b"\x00\x0aMSG_REGION" + len(region).to_bytes(4, "big") + region.encode()
            + b"\x00\x08TRACE_ON\x00\x00\x00\x04true")
        return self._tail_pair

    def born_field(self, channel) -> bytes:
        born = channel.attrs["born_field"] = channel.attrs["born"]
        return born

    tails = SendLaneSupport.tails


class _FakeChannel:
    """A connection that is not a ``Channel`` (its own ``write_bytes``)."""

    def __init__(self, transport: _Transport) -> None:
        self.attrs: dict = {}
        self.transport = transport

    def write_bytes(self, frames: bytes, more: bool = False) -> None:
        self.transport.calls.append(("write_bytes", frames, more))


def _leading(base: type) -> type:
    class _Leading(base):
        def leads(self) -> bool:
            return True

    return _Leading


def _compiled(support):
    return _LANE.DLedgerLane(_leading(_LANE.SendLane)(support, 1 << 20),
                             PutMessageStatus.PUT_OK, dledger_lane._answer_failed)


def _twin(support):
    return dledger_lane.DLedgerSendLane(support, _leading(SendLane)(support, 1 << 20))


def _reads() -> list[bytes]:
    """Reads of up to 20 frames (the one too big for the lane left out),
    the third one of oneway sends alone."""
    frames = _many_frames(8)
    del frames[30]
    reads = [b"".join(frames[i:i + 12]) for i in range(0, len(frames), 12)]
    oneway = b"".join(_frame(900 + i, "T1", 1, b"o" * 50, 0, RPC_ONEWAY, 310, 0)
                      for i in range(3))
    return reads[:2] + [oneway] + reads[2:]


async def _run(tmp_path, make, stats_class, channel_class) -> list:
    """Every read served by the lane ``make`` makes, with changes between
    them; each read's quorum wait ended as it is asked for (the fourth
    failed); everything seen."""
    store = _ledger(tmp_path, term=2, data_size=1 << 13)
    store.data.zero_ahead = True
    cl = _commit_log(store, {("T1", 1): 9}, _Store(*ROOMS[0], str(tmp_path)), 3000)
    cl.msg_id_prefix = "7F00000100002A9F"
    waits: list = []
    cl.quorum_wait = lambda first, last, then: waits.append((first.index, last.index, then))
    stats = stats_class()
    support = _LaneSupport(cl, stats)
    lane = make(support)
    transport = _Transport()
    v4, v6 = channel_class(transport), channel_class(transport)
    v4.attrs["born"] = _hosts()[0]
    v6.attrs["born"] = socket_address_bytes(("::1", 4000))
    seen = []
    for i, buf in enumerate(_reads()):
        if i == 2:
            support.processor.cluster = "OtherCluster"
        elif i == 4:
            cl.msg_id_prefix = "00000000000000000000000000000001000A"
            cl.store_host_field = socket_address_bytes(("::1", 10911))
        elif i == 5:
            support.bc.regionId = "OtherRegion"
        taken, out = lane.serve(v6 if i == 3 else v4, buf, 0, len(buf))
        seen.append((taken, out, lane.served(), support.served, len(waits)))
        first, last, then = waits[-1]
        if then is dledger_lane._no_answer or (_LANE is not None and then is _LANE.no_answer):
            then = None
        else:
            waits[-1] = (first, last, "answers")
        for status in ((_put_status(Code.WAIT_QUORUM_ACK_TIMEOUT) if i == 3 else
                        PutMessageStatus.PUT_OK), PutMessageStatus.PUT_OK):
            if then is not None:  # (one read's and the next's answers in one turn)
                then(status)
            if i % 2:
                break
        await asyncio.sleep(0)  # the turn's end: queued answers leave
        seen.append(list(transport.calls))
    seen.append([w if w[2] == "answers" else (w[0], w[1], "none") for w in waits])
    seen.append((_counted(stats), store.ledger_end_index))
    store.shutdown()
    return seen


@pytest.mark.compiled_only
@pytest.mark.parametrize("stats_class", ["compiled", _Recording, PutCounters])
@pytest.mark.parametrize("channel_class", [Channel, _FakeChannel])
async def test_compiled_lane_and_twin_serve_and_answer_alike(tmp_path, stats_class,
                                                             channel_class):
    """The compiled ``DLedgerLane`` and the twin over the same reads: a
    changed cluster name, id prefix, store host, region and born host
    between reads; a read of oneway sends (no answers); a quorum wait that
    failed (the general path's failure answers); answers written through a
    ``Channel`` (the compiled ``write_frames``) and a channel of another
    class."""
    stats_class = _STATS.PutCounters if stats_class == "compiled" else stats_class
    outs = [await _run(tmp_path / name, make, stats_class, channel_class)
            for name, make in (("c", _compiled), ("t", _twin))]
    assert outs[0] == outs[1]
    seen = outs[0]
    reads = seen[0:-2:2]
    assert all(taken > 0 and out is None for taken, out, *_ in reads)
    assert reads[2][2] == [(310, True, 3)]  # the oneway read: counted, nothing answered
    waits = seen[-2]
    assert [w[2] for w in waits].count("none") == 1
    writes = seen[-3]
    failed = [c for c in writes if b'"code":' in c[1] and b'"code":0' not in c[1]]
    assert failed  # the failed quorum wait's answers
    assert reads[-1][3] == sum(n for r in reads for _code, _oneway, n in r[2])  # served


def test_the_broker_makes_the_compiled_lane_when_built():
    """``make_dledger_lane``: the compiled lane over the compiled reader
    when built, the twin otherwise (``RMQ_NO_EXTENSIONS=1``)."""
    support = _LaneSupport(SimpleNamespace(), PutCounters())
    lane = dledger_lane.make_dledger_lane(support, 1 << 20)
    if dledger_lane._c is None:
        assert type(lane) is dledger_lane.DLedgerSendLane and type(lane.frames) is SendLane
    else:
        assert type(lane) is dledger_lane._c.DLedgerLane
        assert type(lane.frames) is dledger_lane._c.SendLane
