"""The send lane: plain single sends served straight from a connection's
receive buffer, a whole read at a time.

A producer's connection carries runs of SEND_MESSAGE(_V2) requests.  The
general path turns each into a ``RemotingCommand``, runs it through the
dispatcher, the send queue and the processor, stores it with ``put_single``
and encodes a response command: a dozen Python calls and as many objects
per message.  The lane takes the leading frames of a read that are plain
sends -- a JSON header, an existing ordinary topic, a valid queue, no
transaction and no delay, ASCII properties, room in the current commit-log,
consume-queue and index files -- and for each writes the record, its
consume-queue entry and index keys and the response frame, all under one
acquisition of the put locks.  Positions, queue offsets, statistics and the
arrival listeners are brought up to date once per read (``SendLaneSupport.end``),
per queue: a held pull on a queue gets every message's notice, as from the
general path.  The first frame the lane does not take ends its turn; that
frame and everything after it go the general way, which stores and answers
any send exactly as the lane would (same record bytes, same response
bytes, same statistics), so declining is always safe.

Under SYNC_FLUSH the answers of senders that wait for the flush are held in
one group-commit waiter per read and written when the flush covers the last
of them (FLUSH_DISK_TIMEOUT after syncFlushTimeout, as the general path).

``SendLane`` here is the pure-Python twin of ``rmq._fast.send_lane.SendLane``
(same constructor, same ``serve``); both share ``SendLaneSupport`` for what
is done once per read.  ``make_send_lane`` picks the compiled one when built.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import orjson

from rmq._fast import compiled
from rmq.broker.processor.send_support import V1_KEYS, V2_KEYS, _parse_single, channel_host
from rmq.common import message as mc
from rmq.common import topics as T
from rmq.common.codes import RequestCode, ResponseCode
from rmq.common.topic_config import MULTI_TAG
from rmq.remoting import codec
from rmq.remoting.command import RPC_ONEWAY, RPC_RESPONSE, RemotingCommand
from rmq.remoting.exceptions import RemotingCommandError
from rmq.store import BrokerRole, FlushDiskType
from rmq.store.consume_queue import _cq_write
from rmq.store.index import index_keys
from rmq.store.message_codec import _fast_send_properties, _record_size, _write_record
from rmq.store.results import PutMessageStatus, _host_hex

log = logging.getLogger("rmq.broker")

SEND_V2 = int(RequestCode.SEND_MESSAGE_V2)
SEND_V1 = int(RequestCode.SEND_MESSAGE)
CQ_UNIT = 20
MAX_SEGS = 64  # more property segments than this go the general way
_MAX_TOPIC = 127
_MAX_PROPS = 32767


class LaneQueue:
    """One consume queue a read stores into: its tail as loaded at the start
    (``cq``, ``cmf``, ``cpos``, ``qoff``, ``maxphy``) and what the read adds.
    ``each`` lists (next offset, tagsCode, store time, size) per message when
    the arrival listeners must hear of every one (a pull is held on the queue,
    or the size histogram is kept)."""

    __slots__ = ("topic", "queue_id", "cq", "cmf", "cpos", "cfrom", "csize", "qoff", "maxphy",
                 "nums", "size", "tags", "store_ts", "each")

    def __init__(self, topic: str, queue_id: int, cq: Any, cmf: Any, qoff: int,
                 exact: bool) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.cq = cq
        self.cmf = cmf
        self.cpos = cmf.wrote_position
        self.cfrom = cmf.file_from_offset
        self.csize = cq.file_size
        self.qoff = qoff
        self.maxphy = cq.max_physic_offset
        self.nums = 0
        self.size = 0
        self.tags = 0
        self.store_ts = 0
        self.each: list | None = [] if exact else None


class SendLaneSupport:
    """What both lanes do once per read: decide whether the lane may run and
    with what (``begin``), look up a topic and a queue the first time a read
    uses them, and publish what the read stored (``end``)."""

    def __init__(self, processor: Any) -> None:
        self.processor = processor
        self.c = processor.c
        self.bc = processor.bc
        self.store = processor.store
        self.cl = self.store.commit_log
        self.cfg = self.store.config
        self.topics = processor.topics
        self.send_queue = self.c.request_queues.get("send")
        self._tails: dict[tuple[str, bool], bytes] = {}
        self.served = 0  # messages the lanes stored (GET_BROKER_RUNTIME_INFO rmqSendLaneServed)

    # ---- per read ------------------------------------------------------------------
    def begin(self, channel: Any) -> tuple | None:
        """Take the put locks and return the read's context, or None (nothing
        taken) when sends must go the general way now:
        (current commit-log file, its write buffer, wrote position, file
        start offset, last position a record may end at, maxMessageSize,
        index buffer or None, index slots, index entries, born host field,
        store host field, host hex of message ids, cluster name, response
        tail, SYNC_FLUSH)."""
        store, cl, cfg, bc = self.store, self.cl, self.cfg, self.bc
        queue = self.send_queue
        if queue is not None and (len(queue) or queue.busy >= queue.workers or queue._delayed()):
            return None
        if store.is_os_page_cache_busy() or bc.startAcceptSendRequestTimeStamp or \
                not bc.brokerPermission & mc.PERM_WRITE:
            return None
        if cfg.brokerRole is not BrokerRole.ASYNC_MASTER and \
                cfg.brokerRole is not BrokerRole.SYNC_MASTER:
            return None  # a slave refuses sends: the general path answers
        if cfg.brokerRole is BrokerRole.SYNC_MASTER or cfg.enableDLegerCommitLog or \
                cl.multi.enabled or store._shutdown or cl.begin_time_in_lock or \
                store.commit_service is not None or not store.running_flags.is_writeable():
            return None
        files = cl.mfq.mapped_files
        cluster = self.processor.cluster
        if not files or not cluster.isascii():
            return None
        index = None
        slots = entries = 0
        if cfg.messageIndexEnable:
            ix = store.index_service
            f = ix.writable_file()
            if f is None or ix._unfinished is not None:
                return None
            index, slots, entries = f.mf.view, ix.max_slots, ix.max_index
        mf = files[-1]
        wrote = mf.wrote_position
        if mf.write_buffer is not None or store.reput_from_offset != mf.file_from_offset + wrote:
            return None
        cl.put_lock.acquire()
        store._reput_lock.acquire()
        return (mf, mf.target, wrote, mf.file_from_offset, cl.file_size - 8, cfg.maxMessageSize,
                index, slots, entries, cl._host_field(channel_host(channel)),
                cl.store_host_field, _host_hex(store.store_host).encode(), cluster.encode(),
                self.tail(), cfg.flushDiskType is FlushDiskType.SYNC_FLUSH)

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

    def topic(self, topic: str) -> tuple[int, int, bool] | None:
        """(writeQueueNums, readQueueNums, MULTI_TAG filter) of an existing
        ordinary topic the lane may store into, else None."""
        if topic.startswith(T.RETRY_GROUP_TOPIC_PREFIX) or topic in T.NOT_ALLOWED_SEND_TOPICS:
            return None
        tc = self.topics.table.get(topic)
        if tc is None:
            return None
        return tc.writeQueueNums, tc.readQueueNums, tc.topicFilterType == MULTI_TAG

    def queue(self, topic: str, queue_id: int) -> LaneQueue | None:
        """The tail of a consume queue the read stores into, or None when it
        does not exist yet or keeps ext units (the general path handles those)."""
        qs = self.store.consume_queue_table.get(topic)
        cq = qs.get(queue_id) if qs is not None else None
        if cq is None or cq.ext is not None or cq._tail is None:
            return None
        hold = getattr(self.c, "pull_request_hold_service", None)
        exact = self.c.stats.size_histograms is not None or (
            hold is not None and bool(hold.table) and (topic, queue_id) in hold.table)
        return LaneQueue(topic, queue_id, cq, cq._tail,
                         self.cl.topic_queue_table.get((topic, queue_id), 0), exact)

    def end(self, ctx: tuple, wrote: int, store_ts: int, queues: list[LaneQueue],
            channel: Any, waiting: bytes | None, wait_end: int) -> None:
        """Publish what the read stored and release the put locks: positions,
        queue offsets, checkpoint and dispatch position under the locks; then
        statistics, arrival notices, the flush wake-up and the flush waiter."""
        store = self.store
        mf = ctx[0]
        stored = wrote != ctx[2]
        try:
            if stored:
                mf.wrote_position = wrote
                mf.committed_position = wrote
                mf.store_timestamp = store_ts
                table = self.cl.topic_queue_table
                for q in queues:
                    if q.nums:
                        table[(q.topic, q.queue_id)] = q.qoff
                        q.cmf.wrote_position = q.cmf.committed_position = q.cpos
                        q.cq.max_physic_offset = q.maxphy
                store.checkpoint.logics_msg_timestamp = store_ts
                store.reput_from_offset = ctx[3] + wrote
        finally:
            store._reput_lock.release()
            self.cl.put_lock.release()
        if not stored:
            return
        self.served += sum(q.nums for q in queues)
        self._notify(queues)
        cfg = self.cfg
        if cfg.flushDiskType is FlushDiskType.ASYNC_FLUSH:
            if not cfg.flushCommitLogTimed:
                store.flush_service.wakeup()
        elif waiting is None:
            store.flush_service.wakeup()
        else:
            loop = store._loop
            if loop is None:
                loop = store._bind_loop()
            store.flush_service.wait_on_loop(loop, wait_end, cfg.syncFlushTimeout,
                                             (channel, waiting), _flushed)

    def _notify(self, queues: list[LaneQueue]) -> None:
        """Statistics and arrival notices of the read's messages, per queue."""
        stats = self.store.stats
        listener = self.store.message_arriving_listener
        for q in queues:
            if not q.nums:
                continue
            stats.on_puts(q.topic, q.nums, q.size)
            if listener is None:
                continue
            try:
                if q.each is None:
                    listener(q.topic, q.queue_id, q.qoff, q.tags, q.store_ts, q.nums, q.size,
                             q.nums)
                else:
                    for next_offset, tags, store_ts, size in q.each:
                        listener(q.topic, q.queue_id, next_offset, tags, store_ts, 1, size)
            except Exception:  # noqa: BLE001 - a listener bug must not fail stored sends
                log.exception("message arriving listener failed")


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


