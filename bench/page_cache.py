"""A page cache that is already full, as on a broker that has run for a while.

A broker that has stored more than the machine's memory gets its new
commit-log pages by reclaiming old, clean page cache.  A benchmark on a
freshly booted machine (or after deleting the last run's stores) gets them
from free memory instead, and on a virtual machine with free page reporting
(``/sys/module/page_reporting``) free memory is memory the host took back:
its first touch is a fault the host serves, about 2 µs per KiB on this
machine kind (``bench/page_floor.py``), charged to whichever thread touches
it -- the broker's loop.  ``bench/run.py --full-page-cache`` uses a
``PageCacheFiller`` to measure the steady state instead: before each
scenario, a file beside the stores is grown until the machine has little
free memory left, and flushed so its pages are clean and cheap to reclaim.
A ``sparse`` filler grows a file of holes and reads it instead: the same
clean pages of zeros in the page cache, and no disk blocks: for a disk
that must not take a file of the machine's memory.

Reclaim has a price of its own, paid by the kernel's ``kswapd`` threads
(or by the allocating thread when they fall behind: then it is in the
broker's figure); ``kswapd_seconds`` reads theirs, so a report can put it
beside the broker's.
"""

from __future__ import annotations

import os
from pathlib import Path

from bench.cpu import stat_cpu_ticks

MiB = 1 << 20
GiB = 1 << 30
# how much free memory a full page cache leaves (the kernel keeps its own
# watermarks below this; the broker and the load process fit in it)
LEAVE_FREE = 256 * MiB
# the filler never takes the filesystem below this much free space
LEAVE_DISK = 4 * GiB
CHUNK = 64 * MiB
READ = 1 * MiB  # a sparse filler's read size


def meminfo(field: str) -> int:
    """One /proc/meminfo figure in bytes (``MemFree``, ``Cached``...)."""
    with open("/proc/meminfo") as f:
        for line in f:
            name, _, rest = line.partition(":")
            if name == field:
                return int(rest.split()[0]) * 1024
    raise KeyError(f"/proc/meminfo has no {field}")


def reclaimed_pages() -> int:
    """Pages the kernel has reclaimed since boot (/proc/vmstat ``pgsteal_*``)."""
    total = 0
    with open("/proc/vmstat") as f:
        for line in f:
            name, _, value = line.partition(" ")
            if name.startswith("pgsteal_"):
                total += int(value)
    return total


def kswapd_seconds() -> float:
    """CPU seconds (user + system) the kernel's page-reclaim threads have used."""
    total = 0
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            ticks = stat_cpu_ticks(f"/proc/{pid}/stat")
            if ticks is not None and ticks[0].startswith("kswapd"):
                total += ticks[1]
    return total / os.sysconf("SC_CLK_TCK")


class PageCacheFiller:
    """Keeps the page cache full with one file of zeros at ``path``."""

    def __init__(self, path: Path, leave_free: int = LEAVE_FREE,
                 leave_disk: int = LEAVE_DISK, max_size: int | None = None,
                 sparse: bool = False) -> None:
        self.path = Path(path)
        self.leave_free = leave_free
        self.leave_disk = leave_disk
        self.sparse = sparse
        # the page cache cannot hold more than the machine's memory
        self.max_size = meminfo("MemTotal") if max_size is None else max_size

    def top_up(self) -> int:
        """Grow the file until the page cache is full, then flush it; returns
        the bytes added.  Full means free memory is down to ``leave_free``
        or the kernel has begun to reclaim (it keeps some free memory of its
        own, so free memory alone may never get that low); the file also
        stays below ``max_size`` (the machine's memory) and leaves ``leave_disk`` of the
        filesystem free.  Pages already cached stay; reclaim takes the
        oldest first, and the file's are older than the next scenario's.
        A sparse file takes no disk blocks: it is extended by a hole and the
        hole read, which caches clean zero pages without writing any."""
        # one buffer for the whole fill: no new memory of its own per chunk
        buf = bytearray(READ) if self.sparse else bytes(CHUNK)
        added = 0
        reclaimed = reclaimed_pages()
        fd = os.open(self.path, (os.O_RDWR if self.sparse else os.O_WRONLY | os.O_APPEND)
                     | os.O_CREAT, 0o600)
        try:
            while (meminfo("MemFree") > self.leave_free + CHUNK
                   and reclaimed_pages() == reclaimed
                   and os.fstat(fd).st_size + CHUNK <= self.max_size):
                if not self.sparse:
                    fs = os.statvfs(self.path)
                    if fs.f_bavail * fs.f_frsize < self.leave_disk + CHUNK:
                        break
                added += self._grow(fd, buf)
            if not self.sparse:
                os.fdatasync(fd)  # clean pages: reclaim drops them without writing
        finally:
            os.close(fd)
        return added

    def _grow(self, fd: int, buf: bytes | bytearray) -> int:
        """One CHUNK more of the file, in the page cache: ``buf`` is CHUNK
        zeros to write, or (sparse) a buffer to read the new hole into."""
        if not self.sparse:
            return os.write(fd, buf)
        end = os.fstat(fd).st_size
        os.ftruncate(fd, end + CHUNK)
        done = 0
        while done < CHUNK:
            n = os.preadv(fd, [buf], end + done)
            if not n:
                break
            done += n
        return done

    def top_up_said(self) -> str:
        """``top_up`` before a load, and the line a bench prints of it: what
        was added, the filler's size and the free memory left."""
        added = self.top_up()
        return (f"page cache topped up by {added / MiB:,.0f} MiB (filler "
                f"{self.size() / MiB:,.0f} MiB, MemFree {meminfo('MemFree') / MiB:,.0f} MiB)")

    def size(self) -> int:
        return self.path.stat().st_size if self.path.exists() else 0

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)

    def __enter__(self) -> PageCacheFiller:
        return self

    def __exit__(self, *exc) -> None:
        self.remove()
