"""IndexFile and IndexService: the message key index (STORE_FORMAT.md 7).

File layout::

    header 40 B  | hash slots maxHashSlotNum x 4 B | entries maxIndexNum x 20 B

    header: long beginTimestamp, long endTimestamp, long beginPhyOffset,
            long endPhyOffset, int hashSlotCount, int indexCount (next entry, from 1)
    slot:   int number of the newest entry whose key hashes here (0 = empty)
    entry:  int keyHash, long phyOffset, int timeDiff (s since beginTimestamp),
            int prevIndex (previous entry of the same slot, 0 = none)

Keys are ``topic#UNIQ_KEY`` and ``topic#token`` for every KEYS token;
``keyHash = abs(String.hashCode(key))`` (0 for Integer.MIN_VALUE).  The whole
state lives in the mapped file, so ``index_put`` / ``index_get`` are pure
functions of the buffer; the compiled twins in ``rmq._fast.store_index``
replace them.
"""

from __future__ import annotations

import logging
import os
import struct
import threading
import time

from rmq._fast import compiled
from rmq.common.java import index_key_hash
from rmq.common.threads import set_native_thread_name
from rmq.store.mapped_file import NO_ROOM, MappedFile, sync_range

log = logging.getLogger("store")

HEADER_SIZE = 40
# the thread that forces a full index file (and the checkpoint) to disk
FLUSH_THREAD_NAME = "IndexFileFlush"
SLOT_SIZE = 4
ENTRY_SIZE = 20
_HEADER = struct.Struct(">qqqqii")
_INDEX_COUNT = struct.Struct(">i")  # the header's last field, at 36
_ENTRY = struct.Struct(">iqii")
_INT = struct.Struct(">i")


def index_file_size(max_slots: int, max_index: int) -> int:
    return HEADER_SIZE + max_slots * SLOT_SIZE + max_index * ENTRY_SIZE


_key_hash = index_key_hash  # abs(String.hashCode(key)); 0 for Integer.MIN_VALUE


def _index_put(buf, max_slots: int, max_index: int, khash: int, phy_offset: int, store_ts: int) -> bool:
    """Insert one entry (STORE_FORMAT.md 7.3); False when the file is full."""
    if len(buf) < index_file_size(max_slots, max_index) or max_slots <= 0:
        raise ValueError("index buffer smaller than its layout")
    begin_ts, end_ts, begin_phy, end_phy, slot_count, index_count = _HEADER.unpack_from(buf, 0)
    if index_count <= 0:
        index_count = 1
    if index_count >= max_index:
        return False
    slot_pos = HEADER_SIZE + (khash % max_slots) * SLOT_SIZE
    (slot_value,) = _INT.unpack_from(buf, slot_pos)
    if slot_value <= 0 or slot_value > index_count:
        slot_value = 0
    diff = 0
    if begin_ts > 0:
        diff = (store_ts - begin_ts) // 1000
        diff = 0 if diff < 0 else min(diff, 0x7FFFFFFF)
    _ENTRY.pack_into(buf, HEADER_SIZE + max_slots * SLOT_SIZE + index_count * ENTRY_SIZE,
                     khash, phy_offset, diff, slot_value)
    _INT.pack_into(buf, slot_pos, index_count)
    if index_count <= 1:
        begin_phy = phy_offset
        begin_ts = store_ts
    if slot_value == 0:
        slot_count += 1
    _HEADER.pack_into(buf, 0, begin_ts, store_ts, begin_phy, phy_offset, slot_count, index_count + 1)
    return True


def _index_get(buf, max_slots: int, max_index: int, khash: int, begin: int, end: int, max_num: int) -> list[int]:
    """Physical offsets of entries with ``khash`` stored within [begin, end]
    (STORE_FORMAT.md 7.4), newest first."""
    if len(buf) < index_file_size(max_slots, max_index) or max_slots <= 0:
        raise ValueError("index buffer smaller than its layout")
    out: list[int] = []
    begin_ts, _e, _bp, _ep, _sc, index_count = _HEADER.unpack_from(buf, 0)
    (slot_value,) = _INT.unpack_from(buf, HEADER_SIZE + (khash % max_slots) * SLOT_SIZE)
    if slot_value <= 0 or slot_value > index_count or index_count <= 1:
        return out
    base = HEADER_SIZE + max_slots * SLOT_SIZE
    cur = slot_value
    while len(out) < max_num:
        h, phy, diff, prev = _ENTRY.unpack_from(buf, base + cur * ENTRY_SIZE)
        if diff < 0:
            break
        t = begin_ts + diff * 1000
        if h == khash and begin <= t <= end:
            out.append(phy)
        if prev <= 0 or prev > index_count or prev == cur or t < begin:
            break
        cur = prev
    return out