# ---- the twin ----------------------------------------------------------------------------
def _props(text: str, cluster: str) -> tuple | None:
    """``fast_send_properties`` for the properties the lane takes: ASCII, at
    most MAX_SEGS segments, no CLUSTER, no key twice; None otherwise."""
    if not text.isascii():
        return None
    keys = []
    for seg in text.split("\x02"):
        idx = seg.find("\x01")
        if 0 < idx < len(seg) - 1:
            keys.append(seg[:idx])
    if len(keys) > MAX_SEGS or "CLUSTER" in keys or len(set(keys)) != len(keys):
        return None
    return _fast_send_properties(text, cluster)


def _index_keys(keys: str | None, uniq: str | None) -> int:
    """Index entries a message takes: UNIQ_KEY and every non-empty KEYS token."""
    return (1 if uniq else 0) + (sum(1 for t in keys.split(" ") if t) if keys else 0)


def send_head(buf, pos: int, end: int, max_frame: int) -> tuple | None:
    """The general reader's view of a send request (twin of the compiled
    ``send_head``, which may leave more to the general path but must read
    the same where it does not): (code, flag, opaque, the fourteen header
    fields of its spelling, body length, end of the frame), or None."""
    frame = SendLane(None, max_frame)._frame(buf, pos, end)
    if frame is None:
        return None
    code, flag, opaque, ext, body, frame_end = frame
    keys = V2_KEYS if code == SEND_V2 else V1_KEYS
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

    def _frame(self, buf, pos: int, end: int) -> tuple | None:
        """(code, flag, opaque, extFields, body, frame end) of the complete
        JSON-header send request at ``pos``, or None."""
        if end - pos < 4:
            return None
        length = int.from_bytes(buf[pos:pos + 4], "big", signed=True)
        if length < 4 or length > self.max_frame or end - pos - 4 < length:
            return None
        frame = buf[pos + 4:pos + 4 + length]
        if frame[0] != 0:
            return None  # not a JSON header
        try:
            code, _lang, _ver, opaque, flag, _remark, ext, _st, off = codec.decode(frame)
        except RemotingCommandError:
            return None
        if (code != SEND_V2 and code != SEND_V1) or flag & RPC_RESPONSE:
            return None
        return code, flag, opaque, ext, bytes(frame[off:]), pos + 4 + length

    def serve(self, channel: Any, buf, pos: int, end: int) -> tuple[int, bytes | None]:
        """Serve the plain sends at the start of ``buf[pos:end]``; returns the
        position of the first frame left to the general path and the
        response frames to write now (None when there are none)."""
        self._counts = {}
        first = self._frame(buf, pos, end)
        if first is None:
            return pos, None
        support = self.support
        ctx = support.begin(channel)
        if ctx is None:
            return pos, None
        (mf, target, wrote, file_from, limit, max_body, index, slots, entries, born,
         store_host, host_hex, cluster, tail, sync) = ctx
        queues: dict[tuple[str, int], LaneQueue] = {}
        topics: dict[str, tuple | None] = {}
        out: list[bytes] = []
        held: list[bytes] = []
        wait_end = 0
        store_ts = 0
        store_v6 = len(store_host) == 20
        born_v6 = len(born) == 20
        try:
            frame = first
            while frame is not None:
                code, flag, opaque, ext, body, frame_end = frame
                f = _parse_single(ext, V2_KEYS if code == SEND_V2 else V1_KEYS)
                if f is None:
                    break
                topic, queue_id, sys_flag, born_ts, mflag, text, reconsume = f
                if queue_id < 0 or sys_flag & mc.TRANSACTION_ROLLBACK_TYPE or \
                        not topic.isascii() or len(topic) > _MAX_TOPIC:
                    break
                if topic not in topics:
                    topics[topic] = support.topic(topic)
                tc = topics[topic]
                if tc is None or (queue_id >= tc[0] and queue_id >= tc[1]):
                    break
                props = _props(text or "", cluster.decode())
                if props is None:
                    break
                stored, tags, wait, special, keys, uniq = props
                if special or len(stored) > _MAX_PROPS:
                    break
                q = queues.get((topic, queue_id))
                if q is None:
                    q = support.queue(topic, queue_id)
                    if q is None:
                        break
                    queues[(topic, queue_id)] = q
                sys_flag = (sys_flag & ~0x30) | (0x10 if born_v6 else 0) | (0x20 if store_v6 else 0)
                if tc[2]:
                    sys_flag |= mc.MULTI_TAGS_FLAG
                topic_b = topic.encode()
                props_b = stored.encode()
                size = _record_size(sys_flag, len(body), len(topic_b), len(props_b))
                phy = file_from + wrote
                if len(body) > max_body or size > max_body + 65536 or wrote + size > limit:
                    break
                if q.cpos >= q.csize or q.cfrom + q.cpos != q.qoff * CQ_UNIT or phy < q.maxphy:
                    break
                if index is not None and max(1, int.from_bytes(index[36:40], "big", signed=True)) + \
                        _index_keys(keys, uniq) > entries:
                    break
                now = _now_ms()
                _write_record(target, wrote, queue_id, mflag, q.qoff, phy, sys_flag, born_ts,
                              born, now, store_host, reconsume, 0, body, topic_b, props_b)
                _cq_write(q.cmf.view, q.cpos, phy, size, tags)
                if index is not None and (keys or uniq):
                    index_keys(index, slots, entries, topic, phy, now, uniq, keys, 0)
                wrote += size
                q.cpos += CQ_UNIT
                q.qoff += 1
                q.maxphy = phy + size
                q.nums += 1
                q.size += size
                q.tags = tags
                q.store_ts = store_ts = now
                if q.each is not None:
                    q.each.append((q.qoff, tags, now, size))
                if not flag & RPC_ONEWAY:
                    response = _response(host_hex, phy, queue_id, q.qoff - 1, opaque, tail)
                    if sync and wait:
                        held.append(response)
                        wait_end = file_from + wrote
                    else:
                        out.append(response)
                key = (code, bool(flag & RPC_ONEWAY))
                self._counts[key] = self._counts.get(key, 0) + 1
                pos = frame_end
                frame = self._frame(buf, pos, end)
        finally:
            support.end(ctx, wrote, store_ts, list(queues.values()), channel,
                        b"".join(held) if held else None, wait_end)
        return pos, b"".join(out) if out else None


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _response(host_hex: bytes, phy: int, queue_id: int, queue_offset: int, opaque: int,
              tail: bytes) -> bytes:
    """The SUCCESS response frame of a stored send, as the general path
    encodes it (extFields msgId, queueId, queueOffset, MSG_REGION, TRACE_ON)."""
    head = (b'{"code":0,"extFields":{"msgId":"' + host_hex
            + (phy & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "big").hex().upper().encode()
            + b'","queueId":"%d","queueOffset":"%d' % (queue_id, queue_offset) + tail
            + b'%d,"serializeTypeCurrentRPC":"JSON","version":409}' % opaque)
    return (len(head) + 4).to_bytes(4, "big") + len(head).to_bytes(4, "big") + head


def make_send_lane(support: SendLaneSupport, max_frame: int) -> Any:
    """A send lane for a server reading frames up to ``max_frame`` bytes:
    compiled when built, else the twin."""
    c = compiled("send_lane")
    return (SendLane if c is None else c.SendLane)(support, max_frame)
