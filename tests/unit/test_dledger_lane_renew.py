"""The DLedger leader's send lane keeps what every read is stored and
answered with (the cluster name's bytes, the message ids' host part, the
store and born hosts' sysFlag bits, the answer tails) from one read to the
next, and makes each again when its source changes at runtime: a broker
whose cluster name, store host, region or trace switch changes, or a read
from a connection with another born host, is served with the new values,
as if made afresh for that read."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from rmq.broker import dledger_lane
from rmq.broker.send_lane import SendLaneSupport
from rmq.common import message as mc

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


def test_the_lane_serves_each_read_with_its_sources_current_values(monkeypatch):
    monkeypatch.setattr(dledger_lane, "make_send_lane", lambda support, max_frame: None)
    support = _Support()
    lane = dledger_lane.DLedgerSendLane(support, 1 << 20)
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