def _index_keys(buf, max_slots: int, max_index: int, topic: str, phy_offset: int, store_ts: int,
                uniq_key: str | None, keys: str | None, start: int) -> int:
    """Index one message: ``topic#UNIQ_KEY``, then ``topic#token`` for every
    non-empty space-separated KEYS token, skipping the first ``start`` keys.
    -1 when done (nothing to do when the file already covers ``phy_offset``);
    otherwise the number of the key that did not fit because the file is full
    (the caller rolls to a new file and resumes there).  One call per message
    so the compiled twin hashes ``topic#`` once and builds no strings."""
    if len(buf) < index_file_size(max_slots, max_index) or max_slots <= 0:
        raise ValueError("index buffer smaller than its layout")
    end_phy, _sc, count = struct.unpack_from(">qii", buf, 24)
    if max(count, 1) >= max_index:
        return start
    if phy_offset < end_phy:
        return -1
    todo = [uniq_key] if uniq_key else []
    if keys:
        todo.extend(k for k in keys.split(" ") if k)
    for n in range(start, len(todo)):
        khash = _key_hash(f"{topic}#{todo[n]}")
        if not _index_put(buf, max_slots, max_index, khash, phy_offset, store_ts):
            return n
    return -1


index_put = _index_put
index_get = _index_get
index_keys = _index_keys
key_hash = _key_hash
_c = compiled("store_index")
if _c is not None:
    index_put = _c.index_put
    index_get = _c.index_get
    index_keys = _c.index_keys
    key_hash = _c.key_hash


class IndexFile:
    # the fields a reput's walk (rmq._fast.store_dispatch ``index_view``) and
    # the send lane read every read, slotted and read at their slots there
    __slots__ = ("max_slots", "max_index", "mf", "file_name", "__dict__", "__weakref__")

    def __init__(self, path: str, max_slots: int, max_index: int) -> None:
        self.max_slots = max_slots
        self.max_index = max_index
        self.mf = MappedFile(path, index_file_size(max_slots, max_index))
        self.file_name = path

    def header(self) -> tuple[int, int, int, int, int, int]:
        """(beginTimestamp, endTimestamp, beginPhyOffset, endPhyOffset, hashSlotCount, indexCount)."""
        return _HEADER.unpack_from(self.mf.view, 0)

    def init_header(self, end_phy: int, end_ts: int) -> None:
        _HEADER.pack_into(self.mf.view, 0, end_ts, end_ts, end_phy, end_phy, 0, 1)

    @property
    def end_timestamp(self) -> int:
        return self.header()[1]

    @property
    def end_phy_offset(self) -> int:
        return self.header()[3]

    @property
    def begin_timestamp(self) -> int:
        return self.header()[0]

    def is_write_full(self) -> bool:
        """indexCount at its limit (asked before every append session: the one
        field is read, not the whole header)."""
        return _INDEX_COUNT.unpack_from(self.mf.view, 36)[0] >= self.max_index

    def select_phy_offset(self, key: str, max_num: int, begin: int, end: int) -> list[int]:
        return index_get(self.mf.view, self.max_slots, self.max_index, key_hash(key), begin, end, max_num)

    def is_time_matched(self, begin: int, end: int) -> bool:
        b, e = self.header()[:2]
        return (begin < b and end > e) or (b <= begin <= e) or (b <= end <= e)

    def flush(self) -> None:
        """Force the whole file (index files are only flushed when full or at shutdown)."""
        if not self.mf.closed:
            try:
                sync_range(self.mf.mm, self.mf.fd, 0, self.mf.file_size)
            except (OSError, ValueError):
                log.warning("flush of index file %s failed", self.file_name)

    def destroy(self) -> bool:
        return self.mf.destroy()

    def close(self) -> bool:
        return self.mf.close()


def _index_file_name(now_ms: int) -> str:
    lt = time.localtime(now_ms / 1000)
    return time.strftime("%Y%m%d%H%M%S", lt) + f"{now_ms % 1000:03d}"


