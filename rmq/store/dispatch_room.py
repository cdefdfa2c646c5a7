"""Room for dispatch: a put is acknowledged only when its dispatch can run.

Dispatch writes a message's consume-queue entry and its index keys into
files of their own.  When one of those files cannot be made or grown (the
disk is full), a message already in the commit log stays undispatched and
no consumer can read it, though its sender was told SEND_OK.  So every put
path, before it writes the commit log, makes sure the room its dispatch
needs is there, making it then if it is not, and refuses the put (with
nothing stored) when it cannot be made:

- the reserved blocks of the consume-queue file(s) its entries land in (a
  delayed message: the SCHEDULE_TOPIC_XXXX queue's and, for its later
  delivery, the real topic queue's), the file made when it is the next one
  (consume-queue files are sparse and written within their reserved blocks:
  ``ConsumeQueue.make_room``);
- an index file with room for its keys: when the current one has too few
  entries left, the next one is made ahead (``IndexService.make_room``).

The usual case costs a comparison per queue (the queue's last file's
reserved blocks cover the entries) and one header read of the index file;
files are made exactly when dispatch would have made them, so the store's
bytes stay as before.
The refusal's remark says what ran out and how much room there is; the log
says it once per file kind and queue, until there is room again.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

from rmq.store.consume_queue import CQ_STORE_UNIT_SIZE

if TYPE_CHECKING:
    from rmq.store.consume_queue import ConsumeQueue

log = logging.getLogger("store")

_MIB = 1024 * 1024


def _size(n: int) -> str:
    """A size as an operator reads it (MiB, or KiB below one MiB)."""
    return f"{n / _MIB:.1f} MiB" if n >= _MIB else f"{n / 1024:.1f} KiB"


def free_bytes(path: str) -> int:
    """Bytes an unprivileged writer may still use on the disk of ``path``
    (its nearest existing parent); -1 when it cannot be told."""
    while path and not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    try:
        st = os.statvfs(path)
    except OSError:
        return -1
    return st.f_bavail * st.f_frsize


def queue_covers(cq: ConsumeQueue, first: int, count: int) -> bool:
    """The queue's reserved blocks already hold the places of entries
    ``first`` .. ``first + count - 1`` (the per-put check: one comparison;
    every file but the last is reserved whole)."""
    files = cq.mfq.mapped_files
    return bool(files) and \
        files[-1].file_from_offset + files[-1].reserved_to >= (first + count) * CQ_STORE_UNIT_SIZE


def count_keys(keys: str | None, uniq: str | None) -> int:
    """Index entries of a message: its UNIQ_KEY and each non-empty KEYS token."""
    n = 1 if uniq else 0
    if keys:
        n += sum(1 for k in keys.split(" ") if k)
    return n


class DispatchRoom:
    """The check every put path makes under the put lock (see the module
    docstring); ``remark`` is the last refusal's."""

    def __init__(self, store) -> None:
        self.store = store
        self.remark = ""
        self._refused: set[tuple] = set()  # what ran out, logged once until room is back

    def reserve(self, topic: str, queue_id: int, first: int, count: int, keys: int,
                real: tuple[str, int] | None = None) -> bool:
        """Make sure dispatch has room for ``count`` entries of queue
        ``topic``-``queue_id`` from queue offset ``first`` (0: the message
        has no entry, a prepared transaction), the real topic queue ``real``
        of a delayed message, and ``keys`` index entries.  False, with
        ``remark`` set and nothing stored, when a file cannot be made."""
        store = self.store
        if count and not self._queue_room(store.find_consume_queue(topic, queue_id), first, count):
            return False
        if real is not None:
            rcq = store.find_consume_queue(*real)
            if not self._queue_room(rcq, store.commit_log.topic_queue_table.get(real, 0), 1):
                return False
        if keys and store.config.messageIndexEnable:
            ix = store.index_service
            if not ix.keys_fit(keys) and not self._index_room(ix, keys):
                return False
            if store.commit_service is not None or store.commit_log.dispatch_on_commit:
                ix.promised += keys  # dispatched later: the room stays taken until then
        return True

    def reserve_covered(self, queues: list[tuple[str, int, int, int]], keys: int) -> bool:
        """``reserve`` of a read's sends at once -- ``queues`` (topic, queue
        id, first queue offset, entries) and ``keys`` index entries in all --
        when nothing has to be made for them: each queue's files already
        hold its entries' places and the index file has room for the keys
        (one comparison per queue, one header read).  Then exactly what
        ``reserve`` of each send in turn would do, as it would make no file
        and refuse none.  False, with nothing reserved, when a file would
        have to be made: the caller then reserves send by send, so that what
        a full disk refuses stays the sends from the first one without room.
        (The DLedger lane's compiled append makes the same check of its
        read's queues in C: ``rmq._fast.dledger_append``'s ``room_covered``.)"""
        store = self.store
        table = store.consume_queue_table
        for topic, queue_id, first, count in queues:
            qs = table.get(topic)
            cq = qs.get(queue_id) if qs is not None else None
            if cq is None:
                return False
            files = cq.mfq.mapped_files  # (queue_covers, inline: once per queue of a read)
            if not files or files[-1].file_from_offset + files[-1].reserved_to < \
                    (first + count) * CQ_STORE_UNIT_SIZE:
                return False
        return self.keys_covered(keys)

    def keys_covered(self, keys: int) -> bool:
        """The index part of ``reserve_covered``: True, with ``keys`` index
        entries promised where dispatch comes later, when the index file has
        room for them; False, with nothing promised, when one would have to
        be made.  (The DLedger lane's compiled append makes this check with
        ``IndexService.keys_fit`` inlined: ``rmq._fast.dledger_append``'s
        ``keys_covered``, which asks this one where the index file made
        ahead is current.)"""
        store = self.store
        if keys and store.config.messageIndexEnable:
            ix = store.index_service
            if not ix.keys_fit(keys):
                return False
            if store.commit_service is not None or store.commit_log.dispatch_on_commit:
                ix.promised += keys  # dispatched later: the room stays taken until then
        return True

    def _queue_room(self, cq: ConsumeQueue, first: int, count: int) -> bool:
        if queue_covers(cq, first, count):
            return True
        end = (first + count) * CQ_STORE_UNIT_SIZE
        mfq = cq.mfq
        while True:
            files = mfq.mapped_files
            if files:
                last = files[-1]
                have = last.reserved_to
                if last.file_from_offset + have >= end:
                    break
                if have < cq.file_size:  # its window grows, up to its end, before a next file
                    need = min(end - last.file_from_offset, cq.file_size)
                    if cq.make_room(last, need):
                        continue
                    what = f"the next entries of the consume queue file of {cq.topic}-{cq.queue_id}"
                    self._refuse(("cq", cq.topic, cq.queue_id), what,
                                 cq.room_target(have, need) - have, mfq.store_paths[0], True,
                                 mfq.last_error)
                    return False
                offset = last.file_from_offset + cq.file_size
            else:
                start = first * CQ_STORE_UNIT_SIZE
                offset = start - start % cq.file_size
            if mfq.create_at(offset) is None:
                what = f"a new consume queue file of {cq.topic}-{cq.queue_id}"
                self._refuse(("cq", cq.topic, cq.queue_id), what, cq.file_size,
                             mfq.store_paths[0], mfq.no_space, mfq.last_error)
                return False
        self._room_again(("cq", cq.topic, cq.queue_id))
        return True

    def _index_room(self, ix, keys: int) -> bool:
        if ix.make_room(keys):
            self._room_again(("index",))
            return True
        self._refuse(("index",), "a new index file", ix.file_size, ix.store_path, ix.no_space,
                     ix.last_error)
        return False

    def _refuse(self, key: tuple, what: str, size: int, path: str, no_space: bool,
                error: str) -> None:
        free = free_bytes(path)
        if no_space and free < size:
            self.remark = (f"no space for {what} ({_size(size)} needed, "
                           f"{_size(free) if free >= 0 else 'unknown'} free)")
        elif no_space:  # EDQUOT, EFBIG: the disk has room, a limit said no
            self.remark = (f"no room for {what} ({_size(size)} needed, {_size(free)} free "
                           "on the disk: a quota or file size limit refused it)")
        else:
            self.remark = f"{what} could not be created (see store.log)"
        if key not in self._refused:
            self._refused.add(key)
            log.error("puts refused: %s (%s)", self.remark, error)

    def _room_again(self, key: tuple) -> None:
        if key in self._refused:
            self._refused.discard(key)
            log.info("puts taken again: room for the %s", "index file" if key[0] == "index"
                     else f"consume queue file of {key[1]}-{key[2]}")
