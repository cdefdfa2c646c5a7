"""The send lane: plain single sends served straight from a connection's
receive buffer, a whole read at a time.

A producer's connection carries runs of SEND_MESSAGE(_V2) requests.  The
general path turns each into a ``RemotingCommand``, runs it through the
dispatcher, the send queue and the processor, stores it with
``CommitLog.put_message`` and encodes a response command: a dozen Python calls and as many objects
per message.  The lane takes the leading frames of a read that are plain
sends -- a JSON or ROCKETMQ (binary) header, an existing ordinary topic,
a valid queue, no transaction and no delay, ASCII properties, room in the
current commit-log, consume-queue and index files -- and for each writes the record, its
consume-queue entry and index keys and the response frame, all in one append
session of the store (``CommitLog.open_run``: the put locks, the write
position, the queue tails, the checkpoint and the dispatch position are the
session's).  Positions, queue offsets, statistics and the arrival listeners
are brought up to date once per read (``SendLaneSupport.end``),
per queue: a held pull on a queue gets every message's notice, as from the
general path.  The first frame the lane does not take ends its turn; that
frame and everything after it go the general way, which stores and answers
any send exactly as the lane would (same record bytes, same response
bytes, same statistics), so declining is always safe.  Every answer is
written in the serialization its request came in, as the general path
answers (``serializeTypeCurrentRPC``).

Under SYNC_FLUSH the answers of senders that wait for the flush are held in
one group-commit waiter per read and written when the flush covers the last
of them (FLUSH_DISK_TIMEOUT after syncFlushTimeout, as the general path).

``SendLane`` here is the pure-Python twin of ``rmq._fast.send_lane.SendLane``
(same constructor, same ``serve``); both share ``SendLaneSupport`` for what
is done once per read.  ``make_send_lane`` picks the compiled one when built.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson

from rmq._fast import compiled
from rmq.broker.processor.send_support import V1_KEYS, V2_KEYS, _parse_single, channel_host
from rmq.common import message as mc
from rmq.common import topics as T
from rmq.common.codes import RequestCode, ResponseCode
from rmq.common.topic_config import MULTI_TAG
from rmq.dledger.member_state import Role
from rmq.remoting import codec
from rmq.remoting.command import RPC_ONEWAY, RPC_RESPONSE, RemotingCommand
from rmq.remoting.exceptions import RemotingCommandError
from rmq.store import BrokerRole, FlushDiskType
from rmq.store.append_run import AppendRun, RunQueue
from rmq.store.mapped_file import ZERO_AHEAD
from rmq.store.message import wait_store_msg_ok
from rmq.store.message_codec import (
    fast_send_properties,
    message_properties_to_string,
    string_to_message_properties,
)
from rmq.store.results import PutMessageStatus
from rmq.store.running_flags import NOT_WRITEABLE_MASK
from rmq.store.single_put import wait_flush

log = logging.getLogger("rmq.broker")

SEND_V2 = int(RequestCode.SEND_MESSAGE_V2)
SEND_V1 = int(RequestCode.SEND_MESSAGE)
SEND_BATCH = int(RequestCode.SEND_BATCH_MESSAGE)
CQ_UNIT = 20
MAX_SEGS = 64  # more property segments than this go the general way
_MAX_TOPIC = 127
_MAX_PROPS = 32767


class LaneContext:
    """What one read's sends are stored and answered with
    (``SendLaneSupport.begin``): the store's open append session (``run``)
    and the broker's part -- the sender's born-host field, the cluster name,
    the message-id prefix, the response tails by serialization (JSON,
    ROCKETMQ), whether the broker flushes synchronously, and for the queues
    the store's consume-queue and queue-offset tables, the held pulls'
    table (None without long polling) and whether the size histogram is
    kept.  A lane serves one read at a time, so one context is renewed for
    each read (``renew``) rather than made: a read of one send pays for no
    new object."""

    __slots__ = ("run", "born", "cluster", "cluster_name", "host_hex", "tail", "rocketmq_tail",
                 "sync", "cq_table", "offsets", "held_pulls", "histograms", "_hex_of")

    def __init__(self) -> None:
        self.run: AppendRun | None = None
        self.born = self.cluster = self.host_hex = self.tail = self.rocketmq_tail = b""
        self.sync = self.histograms = False
        self.cq_table: dict = {}
        self.offsets: dict = {}
        self.held_pulls: dict | None = None
        self.cluster_name = ""  # the cluster name that ``cluster`` encodes
        self._hex_of = ""  # the run's message-id prefix that host_hex encodes

    def renew(self, run: AppendRun, born: bytes, cluster: str, tail: bytes,
              rocketmq_tail: bytes, sync: bool, cq_table: dict, offsets: dict,
              held_pulls: dict | None, histograms: bool) -> LaneContext:
        """The context of the next read (its append session just opened)."""
        self.run = run
        self.born = born
        if cluster is not self.cluster_name:  # encoded again only when it changes
            self.cluster_name = cluster
            self.cluster = cluster.encode()
        if run.host_hex is not self._hex_of:
            self._hex_of = run.host_hex
            self.host_hex = run.host_hex.encode()
        self.tail = tail
        self.rocketmq_tail = rocketmq_tail
        self.sync = sync
        self.cq_table = cq_table
        self.offsets = offsets
        self.held_pulls = held_pulls
        self.histograms = histograms
        return self


class SendLaneSupport:
    """What both lanes do once per read: decide whether the lane may run and
    with what (``begin``), look up a topic and a queue the first time a read
    uses them, and publish what the read stored (``end``)."""

    # the fields the compiled lane reads or sets every read, at their slots
    # (the rest stay in the instance dict)
    __slots__ = ("served", "_tails_of", "_tail_pair", "__dict__")

    def __init__(self, processor: Any) -> None:
        self.processor = processor
        self.c = processor.c
        self.bc = processor.bc
        self.store = processor.store
        self.cl = self.store.commit_log
        self.cfg = self.store.config
        self.topics = processor.topics
        self.send_queue = self.c.request_queues.get("send")
        # long polling's held pulls (the pull processor is made before the lane)
        self.hold = getattr(self.c, "pull_request_hold_service", None)
        self._tails: dict[tuple[str, bool], bytes] = {}
        self._batch_props: dict[str, tuple[bytes, bool]] = {}
        self.served = 0  # messages the lanes stored (GET_BROKER_RUNTIME_INFO rmqSendLaneServed)
        self._ctx = LaneContext()  # renewed for each read (begin)
        # the response tails (tail, rocketmq_tail) and the region and trace
        # switch they were made for: begin makes them again only when those change
        self._tails_of: tuple[Any, Any] = (None, None)
        self._tail_pair = (b"", b"")
        # what the compiled lane's own begin and end compare with (rmq._fast
        # sits below the store's layer): the roles and flush kinds it serves
        # and the running flags that make the store unwriteable
        self.async_master = BrokerRole.ASYNC_MASTER
        self.sync_master = BrokerRole.SYNC_MASTER  # (a DLedger leader's role: ``leads``)
        self.leader_role = Role.LEADER  # (its group member's role: ``leads``)
        self.async_flush = FlushDiskType.ASYNC_FLUSH
        self.sync_flush = FlushDiskType.SYNC_FLUSH
        self.not_writeable = NOT_WRITEABLE_MASK
        self.zero_ahead = ZERO_AHEAD  # CommitLog.zero_ahead has nothing to do past this
        # the broker's put counts: when the store's runs listener is the
        # broker's own (``runs_listener``), a read's runs that list no puts
        # are counted by the lane -- the compiled one in C counters on its
        # queues, the twin in ``_counts`` -- added to ``put_total`` at once and
        # handed to the broker's statistics when they fold (``take_puts``);
        # the listener is then told with ``counted_runs_listener``
        self.runs_listener = getattr(self.c, "runs_listener", None)
        self.counted_runs_listener = getattr(self.c, "counted_runs_listener", None)
        self._counts: dict[tuple[str, int], list[int]] = {}  # -> [messages, bytes, puts]
        self.lanes: list[Any] = []  # the compiled lanes made on this support (they count)
        if self.counted_runs_listener is not None:
            self.c.stats.add_put_source(self.take_puts)

    # ---- per read ------------------------------------------------------------------
    def begin(self, channel: Any) -> LaneContext | None:
        """Open the store's append session and return the read's context, or
        None (nothing taken) when sends must go the general way now."""
        store, cl, cfg = self.store, self.cl, self.cfg
        if not self.accepting():
            return None
        if cfg.brokerRole is not BrokerRole.ASYNC_MASTER or cl.multi.enabled:
            # a slave refuses sends, a SYNC_MASTER (a DLedger leader too) waits
            # for its slaves: the general path answers
            return None
        cluster = self.processor.cluster
        if cluster is not self._ctx.cluster_name and not cluster.isascii():
            return None
        run = cl.open_run(cfg.messageIndexEnable)
        if run is None:
            return None
        hold = self.hold
        born = channel.attrs.get("born_field")  # the stored born-host field, once per connection
        if born is None:
            born = self.born_field(channel)
        tails = self.tails()
        return self._ctx.renew(run, born, cluster, tails[0], tails[1],
                               cfg.flushDiskType is FlushDiskType.SYNC_FLUSH,
                               store.consume_queue_table, cl.topic_queue_table,
                               hold.table if hold is not None else None,
                               self.c.stats.size_histograms is not None)

    def born_field(self, channel: Any) -> bytes:
        """The stored born-host field of a connection's sends, made once per
        connection (kept in its attributes)."""
        born = channel.attrs["born_field"] = self.cl.host_field(channel_host(channel))
        return born

    def tails(self) -> tuple[bytes, bytes]:
        """The response tails (JSON, ROCKETMQ) for the broker's regionId and
        traceOn now: the kept pair, made again (``new_tails``) once either
        changed (compared by identity: a new value is a new object)."""
        bc = self.bc
        made_for = self._tails_of
        if bc.regionId is not made_for[0] or bc.traceOn is not made_for[1]:
            return self.new_tails()
        return self._tail_pair

    def new_tails(self) -> tuple[bytes, bytes]:
        """The response tails (JSON, ROCKETMQ) for the broker's regionId and
        traceOn now, kept until those change."""
        bc = self.bc
        self._tails_of = (bc.regionId, bc.traceOn)
        self._tail_pair = (self.tail(), self.rocketmq_tail())
        return self._tail_pair

    def accepting(self) -> bool:
        """The broker takes a send now (as the general path would store it,
        not refuse it): the send pool would run it at once, the page cache
        is not busy, start-up's send delay is over and the broker is
        writable.  Asked by both lanes once per read."""
        queue = self.send_queue
        if queue is not None and not queue.runs_at_once():
            return False
        bc = self.bc
        return not (self.store.is_os_page_cache_busy() or bc.startAcceptSendRequestTimeStamp
                    or not bc.brokerPermission & mc.PERM_WRITE)

    def failed(self, exc: BaseException) -> None:
        """The lane stopped on an unexpected error: what it stored stands, the
        frame it was on goes the general way (which reports the error)."""
        log.error("send lane stopped, the general path takes over: %r", exc)

    def tail(self) -> bytes:
        """The end of every response header after the queue offset's digits
        (MSG_REGION, TRACE_ON and the fixed keys), up to the opaque's value."""
        key = (self.bc.regionId, self.bc.traceOn)
        tail = self._tails.get(key)
        if tail is None:
            tail = (b'","MSG_REGION":' + orjson.dumps(key[0]) + b',"TRACE_ON":"'
                    + (b"true" if key[1] else b"false") + b'"},"flag":1,"language":"JAVA",'
                    b'"opaque":')
            if len(self._tails) > 16:
                self._tails.clear()
            self._tails[key] = tail
        return tail

    def rocketmq_tail(self) -> bytes:
        """The last extFields entries of every ROCKETMQ-serialized response
        header (MSG_REGION, TRACE_ON), as the general encoder writes them."""
        key = (self.bc.regionId, self.bc.traceOn, codec.ROCKETMQ)
        tail = self._tails.get(key)
        if tail is None:
            tail = _rocketmq_entries({mc.PROPERTY_MSG_REGION: key[0],
                                      mc.PROPERTY_TRACE_SWITCH: "true" if key[1] else "false"})
            if len(self._tails) > 16:
                self._tails.clear()
            self._tails[key] = tail
        return tail

    def batch_properties(self, text: str) -> tuple[bytes, bool]:
        """A batch's property string as stored (the request's properties plus
        CLUSTER, HashMap order, WAIT kept, as ``send_batch`` stores it) and
        whether its sender waits for the flush; cached per request string
        (senders repeat the same few)."""
        out = self._batch_props.get(text)
        if out is None:
            props = string_to_message_properties(text or None)
            props[mc.PROPERTY_CLUSTER] = self.processor.cluster
            out = (message_properties_to_string(props).encode("utf-8"),
                   wait_store_msg_ok(props.get(mc.PROPERTY_WAIT_STORE_MSG_OK)))
            if len(self._batch_props) > 1000:
                self._batch_props.clear()
            self._batch_props[text] = out
        return out

    def topic(self, topic: str) -> tuple[int, int, bool] | None:
        """(writeQueueNums, readQueueNums, MULTI_TAG filter) of an existing
        ordinary topic the lane may store into, else None.  (The twin's: the
        compiled lane makes these checks itself, ``topic_of``.)"""
        if topic.startswith(T.RETRY_GROUP_TOPIC_PREFIX) or topic in T.NOT_ALLOWED_SEND_TOPICS:
            return None
        tc = self.topics.table.get(topic)
        if tc is None:
            return None
        return tc.writeQueueNums, tc.readQueueNums, tc.topicFilterType == MULTI_TAG

    def queue(self, ctx: LaneContext, topic: str, queue_id: int) -> RunQueue | None:
        """The tail of a consume queue the read stores into, or None when the
        store's append session does not take it (the general path handles
        it); its puts are listed one by one when a pull is held on it or the
        size histogram is kept."""
        hold = ctx.held_pulls
        exact = ctx.histograms or (bool(hold) and (topic, queue_id) in hold)
        return ctx.run.queue(topic, queue_id, exact)

    def end(self, ctx: LaneContext, wrote: int, store_ts: int, runs: list[tuple],
            channel: Any, waiting: bytes | None, wait_end: int) -> None:
        """Close the read's append session (the lane has published its
        queues' tails and offsets, ``runs``): positions, checkpoint and
        dispatch position, then the locks; then statistics, arrival notices,
        the flush wake-up and the flush waiter.  A run is a
        ``RunQueue.summary``."""
        if not ctx.run.close(wrote, store_ts):
            return
        self.served += put_counts(self.store.stats, runs)
        runs_listener = self.store.message_runs_listener
        if runs_listener is not None:
            if runs_listener is self.runs_listener:
                self.count_puts(runs)
                runs_listener = self.counted_runs_listener
            try:
                runs_listener(runs)
            except Exception:  # noqa: BLE001 - a listener bug must not fail stored sends
                self.listener_failed()
        else:
            self.notify_each(runs)
        cfg, store = self.cfg, self.store
        if cfg.flushDiskType is FlushDiskType.ASYNC_FLUSH:
            if not cfg.flushCommitLogTimed:
                store.flush_service.wake_for(ctx.run.file_from + wrote, store_ts)
        else:
            self.wait_flush(channel, waiting, wait_end)

    def count_puts(self, runs: list[tuple]) -> None:
        """The broker's put counts of the runs that list no puts (those that
        do are counted per put by the listener): the total at once, the
        rest kept until the statistics fold (the compiled lane's counters
        on its queues)."""
        counts = self._counts
        added = 0
        for topic, queue_id, _qoff, _tags, _ts, nums, size, events, each in runs:
            if each is not None:
                continue
            added += nums
            row = counts.get((topic, queue_id))
            if row is None:
                counts[(topic, queue_id)] = [nums, size, events]
            else:
                row[0] += nums
                row[1] += size
                row[2] += events
        if added:
            self.c.stats.put_total += added

    def take_puts(self, stats: Any) -> None:
        """Hand the counts kept since the last fold to the broker's statistics
        (``BrokerStats.add_put_source``): the twin's, then each compiled
        lane's."""
        counts, self._counts = self._counts, {}
        for (topic, queue_id), (nums, size, events) in counts.items():
            stats.add_pending_put(topic, queue_id, nums, size, events)
        for lane in self.lanes:
            lane.take_puts(stats)

    def wait_flush(self, channel: Any, waiting: bytes | None, wait_end: int) -> None:
        """Under SYNC_FLUSH: the read's group-commit waiter (its held answers
        ``waiting`` written once the flush covers ``wait_end``)."""
        wait_flush(self.store, wait_end, waiting is not None, (channel, waiting), _flushed)

    @staticmethod
    def listener_failed() -> None:
        """An arrival listener raised (called in its ``except``): logged; the
        stored sends stand."""
        log.exception("message arriving listener failed")

    def notify_each(self, runs: list[tuple]) -> None:
        """The arrival notices of the read's messages, per queue, to a store
        without a runs listener."""
        listener = self.store.message_arriving_listener
        if listener is None:
            return
        for topic, queue_id, qoff, tags, store_ts, nums, size, events, each in runs:
            try:
                if each is None:
                    listener(topic, queue_id, qoff, tags, store_ts, nums, size, events)
                else:
                    for next_offset, last_tags, last_ts, put_nums, put_size in each:
                        listener(topic, queue_id, next_offset, last_tags, last_ts, put_nums,
                                 put_size)
            except Exception:  # noqa: BLE001 - a listener bug must not fail stored sends
                self.listener_failed()


