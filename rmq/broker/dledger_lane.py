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
same dispatch room taken).  The read's answers are built as the send lane
builds them (the general path's bytes) and held together on the group's
quorum wait for its last entry: written in one go once a quorum holds the
entries, or each replaced by the general path's failure answer when the
wait fails.  Reading, storing, counting and answering the read is one
compiled call (``SendLane.store_read``: the sends' fields, records, queues
and offsets in C arrays, no Python object per send, each body copied
once, into its entry).  Statistics are counted once per topic per read.
The first frame the lane does not take -- or a put it cannot make (no
longer the leader, a dispatch file that cannot be made, ...) -- ends its
turn, and that frame and everything after it go the general way, which
stores and answers them as before.  Batches go the general way.

When built, the lane is the compiled ``DLedgerLane`` (rmq/_fast/send_lane.pyx,
``make_dledger_lane``): the per-read steps below, fields read at their slots,
and its answers held by a compiled callable that writes them on PUT_OK --
no Python frame for a read nor for its answers; ``DLedgerSendLane`` is its
twin.
"""

from __future__ import annotations

import functools
import logging
import struct
import time
from typing import Any

from rmq._fast import compiled
from rmq.broker.send_lane import SendLaneSupport, make_send_lane, plain_answers
from rmq.common import message as mc
from rmq.remoting.command import RPC_ONEWAY, RPC_RESPONSE
from rmq.store.results import PutMessageStatus

log = logging.getLogger("rmq.broker")


def make_dledger_lane(support: SendLaneSupport, max_frame: int) -> Any:
    """A DLedger leader's lane: the compiled ``DLedgerLane`` over the
    compiled send lane when built (a read served and answered with no
    Python frame), else the twin ``DLedgerSendLane``."""
    frames = make_send_lane(support, max_frame)
    if _c is not None and isinstance(frames, _c.SendLane):
        return _c.DLedgerLane(frames, PutMessageStatus.PUT_OK, _answer_failed)
    return DLedgerSendLane(support, frames)


class DLedgerSendLane:
    """The lane of a DLedger leader (``FrameLane``: ``serve`` and ``served``);
    the twin of the compiled ``DLedgerLane`` (``make_dledger_lane``)."""

    def __init__(self, support: SendLaneSupport, frames: Any) -> None:
        self.support = support
        self.frames = frames  # the send lane's frame reader
        # a read read, stored, counted and answered (``store_read``'s twin)
        self._store = functools.partial(_store_read, frames)
        self._counts: dict[tuple[int, bool], int] = {}
        # what each read is stored and answered with, kept until its source
        # changes (``_renew``): the cluster name's bytes, the message ids'
        # host part, the store host's sysFlag bit; and the born-host bit of
        # the last connection's born field
        self._made_of: tuple[Any, Any, Any] = (None, None, None)
        self._cluster = self._host_hex = b""
        self._store_bits = 0
        self._born: bytes | None = None
        self._born_bits = 0

    def served(self) -> list[tuple[int, bool, int]]:
        """(request code, oneway, count) of what the last ``serve`` took."""
        return [(code, oneway, n) for (code, oneway), n in sorted(self._counts.items())]

    def serve(self, channel: Any, buf, pos: int, end: int) -> tuple[int, bytes | None]:
        """Store the plain sends at the start of ``buf[pos:end]``; returns the
        position of the first frame left to the general path.  The answers
        go out when the quorum wait ends, so none is returned here."""
        self._counts = counts = {}
        support = self.support
        cl = support.cl
        born = channel.attrs.get("born_field")  # the stored born-host field, once per connection
        if born is None:
            born = support.born_field(channel)
        if born is not self._born:
            self._born = born
            self._born_bits = mc.BORNHOST_V6_FLAG if len(born) == 20 else 0
        made = self._made_of
        if support.processor.cluster is not made[0] or cl.store_host_field is not made[1] \
                or cl.msg_id_prefix is not made[2]:
            self._renew(support.processor.cluster, cl.store_host_field, cl.msg_id_prefix)
        tails = support.tails()
        sizes: dict[str, list[int]] = {}  # topic -> [messages, bytes]
        n, after, first, last, answers, answered = self._store(
            self._cluster, buf, pos, end, cl, self._born_bits | self._store_bits, born,
            time.time_ns() // 1_000_000, self._host_hex, tails, sizes, counts)
        if not n:
            return pos, None
        stats = support.store.stats
        for topic, (nums, size) in sizes.items():
            stats.on_puts(topic, nums, size, nums)
            support.served += nums
        # the read's answers held on the quorum wait of its last entry (which
        # covers the earlier ones)
        cl.quorum_wait(first, last, functools.partial(_answer, support.processor, channel,
                                                      answers, answered)
                       if answers else _no_answer)
        return after, None

    def _renew(self, cluster: str, store_host: bytes, id_prefix: str) -> None:
        """What the reads are stored and answered with, made again for the
        broker's cluster name ``cluster``, the commit log's stored store-host
        field ``store_host`` and message-id prefix ``id_prefix`` (each
        compared by identity every read: a new value is a new object)."""
        self._made_of = (cluster, store_host, id_prefix)
        self._cluster = cluster.encode()
        self._store_bits = mc.STOREHOSTADDRESS_V6_FLAG if len(store_host) == 20 else 0
        self._host_hex = id_prefix.encode()


# an answered send's (opaque, serialize type) as ``store_read`` packs them
ANSWERED = struct.Struct("<qB")


def _tally(sends: list[tuple], stored: list[tuple], sizes: dict[str, list[int]],
           counts: dict[tuple[int, bool], int]) -> None:
    """Count the stored sends (``stored``: what ``append_plain`` returned
    for the leading ``sends``): [messages, bytes] per topic in ``sizes``
    (the put statistics), sends per (request code, oneway) in ``counts``.
    (The twin's part of the compiled ``store_read``, whose ``tally_puts``
    counts them.)"""
    for send, put in zip(sends, stored, strict=False):
        t = sizes.get(send[5])
        if t is None:
            sizes[send[5]] = [1, put[3]]
        else:
            t[0] += 1
            t[1] += put[3]
        key = (send[1], bool(send[2] & RPC_ONEWAY))
        counts[key] = counts.get(key, 0) + 1


def _store_read(frames: Any, cluster: bytes, buf, pos: int, end: int, cl: Any, host_bits: int,
                born: bytes, now: int, host_hex: bytes, tails: tuple[bytes, bytes],
                sizes: dict[str, list[int]], counts: dict[tuple[int, bool], int]
                ) -> tuple[int, int, Any, Any, bytes, bytes]:
    """The leading plain sends of ``buf[pos:end]`` read by the lane
    ``frames`` (``plain_sends``) and, while it ``leads``, stored by the
    commit log ``cl`` (``append_plain``), counted (``sizes``, ``counts``)
    and answered (the SUCCESS frames, joined): (sends stored, the end of the
    last one's frame, the first and last entry, the answers, the answered
    sends' (opaque, serialize type) packed as ``ANSWERED``).  The twin of
    the compiled ``SendLane.store_read``."""
    sends = frames.plain_sends(cluster, buf, pos, end)
    if not sends or not frames.leads():
        return 0, pos, None, None, b"", b""
    stored = cl.append_plain(sends, host_bits, born, now)
    if not stored:
        return 0, pos, None, None, b"", b""
    _tally(sends, stored, sizes, counts)
    done = sends[:len(stored)]
    return (len(stored), done[-1][0], stored[0][0], stored[-1][0],
            plain_answers(host_hex, tails, sends, stored),
            b"".join(ANSWERED.pack(s[3], s[4]) for s in done if not s[2] & RPC_ONEWAY))


_c = compiled("send_lane")


def _no_answer(_status: PutMessageStatus) -> None:
    """The quorum wait of a read of oneway sends: nothing to answer."""


def _answer(processor: Any, channel: Any, frames: bytes, answered: bytes,
            status: PutMessageStatus) -> None:
    """What a read's quorum wait calls when it ends (bound to the read by
    ``functools.partial``; the twin of the compiled ``HeldAnswers``): the
    read's answers as built when a quorum holds the entries, queued to go
    out with the other reads' answers at the end of the loop's turn; else
    ``_answer_failed``'s."""
    if status is PutMessageStatus.PUT_OK:
        channel.write_bytes(frames, True)
        return
    _answer_failed(processor, channel, answered, status)


def _answer_failed(processor: Any, channel: Any, answered: bytes,
                   status: PutMessageStatus) -> None:
    """The general path's answer to a failed put, per answered send of a
    read whose quorum wait ended in ``status`` (``answered``: their
    (opaque, serialize type) packed as ``ANSWERED``); shared by the twin and
    the compiled lane."""
    code, remark = processor._failure(status)
    out = []
    for opaque, stype in ANSWERED.iter_unpack(answered):
        response = processor.response(code, remark)
        response.opaque = opaque
        response.flag |= RPC_RESPONSE
        response.serialize_type = stype
        out.append(response.encode())
    channel.write_bytes(b"".join(out))
