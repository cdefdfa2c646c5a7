# cython: language_level=3, boundscheck=False, wraparound=False, binding=False
"""Compiled twins of the mapped-file helpers in rmq/store/mapped_file.py:
msync of a range of a shared mapping and the populating of a range ahead of
the appends, both with the GIL released, and the isOSPageCacheBusy rule
(STORE_FORMAT.md 10.7)."""

from libc.stdint cimport uint8_t, uintptr_t
from posix.time cimport CLOCK_REALTIME_COARSE, clock_gettime, timespec

cdef extern from "sys/mman.h" nogil:
    int msync(void *addr, size_t length, int flags)
    int madvise(void *addr, size_t length, int advice)
    int MS_SYNC

cdef extern from "fcntl.h" nogil:
    int posix_fadvise(int fd, long long offset, long long length, int advice)
    int POSIX_FADV_WILLNEED

cdef extern from "sched.h" nogil:
    int sched_yield()

cdef extern from "errno.h":
    int errno
    int EINVAL

import os

cdef enum:
    PAGE = 4096
    MADV_POPULATE_WRITE_ = 23  # Linux 5.14+; older kernels answer EINVAL
    POPULATE_CHUNK = 1048576  # ~0.1-1 ms of kernel work between yields
    FADVISE_CHUNK = 262144  # the twin's _POPULATE_CHUNK


cdef inline bint _page_range(Py_ssize_t n, Py_ssize_t *start, Py_ssize_t *end) noexcept:
    """Clamp ``[start, end)`` to a mapping of ``n`` bytes and start it on a
    page; False when nothing is left."""
    if start[0] < 0:
        start[0] = 0
    if end[0] > n:
        end[0] = n
    if end[0] <= start[0]:
        return False
    start[0] -= start[0] % PAGE
    return True


def sync_range(mm, int fd, Py_ssize_t start, Py_ssize_t end):
    """Force ``[start, end)`` of the mapping ``mm`` to disk (msync, page aligned)."""
    cdef const uint8_t[::1] view = mm
    if not _page_range(view.shape[0], &start, &end):
        return
    cdef uintptr_t base = <uintptr_t>&view[0]
    cdef int rc
    with nogil:
        rc = msync(<void *>(base + start), <size_t>(end - start), MS_SYNC)
    if rc != 0:
        raise OSError(errno, os.strerror(errno))


def populate(mm, int fd, Py_ssize_t start, Py_ssize_t end):
    """Fault ``[start, end)`` of the shared mapping in, writable, on this
    thread (MADV_POPULATE_WRITE: the kernel's own write faults, which leave
    every byte as it is), so that appends there later neither fault nor stall
    the event loop; the same page cache work the appender's faults would do,
    done here without the GIL.  It goes a chunk at a time and yields the CPU
    between chunks: zero-filling a round's pages is milliseconds of kernel
    time, and an event loop woken meanwhile on the same core should not wait
    for all of it.  Kernels without MADV_POPULATE_WRITE get the twin's page
    cache fill (POSIX_FADV_WILLNEED in chunks)."""
    cdef const uint8_t[::1] view = mm
    if not _page_range(view.shape[0], &start, &end):
        return
    cdef uintptr_t base = <uintptr_t>&view[0]
    cdef int err = 0
    cdef bint fallback = False
    cdef Py_ssize_t pos = start, step
    with nogil:
        while pos < end and err == 0:
            step = FADVISE_CHUNK if fallback else POPULATE_CHUNK
            if end - pos < step:
                step = end - pos
            if fallback:
                err = posix_fadvise(fd, pos, step, POSIX_FADV_WILLNEED)
            elif madvise(<void *>(base + pos), <size_t>step, MADV_POPULATE_WRITE_) != 0:
                err = errno
                if err == EINVAL and pos == start:  # not known to this kernel
                    err = 0
                    fallback = True
                    continue
            pos += step
            sched_yield()
    if err != 0:
        raise OSError(err, os.strerror(err))


def page_cache_busy(long long begin_ms, long long timeout_ms):
    """isOSPageCacheBusy against the coarse wall clock, read here in C."""
    cdef timespec ts
    clock_gettime(CLOCK_REALTIME_COARSE, &ts)
    cdef long long diff = ts.tv_sec * 1000 + ts.tv_nsec // 1000000 - begin_ms
    return diff < 10000000 and diff > timeout_ms
