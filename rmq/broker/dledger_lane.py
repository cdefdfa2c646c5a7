"""The send lane of a DLedger leader: plain single sends served straight
from a connection's receive buffer, a whole read at a time.

A broker with ``enableDLegerCommitLog`` is a SYNC_MASTER while it leads its
group, and the send lane (``rmq.broker.send_lane``) declines it: the lane
writes records, consume-queue entries and answers at once, while a DLedger
put is an entry whose consume-queue entries are written when the group
commits it and whose answer waits for a quorum.  Through the general path
each send then pays for a ``RemotingCommand``, the dispatcher, the send
processor, a ``MessageExtBrokerInner``, a put result and a response command,
and a callback on the quorum wait.

This lane takes the leading frames of a read that the send lane would take
(read the same way, with the same checks: an existing ordinary topic, a
valid queue, no transaction, no delay, ASCII property keys) and stores each
as ``DLedgerCommitLog.put_message`` stores it
(``DLedgerCommitLog.append_plain``: the same record in the same entry, the
same dispatch room taken; a read's entries and index units written in one
compiled call).  The read's answers are built as the send lane builds them
(the general path's bytes, in one call: ``plain_answers``) and held together
on the group's quorum wait for its last entry: written in one go once a
quorum holds the entries, or each replaced by the general path's failure
answer when the wait fails.
Statistics are counted once per topic per read.  The first frame the lane
does not take -- or a put it cannot make (no longer the leader, a dispatch
file that cannot be made, ...) -- ends its turn, and that frame and
everything after it go the general way, which stores and answers them as
before.  Batches go the general way.
"""

from __future__ import annotations

import logging
from typing import Any

from rmq._fast import compiled
from rmq.broker.processor.send_support import channel_host
from rmq.broker.send_lane import SendLaneSupport, make_send_lane, plain_answers
from rmq.common import message as mc
from rmq.remoting.command import RPC_ONEWAY, RPC_RESPONSE
from rmq.store import BrokerRole
from rmq.store.results import PutMessageStatus

log = logging.getLogger("rmq.broker")


class DLedgerSendLane:
    """The lane of a DLedger leader (``FrameLane``: ``serve`` and ``served``)."""

    def __init__(self, support: SendLaneSupport, max_frame: int) -> None:
        self.support = support
        # the send lane's frame reader: compiled when built (its ``plain_sends``
        # reads a read's frames in one call, without a Python object per
        # field), else the twin
        self.frames = make_send_lane(support, max_frame)
        self._counts: dict[tuple[int, bool], int] = {}

    def served(self) -> list[tuple[int, bool, int]]:
        """(request code, oneway, count) of what the last ``serve`` took."""
        return [(code, oneway, n) for (code, oneway), n in sorted(self._counts.items())]

    def _may_put(self) -> bool:
        """What the send lane's ``begin`` and the store's status check ask,
        for a leader: a send taken now would be stored, not refused."""
        s = self.support
        cl = s.cl
        if not s.accepting() or s.cfg.brokerRole is not BrokerRole.SYNC_MASTER or \
                not s.store.accepts_puts or cl.begin_time_in_lock:
            return False
        ms = cl.server.member_state
        return ms.is_leader() and ms.transferee is None and s.processor.cluster.isascii()

    def serve(self, channel: Any, buf, pos: int, end: int) -> tuple[int, bytes | None]:
        """Store the plain sends at the start of ``buf[pos:end]``; returns the
        position of the first frame left to the general path.  The answers
        go out when the quorum wait ends, so none is returned here."""
        self._counts = {}
        sends = self.frames.plain_sends(self.support.processor.cluster.encode(), buf, pos, end)
        if not sends or not self._may_put():
            return pos, None
        read = _Read(self.support, channel)
        stored = read.cl.append_plain(sends, read.host_bits, read.born)
        if not stored:
            return pos, None
        tally(sends, stored, read.sizes, self._counts, RPC_ONEWAY)
        read.answers = plain_answers(read.host_hex, read.tails, sends, stored, read.asked)
        read.finish(stored[0][0], stored[-1][0])
        return sends[len(stored) - 1][0], None


def _tally(sends: list[tuple], stored: list[tuple], sizes: dict[str, list[int]],
           counts: dict[tuple[int, bool], int], oneway_bit: int) -> None:
    """Count the stored sends (``stored``: what ``append_plain`` returned
    for the leading ``sends``): [messages, bytes] per topic in ``sizes``
    (the put statistics), sends per (request code, oneway) in ``counts``.
    The twin of ``rmq._fast.dledger_append.tally``."""
    for send, put in zip(sends, stored, strict=False):
        t = sizes.get(send[5])
        if t is None:
            sizes[send[5]] = [1, put[3]]
        else:
            t[0] += 1
            t[1] += put[3]
        key = (send[1], bool(send[2] & oneway_bit))
        counts[key] = counts.get(key, 0) + 1


_c = compiled("dledger_append")
tally = _tally if _c is None else _c.tally


class _Read:
    """One read's context and what it stored and answers."""

    __slots__ = ("support", "channel", "cl", "born", "host_bits", "host_hex", "tails",
                 "answers", "asked", "sizes")

    def __init__(self, support: SendLaneSupport, channel: Any) -> None:
        self.support = support
        self.channel = channel
        cl = self.cl = support.cl
        born = channel.attrs.get("born_field")  # the stored born-host field, once per connection
        if born is None:
            born = channel.attrs["born_field"] = cl.host_field(channel_host(channel))
        self.born = born
        self.host_bits = (mc.BORNHOST_V6_FLAG if len(born) == 20 else 0) | \
            (mc.STOREHOSTADDRESS_V6_FLAG if cl.store_host_v6 else 0)
        self.host_hex = cl.msg_id_prefix.encode()
        self.tails = (support.tail(), support.rocketmq_tail())  # by serialize type
        self.answers = b""  # the answered sends' frames
        self.asked: list[tuple[int, int]] = []  # (opaque, serialize type) of each answer
        self.sizes: dict[str, list[int]] = {}  # topic -> [messages, bytes]

    def finish(self, first, last) -> None:
        """Count the read's puts and hold its answers on the quorum wait of
        its last entry (which covers the earlier ones)."""
        support = self.support
        stats = support.store.stats
        for topic, (nums, size) in self.sizes.items():
            stats.on_puts(topic, nums, size, nums)
            support.served += nums
        self.cl.quorum_wait(first, last, _Answer(support.processor, self.channel, self.answers,
                                                 self.asked) if self.answers else _no_answer)


def _no_answer(_status: PutMessageStatus) -> None:
    """The quorum wait of a read of oneway sends: nothing to answer."""


class _Answer:
    """What a read's quorum wait calls when it ends: the read's answers as
    built when a quorum holds the entries, else the general path's answer
    to a failed put, per send."""

    __slots__ = ("processor", "channel", "frames", "asked")

    def __init__(self, processor: Any, channel: Any, frames: bytes,
                 asked: list[tuple[int, int]]) -> None:
        self.processor = processor
        self.channel = channel
        self.frames = frames
        self.asked = asked

    def __call__(self, status: PutMessageStatus) -> None:
        if status is PutMessageStatus.PUT_OK:
            self.channel.write_bytes(self.frames, True)
            return
        code, remark = self.processor._failure(status)
        out = []
        for opaque, stype in self.asked:
            response = self.processor.response(code, remark)
            response.opaque = opaque
            response.flag |= RPC_RESPONSE
            response.serialize_type = stype
            out.append(response.encode())
        self.channel.write_bytes(b"".join(out))