def _rocketmq_entries(ext: dict) -> bytes:
    """The extFields entries of a ROCKETMQ header holding ``ext`` (after the
    17 fixed bytes and the extFields length)."""
    head = codec.encode(0, 0, 0, 0, 0, None, ext, codec.ROCKETMQ, 0)
    return bytes(head[8 + 21:])


def _flushed(token: tuple, status: PutMessageStatus) -> None:
    """The group commit answered a read's waiting senders: their responses as
    built, or each with FLUSH_DISK_TIMEOUT."""
    channel, frames = token
    if status is not PutMessageStatus.PUT_OK:
        frames = _with_code(frames, ResponseCode.FLUSH_DISK_TIMEOUT)
    if channel.is_active():
        channel.write_bytes(frames)


def _with_code(frames: bytes, code: int) -> bytes:
    """The lane's response frames again with another response code."""
    out = []
    pos = 0
    view = memoryview(frames)
    while pos < len(frames):
        length = int.from_bytes(frames[pos:pos + 4], "big")
        cmd = RemotingCommand.decode(view[pos + 4:pos + 4 + length])
        cmd.code = code
        out.append(cmd.encode())
        pos += 4 + length
    return b"".join(out)


def _put_counts(stats: Any, runs: list[tuple]) -> int:
    """The store's statistics of a read's runs: ``stats.on_puts`` once per
    topic, in the order the topics were met, with its messages, bytes and
    puts summed; the read's messages (twin of the compiled
    ``rmq._fast.lane_runs.put_counts``)."""
    totals: dict[str, list[int]] = {}
    for run in runs:
        t = totals.get(run[0])
        if t is None:
            totals[run[0]] = [run[5], run[6], run[7]]
        else:
            t[0] += run[5]
            t[1] += run[6]
            t[2] += run[7]
    served = 0
    for topic, (nums, size, events) in totals.items():
        stats.on_puts(topic, nums, size, events)
        served += nums
    return served


