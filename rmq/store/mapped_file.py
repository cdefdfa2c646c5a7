"""MappedFile and MappedFileQueue: fixed-size files mapped into memory.

Mirrors ``MappedFile`` / ``MappedFileQueue`` of 4.9.8 (STORE_FORMAT.md 1.1,
10.1).  A file has three positions: *wrote* (bytes appended), *committed*
(bytes moved from the transient write buffer into the mapping; equal to wrote
without one) and *flushed* (bytes forced to disk).  The event loop appends and
reads; flush threads read the positions and call msync/fdatasync; a file list
is replaced, never mutated in place, so readers on other threads always see a
consistent list without a lock.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import mmap
import os
import threading
import time

from rmq._fast import compiled

log = logging.getLogger("store")

OS_PAGE_SIZE = 4096

# Pages populated ahead of a commit log's appends: at least this much,
# twice what was appended since the last round when that is more, at most the
# upper bound (see MappedFileQueue.populate_ahead).
POPULATE_AHEAD_MIN = 64 * 1024 * 1024
POPULATE_AHEAD_MAX = 256 * 1024 * 1024
_WILLNEED = getattr(os, "POSIX_FADV_WILLNEED", None)
# A file written a few bytes at a time at one spot per page (a consume queue:
# 20 bytes an entry) is mapped MADV_RANDOM.  A fault on a page not in the page
# cache otherwise starts a readahead of up to ``read_ahead_kb`` around it (8
# MiB on many virtual disks): the first entry of a consume queue made the
# kernel zero-fill the whole 6 MB file (its blocks were reserved, so they read
# as zeros), ~1.4 ms of kernel time per queue, and 1024 queues kept ~6 GiB of
# zero pages in the page cache.  With it each page is faulted alone when an
# entry first reaches it (one fault per 204 entries).  Only the file appends
# go to is: a full file (all but the last; the last one's predecessor when a
# new one is made) is read ahead as usual, for a consumer reading it back
# from disk.
_MADV_RANDOM = getattr(mmap, "MADV_RANDOM", None)
# a window's view and end change together (reserve_range), and a file is not
# closed while its blocks are reserved (its descriptor could be another file's)
_WINDOW_LOCK = threading.Lock()
_POPULATE_CHUNK = 256 * 1024  # within any device's cap on one WILLNEED call
_CLOCK_REALTIME_COARSE = 5  # Linux <time.h>; the time module does not name it
# zeros kept written ahead of a log's appends (MappedFile.zero_ahead), and
# what one append tops them up by while at least half of that is left
ZERO_AHEAD = 1024 * 1024
ZERO_STEP = 64 * 1024
# write_blocks: direct writes of this much at a time, offsets and lengths
# aligned to this (the logical block size direct I/O asks for, at most)
PREWRITE_CHUNK = 8 * 1024 * 1024
PREWRITE_ALIGN = 4096
_ZEROS = memoryview(bytes(ZERO_AHEAD))


def offset_to_file_name(offset: int) -> str:
    """Files are named by their start offset, 20 decimal digits."""
    return f"{offset:020d}"


def _sync_range(mm: mmap.mmap, fd: int, start: int, end: int) -> None:
    """Force ``[start, end)`` of the mapping to disk.  The twin uses fdatasync
    on the file (it releases the GIL and covers the shared mapping's pages)."""
    os.fdatasync(fd)


def _page_cache_busy(begin_ms: int, timeout_ms: int) -> bool:
    """isOSPageCacheBusy (STORE_FORMAT.md 10.7): has the put that began at
    ``begin_ms`` (wall clock, 0 outside a put) held the lock longer than
    ``timeout_ms`` by now?  The clock is read here, not by the caller, so the
    compiled twin can read it in C.  Both read the coarse real-time clock
    (the last tick, a nanosecond to read instead of tens): a millisecond
    reading of it is at most one tick behind, nothing against a 1000 ms
    timeout."""
    diff = time.clock_gettime_ns(_CLOCK_REALTIME_COARSE) // 1_000_000 - begin_ms
    return diff < 10_000_000 and diff > timeout_ms


# the errors of a file that the disk cannot hold: no space, quota, file size limit
NO_ROOM = frozenset((errno.ENOSPC, errno.EDQUOT, errno.EFBIG))


def _create_sized(file_name: str, file_size: int, reserve: bool = True) -> int:
    """Create a file at its full size under a temporary name and rename it, so
    a crash never leaves a store file of the wrong length behind.

    The blocks are reserved (``posix_fallocate``) before the file is named: a
    sparse file on a full disk maps fine, and the first write into a page the
    file system cannot back then kills the process with SIGBUS.  Reserved, a
    full disk is an ENOSPC here, with no file left behind.  With ``reserve``
    False the file stays sparse: its writer reserves each range before it
    writes there (``MappedFile.reserve_range``)."""
    tmp = file_name + ".tmp"
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.ftruncate(fd, file_size)
        if reserve:
            os.posix_fallocate(fd, 0, file_size)
        os.rename(tmp, file_name)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return fd


def reserve_blocks(fd: int, offset: int, length: int, path: str,
                   level: int = logging.ERROR) -> bool:
    """``posix_fallocate`` of ``[offset, offset + length)`` of the file: False,
    logged at ``level``, when the disk (or a quota, or a size limit) has no
    room; any other error is raised."""
    try:
        os.posix_fallocate(fd, offset, length)
    except OSError as e:
        if e.errno not in NO_ROOM:
            raise
        log.log(level, "reserve the blocks of %s from %d failed: %s", path, offset, e)
        return False
    return True


def reserve_mapped(fd: int, size: int, path: str, made: bool) -> None:
    """Reserve the blocks of a small file written through a mapping (a store's
    or the timer's checkpoint): made sparse, its first flush would write into
    a hole, a SIGBUS on a full disk.  A file just ``made`` fails here with
    ENOSPC instead; an older one the disk has no room for is left as it was,
    with a warning."""
    if made:
        os.posix_fallocate(fd, 0, size)
    else:
        reserve_blocks(fd, 0, size, path, logging.WARNING)


def _data_end(fd: int, file_size: int) -> int:
    """Where the first hole of an existing file begins: every byte before it
    has its block on disk (written, or in the page cache waiting to be), so a
    write there never needs a new one.  A consume queue's files are written
    from their start on, so this is at least the end of their entries.  The
    whole file where the file system cannot tell (it then counts it all as
    data, as ``lseek`` does)."""
    try:
        return min(os.lseek(fd, 0, os.SEEK_HOLE), file_size)
    except OSError:
        return file_size


def _populate(mm: mmap.mmap, fd: int, start: int, end: int) -> None:
    """Bring ``[start, end)`` of the file into the page cache ahead of the
    appends, leaving its bytes as they are.

    A store file is created sparse, so the first write to a region faults
    with a page-cache miss, and the kernel answers a fault miss with a
    synchronous readahead: it allocates and zero-fills up to ``read_ahead_kb``
    (8 MiB on many virtual disks) before the write goes on.  Done by the
    appender, that is a stall of the event loop every few MiB (measured: ~10
    ms every 8 MiB).  Done ahead on a flush thread, the appender's writes find
    the pages there.  The compiled twin faults the range in writable with the
    GIL released (MADV_POPULATE_WRITE); this one, which cannot release the GIL
    around madvise, fills the page cache with POSIX_FADV_WILLNEED (the GIL is
    released in each call; the kernel caps one call at the device's readahead
    or I/O size, hence the chunks), and the appender's faults then only map
    cached pages.  Nothing is written to disk either way."""
    end = min(end, len(mm))
    start = max(start, 0)
    if _WILLNEED is None or end <= start:
        return
    start -= start % OS_PAGE_SIZE
    while start < end:
        n = min(_POPULATE_CHUNK, end - start)
        os.posix_fadvise(fd, start, n, _WILLNEED)
        start += n


sync_range = _sync_range
populate_page_cache = _populate
page_cache_busy = _page_cache_busy
_c = compiled("store_mapped")
if _c is not None:
    sync_range = _c.sync_range
    populate_page_cache = _c.populate
    page_cache_busy = _c.page_cache_busy


class MappedFile:
    """One mapped file; ``view`` is a memoryview of the whole mapping that
    readers slice (zero copy) and appenders write into."""

    __slots__ = (
        "file_name", "file_from_offset", "file_size", "fd", "mm", "view", "wrote_position",
        "committed_position", "flushed_position", "write_buffer", "store_timestamp",
        "first_create_in_queue", "populated_to", "zeroed_to", "_closed", "_pool", "deleted_at",
        "reserved_to", "window",
    )

    def __init__(self, file_name: str, file_size: int, pool: TransientStorePool | None = None,
                 random_access: bool = False, reserve: bool = True, window: bool = False) -> None:
        """``reserve`` False: a file made here is left sparse, for a writer
        that reserves ahead of its writes (``reserve_range``).  ``window``: a
        sparse file whose ``view`` ends where its reserved blocks do
        (``reserved_to``): every writer of a consume queue keeps within the
        view it writes through, so none writes into a hole a full disk could
        not fill, and the view grows as ``reserve_range`` reserves more.  An
        existing file's window is what it holds on disk (``_data_end``)."""
        self.file_name = file_name
        self.file_size = file_size
        base = os.path.basename(file_name)
        if not base.isdigit():
            raise ValueError(f"not a store file name: {file_name}")
        self.file_from_offset = int(base)
        made = False
        try:
            fd = os.open(file_name, os.O_RDWR)
        except FileNotFoundError:
            fd = _create_sized(file_name, file_size, reserve and not window)
            made = True
        try:
            self.mm = mmap.mmap(fd, file_size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            if random_access and _MADV_RANDOM is not None:
                self.mm.madvise(_MADV_RANDOM)
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd
        self.window = window
        # the end of the blocks reserve_range reserved (a file made with
        # ``reserve`` has them all; this is kept for those made without)
        self.reserved_to = 0
        if window and not made:
            self.reserved_to = _data_end(fd, file_size)
        self.view = memoryview(self.mm)[:self.reserved_to] if window else memoryview(self.mm)
        self.wrote_position = 0
        self.committed_position = 0
        self.flushed_position = 0
        self.store_timestamp = 0
        self.first_create_in_queue = False
        self.populated_to = 0
        self.zeroed_to = 0  # end of the zeros zero_fill wrote
        self._closed = False
        self.deleted_at = 0.0  # monotonic time of destroy(): a hanged file is watched from then
        self._pool = pool
        self.write_buffer = pool.borrow() if pool is not None else None

    def reserve(self) -> bool:
        """Reserve the file's blocks on disk (quick when they already are);
        False when the disk has no room for them."""
        if not self.window:  # (a window's blocks are on disk up to its end)
            self.reserved_to = 0  # (whatever was reserved: all of it again)
        return self.reserve_range(0, self.file_size, 0)

    def reserve_range(self, start: int, end: int, ahead: int, quiet: bool = False) -> bool:
        """Reserve the blocks of ``[start, end)`` before a write there, in a
        range of at least ``ahead`` bytes (up to the file's end), so that the
        next writes find theirs reserved: for a file made sparse (``reserve``
        False), whose writer then never writes into a hole a full disk could
        not fill.  False, with nothing reserved, when the disk has no room
        (logged unless ``quiet``: a caller that says so once, DispatchRoom)."""
        if end <= self.reserved_to:
            return True
        with _WINDOW_LOCK:  # (and with close: the descriptor is this file's while reserving)
            if self._closed:
                return False
            # (below: reserved; a window reserves on from its end, so it never has a hole)
            lo = self.reserved_to if start <= self.reserved_to or self.window else start
            to = min(self.file_size, max(end, lo + ahead))
            if to <= self.reserved_to:
                return True
            if not reserve_blocks(self.fd, lo, to - lo, self.file_name,
                                  logging.DEBUG if quiet else logging.ERROR):
                return False
            if self.window:  # the view first: a writer that sees the new end finds it there
                old, self.view = self.view, memoryview(self.mm)[:to]
                with contextlib.suppress(BufferError):  # (a reader's: it lets go itself)
                    old.release()
            self.reserved_to = to
        return True

    def write_blocks(self, pause: float = 0.0) -> None:
        """Write zeros over the whole of a new file on disk and sync them.

        A file's blocks are reserved when it is created (``posix_fallocate``),
        and a reserved block reads as zeros until something is written to it;
        the write that does turns it into a written one, and that is a change
        of the file's block map.  A flush that syncs data written into
        reserved blocks therefore writes the block map too: on ext4, one or
        two more synchronous metadata writes before the device's cache flush
        (``bench/flush_floor.py``'s disk: ~200 against ~300-400 µs an msync).
        Written once here, before the file is used, the blocks make every
        later flush one data write and one cache flush, as RocketMQ's warmed
        files do under SYNC_FLUSH.  Direct I/O from one zeroed buffer: no
        page cache, a few system calls; ``pause`` seconds between chunks
        leave the disk to the flushes of the file in use meanwhile.  Only for
        a file nobody has written yet: it overwrites whatever is there."""
        aligned = self.file_size - self.file_size % PREWRITE_ALIGN
        if aligned:
            try:
                fd = os.open(self.file_name, os.O_WRONLY | os.O_DIRECT)
            except OSError:  # no direct I/O on this file system: plain writes
                fd = -1
            zeros = mmap.mmap(-1, min(PREWRITE_CHUNK, aligned))  # page-aligned zeros
            try:
                for pos in range(0, aligned, PREWRITE_CHUNK):
                    n = min(PREWRITE_CHUNK, aligned - pos)
                    with memoryview(zeros)[:n] as chunk:
                        os.pwritev(fd if fd >= 0 else self.fd, [chunk], pos)
                    if pause and pos + n < aligned:
                        time.sleep(pause)
            finally:
                zeros.close()
                if fd >= 0:
                    os.close(fd)
        if aligned < self.file_size:
            os.pwrite(self.fd, bytes(self.file_size - aligned), aligned)
        os.fdatasync(self.fd)
        # whatever plain writes left in the page cache is not needed there
        os.posix_fadvise(self.fd, 0, self.file_size, os.POSIX_FADV_DONTNEED)

    def attach_pool(self, pool: TransientStorePool) -> None:
        """Borrow a write buffer for a file created without one."""
        self.write_buffer = pool.borrow()
        self._pool = pool if self.write_buffer is not None else None

    # --- positions -----------------------------------------------------------
    @property
    def target(self):
        """Where appends go: the transient write buffer or the mapping."""
        return self.write_buffer if self.write_buffer is not None else self.view

    def read_position(self) -> int:
        """Bytes visible to readers (committed ones with a write buffer)."""
        return self.committed_position if self.write_buffer is not None else self.wrote_position

    def is_full(self) -> bool:
        return self.wrote_position == self.file_size

    def end_random_access(self) -> None:
        """Back to the kernel's usual readahead for this mapping (a full file
        of a ``random_access`` queue: see _MADV_RANDOM)."""
        if _MADV_RANDOM is None:
            return
        try:
            self.mm.madvise(mmap.MADV_NORMAL)
        except (OSError, ValueError) as e:  # closed meanwhile: nothing to advise
            log.debug("madvise of %s failed: %s", self.file_name, e)

    def set_positions(self, pos: int) -> None:
        self.wrote_position = pos
        self.committed_position = pos
        self.flushed_position = pos

    # --- commit / flush ------------------------------------------------------
    def commit(self, least_pages: int) -> int:
        """Copy written bytes from the write buffer into the mapping."""
        wb = self.write_buffer
        if wb is None:
            self.committed_position = self.wrote_position
            return self.committed_position
        wrote = self.wrote_position
        committed = self.committed_position
        if self._able(wrote, committed, least_pages):
            self.view[committed:wrote] = wb[committed:wrote]
            self.committed_position = wrote
        if self.committed_position == self.file_size and self._pool is not None:
            self._pool.give_back(wb)
            self.write_buffer = None
            self._pool = None
        return self.committed_position

    def _able(self, end: int, start: int, least_pages: int) -> bool:
        if self.is_full() and end == self.file_size:
            return end > start
        if least_pages > 0:
            return end // OS_PAGE_SIZE - start // OS_PAGE_SIZE >= least_pages
        return end > start

    def flush(self, least_pages: int) -> int:
        """Force readable bytes to disk when at least ``least_pages`` dirty
        pages are pending (0 = anything).  Safe from a flush thread."""
        value = self.read_position()
        if self._closed:
            return self.flushed_position
        if self._able(value, self.flushed_position, least_pages):
            try:
                sync_range(self.mm, self.fd, self.flushed_position, value)
            except (OSError, ValueError):
                return self.flushed_position
            self.flushed_position = value
        return self.flushed_position

    def populate(self, end: int) -> None:
        """Populate the file from where appends are (or were last populated)
        up to ``end`` (see ``_populate``); called on one thread only, the
        allocation service's (or the caller's for a queue without one)."""
        end = min(end, self.file_size)
        start = max(self.populated_to, self.wrote_position)
        start -= start % OS_PAGE_SIZE
        if end <= start or self._closed:
            return
        try:
            populate_page_cache(self.mm, self.fd, start, end)
        except (OSError, ValueError) as e:  # closed meanwhile, or refused: appends fault as usual
            log.debug("populating %s [%d, %d) failed: %s", self.file_name, start, end, e)
        self.populated_to = end

    def zero_ahead(self) -> None:
        """Before an append, by the appender: keep up to ZERO_AHEAD bytes past
        the append position written with zeros (``zero_fill``), so appends
        land on pages already in the page cache and never fault one in (a
        synchronous readahead, and the fault path's cost per page,
        bench/page_floor.py).  While at least half of it is left an append
        tops it up by ZERO_STEP (one short ``pwrite``: the loop is never held
        long, even where new memory is dear); below half -- appends of more
        than that since the last one -- it is filled up at once.  A few
        attribute reads when nothing is to do."""
        wrote = self.wrote_position
        ahead = self.zeroed_to - wrote
        if ahead >= ZERO_AHEAD:
            return
        if ahead >= ZERO_AHEAD // 2:
            self.zero_fill(self.zeroed_to + ZERO_STEP)
        else:
            self.zero_fill(wrote + ZERO_AHEAD)

    def zero_fill(self, end: int) -> None:
        """Write zeros with ``pwrite`` over the whole pages from the append
        position (or the end of the last fill) up to ``end``, at most
        ZERO_AHEAD at a time.  The caller is the appender, holding the
        commit log's put lock, before it writes: no byte at or past
        ``wrote_position`` is anyone's yet, and the page holding it is left
        alone.  The file holds zeros there already (created reserved or
        sparse; past a truncation, stale bytes nobody reads), so no reader
        sees a change; what changes is how the page cache gets the pages: no
        write fault and no synchronous readahead on the appender's path, and
        on this machine kind a fraction of the fault path's CPU while the
        guest's free memory is backed (bench/page_floor.py)."""
        wrote = self.wrote_position
        start = max(self.zeroed_to, wrote + (-wrote % OS_PAGE_SIZE))
        end = min(end, self.file_size, start + len(_ZEROS))
        try:
            while start < end:
                start += os.pwrite(self.fd, _ZEROS[:end - start], start)
        except OSError as e:  # the appends fault the pages in as they would have
            log.debug("zero fill of %s at %d failed: %s", self.file_name, start, e)
        self.zeroed_to = max(self.zeroed_to, end)

    # --- reads ---------------------------------------------------------------
    def select(self, pos: int, size: int | None = None) -> memoryview | None:
        """A zero-copy view of ``size`` bytes at ``pos`` (to the readable end
        when ``size`` is None); None when out of range or unmapped.  Without a
        size nothing readable at ``pos`` is None too, never an empty view: a
        dispatch loop waiting for a commit must see "nothing yet" and stop."""
        read_pos = self.read_position()
        end = read_pos if size is None else pos + size
        if pos < 0 or end > read_pos or pos > end or (size is None and pos == end):
            return None
        try:
            return self.view[pos:end]
        except ValueError:
            return None

    def last_modified(self) -> float:
        try:
            return os.path.getmtime(self.file_name)
        except OSError:
            return 0.0

    def warm(self) -> None:
        """Touch every page of a fresh file so the first appends do not fault."""
        mm = self.mm
        for i in range(0, self.file_size, OS_PAGE_SIZE):
            mm[i] = 0
        try:
            mm.madvise(mmap.MADV_WILLNEED)
        except (AttributeError, OSError):
            pass

    # --- life cycle --------------------------------------------------------------
    def close(self) -> bool:
        """Unmap; returns False while readers still hold views (retried later)."""
        if self._closed:
            return True
        with _WINDOW_LOCK:  # (not while reserve_range uses the descriptor)
            try:
                self.view.release()
                self.mm.close()
            except BufferError:
                return False
            os.close(self.fd)
            self._closed = True
        if self.write_buffer is not None and self._pool is not None:
            self._pool.give_back(self.write_buffer)
            self.write_buffer = None
        return True

    def destroy(self) -> bool:
        """Delete the file; the mapping goes once no reader holds a view."""
        try:
            os.unlink(self.file_name)
        except FileNotFoundError:
            pass
        self.deleted_at = self.deleted_at or time.monotonic()
        return self.close()

    @property
    def closed(self) -> bool:
        return self._closed


class TransientStorePool:
    """Write buffers lent to new commit log files (``transientStorePoolEnable``)."""

    def __init__(self, count: int, file_size: int) -> None:
        self._free = [bytearray(file_size) for _ in range(count)]
        self._lock = threading.Lock()

    def borrow(self) -> bytearray | None:
        with self._lock:
            return self._free.pop() if self._free else None

    def give_back(self, buf: bytearray) -> None:
        with self._lock:
            self._free.append(buf)

    def available(self) -> int:
        with self._lock:
            return len(self._free)


class MappedFileQueue:
    """The ordered files of one commit log or consume queue."""

    # the files slotted: a DLedger read's room check (rmq._fast.dledger_append
    # ``room_covered``) reads them at their slot for each queue; the rest in the dict
    __slots__ = ("mapped_files", "__dict__", "__weakref__")

    def __init__(
        self, store_paths: list[str] | str, mapped_file_size: int, allocator=None,
        read_only_paths: list[str] | None = None, random_access: bool = False,
        reserve: bool = True, window: bool = False,
    ) -> None:
        self.store_paths = [store_paths] if isinstance(store_paths, str) else list(store_paths)
        self.read_only_paths = list(read_only_paths or [])
        self.mapped_file_size = mapped_file_size
        self.allocator = allocator
        self.random_access = random_access  # files mapped MADV_RANDOM (see _MADV_RANDOM)
        # files made with their blocks reserved whole (else sparse: MappedFile's ``reserve``)
        self.reserve = reserve
        # files kept sparse, each written within its reserved blocks (MappedFile's
        # ``window``); every file but the last is reserved whole (``reserve_last``)
        self.window = window
        self.mapped_files: list[MappedFile] = []
        self.flushed_where = 0
        self.committed_where = 0
        self.store_timestamp = 0
        self.pool: TransientStorePool | None = None
        self._lock = threading.Lock()
        self._hanged: list[MappedFile] = []
        self._reported: set[MappedFile] = set()
        self._populate_seen: int | None = None  # end of the appends at the last populate_ahead
        self._populate_target = 0  # end offset populate_ahead asked for last
        # the least populate_ahead keeps populated ahead (None: POPULATE_AHEAD_MIN)
        self.populate_ahead_min: int | None = None
        # the appender keeps zeros written ahead of its appends to the last
        # file (MappedFile.zero_ahead): populate_ahead has nothing to do
        self.zero_ahead = False
        # the last file creation failed for want of disk space (cleared by the next one made)
        self.no_space = False
        self.last_error = ""  # why the last file creation failed

    # --- load ----------------------------------------------------------------------
    def load(self) -> bool:
        """Map every existing file (sorted by name); a file of the wrong size
        fails the load as 4.9.8 does."""
        names: list[str] = []
        for d in self.store_paths + self.read_only_paths:
            if os.path.isdir(d):
                for n in os.listdir(d):
                    if n.isdigit():
                        names.append(os.path.join(d, n))
                    elif n.endswith(".tmp") and n[:-4].isdigit():
                        os.unlink(os.path.join(d, n))  # creation cut short by a crash
        names.sort(key=os.path.basename)
        files = []
        for path in names:
            size = os.path.getsize(path)
            if size != self.mapped_file_size:
                log.warning("%s length %d not matched message store config value %d, please check it manually",
                            path, size, self.mapped_file_size)
                for f in files:
                    f.close()
                return False
            mf = MappedFile(path, self.mapped_file_size, window=self.window)
            mf.set_positions(self.mapped_file_size)
            files.append(mf)
        self._random_tail(files)
        self.mapped_files = files
        return True

    def reserve_last(self) -> bool:
        """Reserve the blocks of the last file, where appends go on.  Files made
        by rmq are reserved when created; one written sparse by an older broker
        is not, and a write into a hole the disk cannot fill is a SIGBUS.
        False (and ``no_space``) when the disk has no room for it.

        Windowed files (``window``) are written within their reserved blocks
        whatever they hold, so the last one is left as it is.  Those before it
        are reserved whole: a put's room check reads only the last file, and
        one made ahead before a crash can leave the file before it partly
        reserved."""
        files = self.mapped_files
        if self.window:
            for mf in files[:-1]:
                if mf.reserved_to < mf.file_size and not mf.reserve():
                    self.no_space = True
                    return False
            return True
        if files and not files[-1].reserve():
            self.no_space = True
            return False
        return True

    # --- file lookup ---------------------------------------------------------------
    def _path_for(self, offset: int) -> str:
        dirs = sorted(self.store_paths)
        d = dirs[(offset // self.mapped_file_size) % len(dirs)] if len(dirs) > 1 else dirs[0]
        return os.path.join(d, offset_to_file_name(offset))

    def get_first_mapped_file(self) -> MappedFile | None:
        files = self.mapped_files
        return files[0] if files else None

    def get_last_mapped_file(self, start_offset: int = 0, need_create: bool = False) -> MappedFile | None:
        files = self.mapped_files
        last = files[-1] if files else None
        if not need_create or (last is not None and not last.is_full()):
            return last
        create_offset = start_offset - start_offset % self.mapped_file_size if last is None \
            else last.file_from_offset + self.mapped_file_size
        return self._create(create_offset)

    def create_at(self, offset: int) -> MappedFile | None:
        """Make the file starting at ``offset`` now, ahead of the write that
        needs it (DispatchRoom); None, with ``no_space`` telling whether the
        disk was full, when it cannot be made."""
        return self._create(offset, quiet=True)

    def _create(self, offset: int, quiet: bool = False) -> MappedFile | None:
        path = self._path_for(offset)
        nxt = self._path_for(offset + self.mapped_file_size)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            if self.allocator is not None:
                mf = self.allocator.take(path, nxt, self.mapped_file_size, self.pool)
            else:
                mf = MappedFile(path, self.mapped_file_size, random_access=self.random_access,
                                reserve=self.reserve, window=self.window)
        except OSError as e:
            self.last_error = f"create mapped file {path} failed: {e}"
            if not quiet:  # a put making it ahead is refused, and says so once (DispatchRoom)
                log.error("%s", self.last_error)
            self.no_space = e.errno in NO_ROOM
            return None
        self.no_space = False
        if not self.mapped_files:
            mf.first_create_in_queue = True
        elif self.random_access:
            self.mapped_files[-1].end_random_access()  # full now (see _MADV_RANDOM)
        with self._lock:
            self.mapped_files = self.mapped_files + [mf]
        return mf

    def find_mapped_file_by_offset(self, offset: int, return_first_on_not_found: bool = False) -> MappedFile | None:
        files = self.mapped_files
        if not files:
            return None
        first = files[0]
        idx = offset // self.mapped_file_size - first.file_from_offset // self.mapped_file_size
        if 0 <= idx < len(files):
            mf = files[idx]
            if mf.file_from_offset <= offset < mf.file_from_offset + self.mapped_file_size:
                return mf
        for mf in files:
            if mf.file_from_offset <= offset < mf.file_from_offset + self.mapped_file_size:
                return mf
        return first if return_first_on_not_found else None

    # --- offsets -----------------------------------------------------------------------
    def get_min_offset(self) -> int:
        files = self.mapped_files
        return files[0].file_from_offset if files else -1

    def get_max_offset(self) -> int:
        """Readable end of the queue."""
        files = self.mapped_files
        return files[-1].file_from_offset + files[-1].read_position() if files else 0

    def get_max_wrote_position(self) -> int:
        files = self.mapped_files
        return files[-1].file_from_offset + files[-1].wrote_position if files else 0

    def remain_how_many_data_to_commit(self) -> int:
        return self.get_max_wrote_position() - self.committed_where

    def remain_how_many_data_to_flush(self) -> int:
        return self.get_max_offset() - self.flushed_where

    def mapped_memory_size(self) -> int:
        return len(self.mapped_files) * self.mapped_file_size

    # --- flush / commit ----------------------------------------------------------------
    def flush(self, least_pages: int) -> bool:
        """Flush the file holding ``flushed_where``; True when nothing moved.
        A file syncs only its pages from the flushed position to what is
        readable, and only with ``least_pages`` of them pending (0: any).
        A queue with nothing written since its last flush answers at once
        when pages are asked for: the consume-queue flusher asks every queue
        of the store every round, most of them idle."""
        where = self.flushed_where
        if least_pages > 0:
            files = self.mapped_files
            if files:
                last = files[-1]
                if where == last.file_from_offset + last.read_position():
                    return True
        mf = self.find_mapped_file_by_offset(where, where == 0)
        if mf is None:
            return True
        ts = mf.store_timestamp
        where = mf.file_from_offset + mf.flush(least_pages)
        result = where == self.flushed_where
        self.flushed_where = where
        if least_pages == 0:
            self.store_timestamp = ts
        return result

    def populate_ahead(self) -> None:
        """Keep the page cache filled ahead of the appends to the last file,
        by twice what was appended since the last call (at least
        ``populate_ahead_min``, else POPULATE_AHEAD_MIN, at most
        POPULATE_AHEAD_MAX), so that appends between two flush rounds never
        fault on an uncached page.  Called by the commit log's flush thread
        each round."""
        files = self.mapped_files
        if not files or self.zero_ahead:
            return
        mf = files[-1]
        wrote = mf.wrote_position
        end = mf.file_from_offset + wrote
        moved = end - self._populate_seen if self._populate_seen is not None else 0
        self._populate_seen = end
        least = POPULATE_AHEAD_MIN if self.populate_ahead_min is None else self.populate_ahead_min
        target = wrote + min(POPULATE_AHEAD_MAX, max(least, 2 * moved))
        # a request the allocator dropped (it was busy) is asked for again
        target = max(target, self._populate_target - mf.file_from_offset)
        self._populate_target = mf.file_from_offset + target
        if self.allocator is not None:
            self.allocator.populate(mf, target)  # on its thread
        else:
            mf.populate(target)

    def commit(self, least_pages: int) -> bool:
        mf = self.find_mapped_file_by_offset(self.committed_where, self.committed_where == 0)
        if mf is None:
            return True
        where = mf.file_from_offset + mf.commit(least_pages)
        result = where == self.committed_where
        self.committed_where = where
        return result

    # --- truncation / deletion ----------------------------------------------------------
    def truncate_dirty_files(self, offset: int) -> None:
        """Drop files starting after ``offset``; the file containing it gets its
        positions set there (stale bytes behind stay, as in 4.9.8)."""
        keep = []
        for mf in self.mapped_files:
            tail = mf.file_from_offset + self.mapped_file_size
            if tail > offset:
                if offset >= mf.file_from_offset:
                    mf.set_positions(offset % self.mapped_file_size)
                    keep.append(mf)
                else:
                    self._destroy(mf)
            else:
                keep.append(mf)
        self._random_tail(keep)  # appends go on in the file holding ``offset``
        with self._lock:
            self.mapped_files = keep

    def _random_tail(self, files: list[MappedFile]) -> None:
        """A ``random_access`` queue's file appends go on (the last of
        ``files``) advised MADV_RANDOM (see _MADV_RANDOM)."""
        if files and self.random_access and _MADV_RANDOM is not None:
            try:
                files[-1].mm.madvise(_MADV_RANDOM)
            except (OSError, ValueError) as e:  # closed meanwhile: nothing to advise
                log.debug("madvise of %s failed: %s", files[-1].file_name, e)

    def delete_last_mapped_file(self) -> None:
        files = self.mapped_files
        if files:
            with self._lock:
                self.mapped_files = files[:-1]
            self._destroy(files[-1])

    def remove_files(self, victims: list[MappedFile]) -> None:
        gone = set(map(id, victims))
        with self._lock:
            self.mapped_files = [mf for mf in self.mapped_files if id(mf) not in gone]

    def _destroy(self, mf: MappedFile) -> None:
        if not mf.destroy():
            self._hanged.append(mf)

    def retry_hanged(self, interval_forcibly_ms: int = 120_000) -> int:
        """Unmap deleted files whose readers have gone; returns how many are left.

        4.9.8 unmaps a file still in use once ``destroyMapedFileIntervalForcibly``
        has passed since its deletion; rmq never unmaps under a reader's view (a
        read through it would crash the process), so a file held that long is
        reported, once: its blocks stay allocated until the reader lets go."""
        now = time.monotonic()
        left = []
        for mf in self._hanged:
            if mf.close():
                continue
            left.append(mf)
            if mf.deleted_at and now - mf.deleted_at >= interval_forcibly_ms / 1000 and \
                    mf not in self._reported:
                self._reported.add(mf)
                log.warning("%s was deleted %.0f s ago but a reader still maps it: its %d bytes stay "
                            "on disk until the reader lets go", mf.file_name, now - mf.deleted_at,
                            mf.file_size)
        self._hanged = left
        self._reported &= set(left)
        return len(left)

    def delete_expired_file_by_time(
        self, expired_ms: int, delete_interval_ms: int, clean_immediately: bool, max_files: int = 10
    ) -> int:
        """Delete files (never the last) older than ``expired_ms`` by mtime, or
        any when ``clean_immediately``; stops at the first one kept."""
        files = self.mapped_files[:-1]
        deleted: list[MappedFile] = []
        now = time.time() * 1000
        for mf in files:
            if now >= mf.last_modified() * 1000 + expired_ms or clean_immediately:
                deleted.append(mf)
                self._destroy(mf)
                if len(deleted) >= max_files:
                    break
                if delete_interval_ms > 0:
                    time.sleep(delete_interval_ms / 1000)
            else:
                break
        self.remove_files(deleted)
        return len(deleted)

    def delete_expired_file_by_offset(self, offset: int, unit_size: int, read_last_offset) -> int:
        """Consume-queue style deletion: a file (never the last) goes when the
        physical offset of its last entry is below ``offset``."""
        files = self.mapped_files[:-1]
        deleted: list[MappedFile] = []
        for mf in files:
            max_phy = read_last_offset(mf, self.mapped_file_size - unit_size)
            if max_phy is not None and max_phy < offset:
                deleted.append(mf)
                self._destroy(mf)
            else:
                break
        self.remove_files(deleted)
        return len(deleted)

    def shutdown(self) -> None:
        for mf in self.mapped_files:
            if not mf.close():
                self._hanged.append(mf)

    def destroy(self) -> None:
        files = self.mapped_files
        with self._lock:
            self.mapped_files = []
        for mf in files:
            self._destroy(mf)
        self.flushed_where = 0
        self.committed_where = 0
        for d in self.store_paths:
            try:
                os.rmdir(d)
            except OSError:
                pass