class IndexService:
    """Index files of the store: build at dispatch, query, roll, delete."""

    # the fields the send lane's read asks (rmq._fast.send_lane ``index_file``)
    # and a reput's walk reads and sets (rmq._fast.store_dispatch) slotted,
    # read at their slots there; the rest in the dict
    __slots__ = ("_unfinished", "files", "_spare", "max_slots", "max_index", "promised",
                 "__dict__", "__weakref__")

    def __init__(self, store_path: str, max_slots: int, max_index: int, checkpoint, max_msgs_num_batch: int) -> None:
        self.store_path = store_path
        self.max_slots = max_slots
        self.max_index = max_index
        self.checkpoint = checkpoint
        self.max_msgs_num_batch = max_msgs_num_batch
        self.files: list[IndexFile] = []
        self._lock = threading.Lock()
        self._hanged: list[IndexFile] = []
        # lowest commit log offset covered by index files dropped at an abnormal load
        self.dropped_begin_phy_offset = -1
        # the last index file creation failed for want of disk space
        self.no_space = False
        # (phy offset, next key) of a build cut short by a failed file creation:
        # dispatch retries the record, and the keys already written are not added twice
        self._unfinished: tuple[int, int] | None = None
        self.file_size = index_file_size(max_slots, max_index)
        self.last_error = ""  # why the last file creation failed
        # the next file, made ahead by a put whose keys the current one cannot
        # all take (DispatchRoom); it becomes current when that one is full
        self._spare: IndexFile | None = None
        # flushes of full files still running: shutdown waits for them before
        # it closes the files they write
        self._flushes: list[threading.Thread] = []
        # keys of puts taken but not dispatched yet (dispatch runs later than
        # the put: transient store pool, DLedger); room kept for them
        self.promised = 0

    def load(self, last_exit_ok: bool) -> bool:
        if not os.path.isdir(self.store_path):
            return True
        names = sorted(n for n in os.listdir(self.store_path) if n.isdigit())
        files = []
        self.dropped_begin_phy_offset = -1
        size = index_file_size(self.max_slots, self.max_index)
        for n in names:
            path = os.path.join(self.store_path, n)
            if os.path.getsize(path) != size:
                log.error("index file %s has a different size than configured, ignored", path)
                continue
            f = IndexFile(path, self.max_slots, self.max_index)
            if not last_exit_ok and f.end_timestamp > self.checkpoint.index_msg_timestamp:
                begin = f.header()[2]
                if self.dropped_begin_phy_offset < 0 or begin < self.dropped_begin_phy_offset:
                    self.dropped_begin_phy_offset = begin
                f.destroy()
                continue
            files.append(f)
        self.files = files
        self._spare = None
        if len(files) >= 2 and files[-1].header()[5] <= 1 and not files[-2].is_write_full():
            self._spare = files[-1]  # made ahead before a restart, never used
        return True

    def reserve_last(self) -> bool:
        """Reserve the blocks of the newest index file (see MappedFileQueue.reserve_last)."""
        files = self.files
        if files and not files[-1].mf.reserve():
            self.no_space = True
            return False
        return True

    def writable_file(self) -> IndexFile | None:
        """The current index file if it has room (no file is created here)."""
        files = self.files
        if not files:
            return None
        last = files[-1]
        if last is self._spare:
            if len(files) >= 2 and not files[-2].is_write_full():
                return files[-2]
            self._take_spare(files)
        return None if last.is_write_full() else last

    def append_file(self) -> IndexFile | None:
        """The index file an append session may write keys into directly: the
        current one with room, unless a message's keys are half written
        (the dispatch finishes those first)."""
        if self._unfinished is not None:
            return None
        return self.writable_file()

    def _take_spare(self, files: list[IndexFile]) -> None:
        """The file made ahead becomes the current one, as if it were made
        now: its header starts at the end of the full file before it, which
        is forced and recorded as a full file is."""
        spare, self._spare = self._spare, None
        if len(files) >= 2:
            prev = files[-2]
            spare.init_header(prev.end_phy_offset, prev.end_timestamp)
            self._start_flush(prev)

    def keys_fit(self, keys: int) -> bool:
        """The current file (and the one made ahead) have room for ``keys``
        more entries besides those promised: one header read per put."""
        files = self.files
        if not files:
            return False
        last = files[-1]
        if last is not self._spare:  # the usual case (a file's count is at least 1)
            return _INT.unpack_from(last.mf.view, 36)[0] + keys + self.promised <= self.max_index
        room = self.max_index - max(_INT.unpack_from(last.mf.view, 36)[0], 1)
        if len(files) >= 2:
            room += max(0, self.max_index - max(_INT.unpack_from(files[-2].mf.view, 36)[0], 1))
        return keys + self.promised <= room

    def make_room(self, keys: int) -> bool:
        """Make the next index file now when the current one cannot take
        ``keys`` more entries; False (``no_space`` says whether the disk was
        full) when it cannot be made."""
        if self.keys_fit(keys) or self._spare is not None:
            # one file is made ahead at most: more keys than it and the current
            # one take (a dispatch lagging by a whole file) get theirs at dispatch
            return True
        return self._new_file(ahead=True) is not None

    def _last_writable(self) -> IndexFile | None:
        current = self.writable_file()
        return current if current is not None else self._new_file(ahead=False)

    def _start_flush(self, f: IndexFile) -> None:
        t = threading.Thread(target=self._flush_full, args=(f,), name=FLUSH_THREAD_NAME,
                             daemon=True)
        self._flushes = [x for x in self._flushes if x.is_alive()] + [t]
        t.start()

    def _new_file(self, ahead: bool) -> IndexFile | None:
        files = self.files
        last = files[-1] if files else None
        end_phy, end_ts = (last.end_phy_offset, last.end_timestamp) if last is not None else (0, 0)
        os.makedirs(self.store_path, exist_ok=True)
        now = int(time.time() * 1000)
        path = os.path.join(self.store_path, _index_file_name(now))
        while os.path.exists(path):
            now += 1
            path = os.path.join(self.store_path, _index_file_name(now))
        try:
            f = IndexFile(path, self.max_slots, self.max_index)
        except OSError as e:
            self.last_error = f"create index file {path} failed: {e}"
            if not ahead:  # a put making it ahead is refused, and says so once (DispatchRoom)
                log.error("%s", self.last_error)
            self.no_space = e.errno in NO_ROOM
            return None
        self.no_space = False
        f.init_header(end_phy, end_ts)
        with self._lock:
            self.files = self.files + [f]
        if ahead and last is not None and not last.is_write_full():
            self._spare = f  # waits for the current file to fill
        elif last is not None:
            self._start_flush(last)
        return f

    def _flush_full(self, f: IndexFile) -> None:
        """A full file is forced and its end time recorded in the checkpoint."""
        set_native_thread_name(FLUSH_THREAD_NAME)
        f.flush()
        self.checkpoint.index_msg_timestamp = f.end_timestamp
        self.checkpoint.flush()

    def build_index(self, topic: str, phy_offset: int, store_ts: int, keys: str | None, uniq_key: str | None) -> bool:
        """Index one dispatched message (UNIQ_KEY first, then KEYS tokens).
        False when no index file could be made; a retry of the same message
        resumes at the first key not yet written."""
        at = 0
        unfinished, self._unfinished = self._unfinished, None
        if unfinished is not None and unfinished[0] == phy_offset:
            at = unfinished[1]
        files = self.files
        # the last file as before (a full one rolls below), unless it was made ahead
        f = files[-1] if files and files[-1] is not self._spare else self._last_writable()
        if f is None:
            self._unfinished = (phy_offset, at)
            return False
        slots, entries = self.max_slots, self.max_index
        at = index_keys(f.mf.view, slots, entries, topic, phy_offset, store_ts, uniq_key, keys, at)
        while at >= 0:  # the file is full: the rest goes into a new one
            f = self._last_writable()
            if f is None:
                self._unfinished = (phy_offset, at)
                return False
            resumed = index_keys(f.mf.view, slots, entries, topic, phy_offset, store_ts,
                                 uniq_key, keys, at)
            if resumed == at:  # not even one key fits in a fresh file
                return False
            at = resumed
        return True

    def query_offset(self, topic: str, key: str, max_num: int, begin: int, end: int) -> tuple[list[int], int, int]:
        """(physical offsets, last update time, last update phy offset)."""
        max_num = min(max_num, self.max_msgs_num_batch)
        out: list[int] = []
        last_ts = last_phy = 0
        files = self.files
        if files:
            last_ts = files[-1].end_timestamp
            last_phy = files[-1].end_phy_offset
        full_key = f"{topic}#{key}"
        for f in reversed(files):
            try:
                if f.is_time_matched(begin, end):
                    out.extend(f.select_phy_offset(full_key, max_num - len(out), begin, end))
                if f.begin_timestamp < begin or len(out) >= max_num:
                    break
            except ValueError:  # file unmapped by a concurrent delete
                continue
        return out, last_ts, last_phy

    def delete_expired_file(self, offset: int) -> None:
        """Index files (never the newest) entirely below ``offset`` go."""
        files = self.files
        victims = []
        keep = 2 if files and files[-1] is self._spare else 1  # the current file stays
        for f in files[:-keep]:
            if f.end_phy_offset < offset:
                victims.append(f)
            else:
                break
        if victims:
            with self._lock:
                self.files = [f for f in self.files if f not in victims]
            for f in victims:
                if not f.destroy():
                    self._hanged.append(f)
        self._hanged = [f for f in self._hanged if not f.close()]

    def flush(self) -> None:
        for f in self.files:
            f.flush()

    def shutdown(self) -> None:
        for t in self._flushes:
            t.join()
        self._flushes = []
        for f in self.files:
            f.flush()
            f.close()

    def destroy(self) -> None:
        for f in self.files:
            f.destroy()
        self.files = []