_lane_runs = compiled("lane_runs")
put_counts = _put_counts if _lane_runs is None else _lane_runs.put_counts


# ---- the twin ----------------------------------------------------------------------------
def _props(text: str, cluster: str) -> tuple | None:
    """``fast_send_properties`` for the properties the lane takes: ASCII keys
    (values may be any text that encodes to UTF-8), at most MAX_SEGS
    segments, no CLUSTER, no key twice; None otherwise."""
    if not text.isascii() and not _utf8_text(text):
        return None
    keys = []
    for seg in text.split("\x02"):
        idx = seg.find("\x01")
        if 0 < idx < len(seg) - 1:
            keys.append(seg[:idx])
    if len(keys) > MAX_SEGS or "CLUSTER" in keys or len(set(keys)) != len(keys) or \
            not all(k.isascii() for k in keys):
        return None
    return fast_send_properties(text, cluster)


def _utf8_text(text: str) -> bool:
    """Text a Java client could have sent: it encodes to UTF-8 (no lone
    surrogates)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def index_key_count(keys: str | None, uniq: str | None) -> int:
    """Index entries a message takes: UNIQ_KEY and every non-empty KEYS token."""
    return (1 if uniq else 0) + (sum(1 for t in keys.split(" ") if t) if keys else 0)


def send_head(buf, pos: int, end: int, max_frame: int) -> tuple | None:
    """The general reader's view of a send request (twin of the compiled
    ``send_head``, which may leave more to the general path but must read
    the same where it does not): (code, flag, opaque, the fourteen header
    fields of its spelling, body length, end of the frame), or None."""
    frame = SendLane(None, max_frame).read_frame(buf, pos, end)
    if frame is None:
        return None
    code, flag, opaque, ext, body, frame_end, _stype = frame
    keys = V1_KEYS if code == SEND_V1 else V2_KEYS
    return code, flag, opaque, tuple((ext or {}).get(k) for k in keys), len(body), frame_end


class SendLane:
    """Pure-Python twin of ``rmq._fast.send_lane.SendLane``."""

    def __init__(self, support: SendLaneSupport, max_frame: int) -> None:
        self.support = support
        self.max_frame = max_frame
        self._counts: dict[tuple[int, bool], int] = {}

    def served(self) -> list[tuple[int, bool, int]]:
        """(request code, oneway, count) of what the last ``serve`` took."""
        return [(code, oneway, n) for (code, oneway), n in sorted(self._counts.items())]

    def leads(self) -> bool:
        """For a DLedger leader's lane (``plain_sends``, then the group's
        append): what ``begin`` and the store's status check ask, for a
        leader -- a send taken now would be stored, not refused.  The
        compiled lane reads the same fields at their slots."""
        s = self.support
        cl = s.cl
        if not s.accepting() or s.cfg.brokerRole is not s.sync_master or \
                not s.store.accepts_puts or cl.begin_time_in_lock:
            return False
        ms = cl.server.member_state
        return ms.is_leader() and ms.transferee is None and s.processor.cluster.isascii()

    def read_frame(self, buf, pos: int, end: int) -> tuple | None:
        """(code, flag, opaque, extFields, body, frame end, serialize type) of
        the complete send request (JSON or ROCKETMQ header) at ``pos``, or None."""
        if end - pos < 4:
            return None
        length = int.from_bytes(buf[pos:pos + 4], "big", signed=True)
        if length < 4 or length > self.max_frame or end - pos - 4 < length:
            return None
        frame = buf[pos + 4:pos + 4 + length]
        if frame[0] > codec.ROCKETMQ:
            return None  # an unknown serialization: the general path refuses it
        try:
            code, _lang, _ver, opaque, flag, _remark, ext, stype, off = codec.decode(frame)
        except RemotingCommandError:
            return None
        if (code != SEND_V2 and code != SEND_V1 and code != SEND_BATCH) or flag & RPC_RESPONSE:
            return None
        return code, flag, opaque, ext, bytes(frame[off:]), pos + 4 + length, stype

    def serve(self, channel: Any, buf, pos: int, end: int) -> tuple[int, bytes | None]:
        """Serve the plain sends at the start of ``buf[pos:end]``; returns the
        position of the first frame left to the general path and the
        response frames to write now (None when there are none)."""
        self._counts = {}
        frame = self.read_frame(buf, pos, end)
        if frame is None:
            return pos, None
        ctx = self.support.begin(channel)
        if ctx is None:
            return pos, None
        read = _Read(ctx)
        run = ctx.run
        try:
            while frame is not None:
                one = self._one_batch if frame[0] == SEND_BATCH else self._one
                if not one(read, frame):
                    break
                key = (frame[0], bool(frame[1] & RPC_ONEWAY))
                self._counts[key] = self._counts.get(key, 0) + 1
                pos = frame[5]
                frame = self.read_frame(buf, pos, end)
        finally:
            runs: list[tuple] = []
            try:
                for q in read.queues.values():
                    if q.nums:
                        runs.append(run.publish_queue(q))
            finally:
                self.support.end(ctx, run.wrote, run.store_ts, runs, channel,
                                 b"".join(read.held) if read.held else None, read.wait_end)
        return pos, b"".join(read.out) if read.out else None

    def _target(self, read: _Read, frame: tuple) -> tuple | None:
        """The header's fields, the topic's (writeQueueNums, readQueueNums,
        MULTI_TAG), or None (general path)."""
        f = _parse_single(frame[3], V1_KEYS if frame[0] == SEND_V1 else V2_KEYS)
        if f is None:
            return None
        topic, queue_id, sys_flag = f[0], f[1], f[2]
        if queue_id < 0 or sys_flag & mc.TRANSACTION_ROLLBACK_TYPE or not topic.isascii() \
                or not 0 < len(topic) <= _MAX_TOPIC:
            return None
        if topic not in read.topics:
            read.topics[topic] = self.support.topic(topic)
        tc = read.topics[topic]
        if tc is None or (queue_id >= tc[0] and queue_id >= tc[1]):
            return None
        return f, tc

    def _queue(self, read: _Read, topic: str, queue_id: int) -> RunQueue | None:
        q = read.queues.get((topic, queue_id))
        if q is None:
            q = self.support.queue(read.ctx, topic, queue_id)
            if q is not None:
                read.queues[(topic, queue_id)] = q
        return q

    def plain_send(self, read: Any, frame: tuple) -> tuple | None:
        """A single send the lane may store: (the header's fields, the
        topic's, ``fast_send_properties`` of its properties), or None (the
        general path).  ``read``: a read with ``topics`` and ``cluster``."""
        target = self._target(read, frame)
        if target is None:
            return None
        fields, tc = target
        props = _props(fields[5] or "", read.cluster)
        if props is None or props[3] or len(props[0]) > _MAX_PROPS:
            return None  # (props[3]: DELAY or TRAN_MSG sent)
        return fields, tc, props

    def plain_sends(self, cluster: bytes, buf, pos: int, end: int) -> list[tuple]:
        """The plain single sends at the start of ``buf[pos:end]`` (a DLedger
        leader's lane), each read as ``serve`` reads it, not stored: a list of
        readings (frame end, code, flag, opaque, serialize type, topic, queue
        id, sysFlag without the host bits (MULTI_TAGS set for such a topic),
        born timestamp, flag, reconsume times, body, stored properties, index
        keys) up to the first frame left to the general path (a batch too).
        Each topic's settings are asked for once in the call."""
        read = _PlainRead(cluster.decode())
        sends = []
        while True:
            send = self._plain_one(read, buf, pos, end)
            if send is None:
                return sends
            sends.append(send)
            pos = send[0]

    def _plain_one(self, read: _PlainRead, buf, pos: int, end: int) -> tuple | None:
        """``plain_sends``' reading of the frame at ``buf[pos:end]``, None
        when the lane leaves it to the general path."""
        frame = self.read_frame(buf, pos, end)
        if frame is None or frame[0] == SEND_BATCH:
            return None
        plain = self.plain_send(read, frame)
        if plain is None:
            return None
        (topic, queue_id, sys_flag, born_ts, mflag, _text, reconsume), tc, props = plain
        stored, _tags, _wait, _special, keys, uniq = props
        sys_flag &= ~0x30
        if tc[2]:
            sys_flag |= mc.MULTI_TAGS_FLAG
        return (frame[5], frame[0], frame[1], frame[2], frame[6], topic, queue_id, sys_flag,
                born_ts, mflag, reconsume, frame[4], stored.encode(), index_key_count(keys, uniq))

    def _one(self, read: _Read, frame: tuple) -> bool:
        """Store and answer one single send; False (nothing done) to leave it
        to the general path."""
        plain = self.plain_send(read, frame)
        if plain is None:
            return False
        (topic, queue_id, sys_flag, born_ts, mflag, _text, reconsume), tc, props = plain
        stored, tags, wait, _special, keys, uniq = props
        q = self._queue(read, topic, queue_id)
        if q is None:
            return False
        sys_flag = read.sys_flag(sys_flag, tc)
        phy = read.run.phy
        if read.run.append_one(q, queue_id, mflag, sys_flag, born_ts, read.born, reconsume,
                               frame[4], topic, topic.encode(), stored, tags, keys, uniq,
                               index_key_count(keys, uniq)) is None:
            return False
        read.answer(frame, wait, response_frame(read.host_hex, phy, queue_id, q.qoff - 1, frame[2],
                                           read.tails[frame[6]], frame[6]))
        return True

    def _one_batch(self, read: _Read, frame: tuple) -> bool:
        """Store and answer one SEND_BATCH_MESSAGE; False (nothing done) to
        leave it to the general path."""
        target = self._target(read, frame)
        if target is None:
            return False
        (topic, queue_id, sys_flag, born_ts, _mflag, text, reconsume), tc = target
        text = text or ""
        if not text.isascii():
            return False
        batch_props, wait = self.support.batch_properties(text)
        q = self._queue(read, topic, queue_id)
        if q is None:
            return False
        sys_flag = read.sys_flag(sys_flag, tc)
        r = read.run.append_batch(q, frame[4], queue_id, sys_flag, born_ts, read.born, reconsume,
                                  topic.encode(), batch_props)
        if r is None:
            return False
        count, ids = r
        read.answer(frame, wait, _response_ids(ids.encode(), queue_id, q.qoff - count, frame[2],
                                               read.tails[frame[6]], frame[6]))
        return True


class _PlainRead:
    """A ``plain_sends`` call's read: the topics' settings asked for in it."""

    __slots__ = ("cluster", "topics")

    def __init__(self, cluster: str) -> None:
        self.cluster = cluster
        self.topics: dict[str, tuple | None] = {}


class _Read:
    """One read's context (``SendLaneSupport.begin``) and what it answers."""

    def __init__(self, ctx: LaneContext) -> None:
        self.ctx = ctx
        self.run = ctx.run
        self.born = ctx.born
        self.host_hex = ctx.host_hex
        self.sync = ctx.sync
        self.cluster = ctx.cluster.decode()
        self.tails = (ctx.tail, ctx.rocketmq_tail)  # by serialize type
        self.queues: dict[tuple[str, int], RunQueue] = {}
        self.topics: dict[str, tuple | None] = {}
        self.out: list[bytes] = []
        self.held: list[bytes] = []
        self.wait_end = 0

    def sys_flag(self, sys_flag: int, tc: tuple) -> int:
        """sysFlag as stored: the hosts' kind bits, MULTI_TAGS for such a topic."""
        sys_flag = (sys_flag & ~0x30) | (0x10 if len(self.born) == 20 else 0) | \
            (0x20 if len(self.run.store_host) == 20 else 0)
        return sys_flag | mc.MULTI_TAGS_FLAG if tc[2] else sys_flag

    def answer(self, frame: tuple, wait: bool, response: bytes) -> None:
        """Queue the response (held for the flush when the sender waits for it)."""
        if frame[1] & RPC_ONEWAY:
            return
        if self.sync and wait:
            self.held.append(response)
            self.wait_end = self.run.phy
        else:
            self.out.append(response)


def response_frame(host_hex: bytes, phy: int, queue_id: int, queue_offset: int, opaque: int,
              tail: bytes, stype: int = codec.JSON) -> bytes:
    """The SUCCESS response frame of a stored send, as the general path
    encodes it (extFields msgId, queueId, queueOffset, MSG_REGION, TRACE_ON)."""
    return _response_ids(host_hex + (phy & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "big").hex().upper()
                         .encode(), queue_id, queue_offset, opaque, tail, stype)


def _response_ids(msg_ids: bytes, queue_id: int, queue_offset: int, opaque: int,
                  tail: bytes, stype: int = codec.JSON) -> bytes:
    """A SUCCESS response frame with ``msg_ids`` (one id, or a batch's
    comma-joined ids) and the first queue offset, in the request's
    serialization (``tail`` is that serialization's)."""
    if stype == codec.ROCKETMQ:
        ext = b"".join(_rocketmq_entry(k, v) for k, v in (
            (b"msgId", msg_ids), (b"queueId", b"%d" % queue_id),
            (b"queueOffset", b"%d" % queue_offset))) + tail
        head = _ROCKETMQ_FIXED + opaque.to_bytes(4, "big", signed=True) + \
            b"\x00\x00\x00\x01\x00\x00\x00\x00" + len(ext).to_bytes(4, "big") + ext
        return (len(head) + 4).to_bytes(4, "big") + (len(head) | 1 << 24).to_bytes(4, "big") + head
    head = (b'{"code":0,"extFields":{"msgId":"' + msg_ids
            + b'","queueId":"%d","queueOffset":"%d' % (queue_id, queue_offset) + tail
            + b'%d,"serializeTypeCurrentRPC":"JSON","version":409}' % opaque)
    return (len(head) + 4).to_bytes(4, "big") + len(head).to_bytes(4, "big") + head


_ROCKETMQ_FIXED = b"\x00\x00\x00\x01\x99"  # SUCCESS, JAVA, version 409 (then the opaque)


def _rocketmq_entry(key: bytes, value: bytes) -> bytes:
    return len(key).to_bytes(2, "big") + key + len(value).to_bytes(4, "big") + value


def plain_answers(host_hex: bytes, tails: tuple[bytes, bytes], sends: list[tuple],
                  stored: list[tuple]) -> bytes:
    """The SUCCESS frames of a DLedger leader's stored sends, joined:
    ``sends[i]`` is ``plain_sends``' reading, ``stored[i]`` (entry,
    physical offset, queue offset, size); oneway sends get none.  (The
    twin's part of the compiled ``store_read``, whose ``answer_puts``
    builds them.)"""
    out = []
    for send, put in zip(sends, stored, strict=False):
        flag, opaque, stype = send[2], send[3], send[4]
        if flag & RPC_ONEWAY:
            continue
        out.append(response_frame(host_hex, put[1], send[6], put[2], opaque, tails[stype], stype))
    return b"".join(out)


def make_send_lane(support: SendLaneSupport, max_frame: int) -> Any:
    """A send lane for a server reading frames up to ``max_frame`` bytes:
    compiled when built, else the twin."""
    c = compiled("send_lane")
    return (SendLane if c is None else c.SendLane)(support, max_frame)
