# cython: language_level=3, boundscheck=False, wraparound=False, binding=False
"""Compiled twins of the mapped-file helpers in rmq/store/mapped_file.py:
msync of a range of a shared mapping and the populating of a range ahead of
the appends, both with the GIL released, and the isOSPageCacheBusy rule
(STORE_FORMAT.md 10.7)."""

from libc.stdint cimport uint8_t, uintptr_t

cdef extern from "sys/mman.h" nogil:
    int msync(void *addr, size_t length, int flags)
    int madvise(void *addr, size_t length, int advice)
    int MS_SYNC

cdef extern from "fcntl.h" nogil:
    int posix_fadvise(int fd, long long offset, long long length, int advice)
    int POSIX_FADV_WILLNEED

cdef extern from "errno.h":
    int errno
    int EINVAL

import os

cdef enum:
    PAGE = 4096
    MADV_POPULATE_WRITE_ = 23  # Linux 5.14+; older kernels answer EINVAL
    FADVISE_CHUNK = 262144  # the twin's _POPULATE_CHUNK


def sync_range(mm, int fd, Py_ssize_t start, Py_ssize_t end):
    """Force ``[start, end)`` of the mapping ``mm`` to disk (msync, page aligned)."""
    cdef const uint8_t[::1] view = mm
    cdef Py_ssize_t n = view.shape[0]
    if start < 0:
        start = 0
    if end > n:
        end = n
    if end <= start:
        return
    start -= start % PAGE
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
    done here without the GIL.  Kernels without it get the twin's page-cache
    fill (POSIX_FADV_WILLNEED in chunks)."""
    cdef const uint8_t[::1] view = mm
    cdef Py_ssize_t n = view.shape[0]
    if start < 0:
        start = 0
    if end > n:
        end = n
    start -= start % PAGE
    if end <= start:
        return
    cdef uintptr_t base = <uintptr_t>&view[0]
    cdef int rc, err = 0
    cdef Py_ssize_t pos, step
    with nogil:
        rc = madvise(<void *>(base + start), <size_t>(end - start), MADV_POPULATE_WRITE_)
        if rc != 0:
            err = errno
        if rc != 0 and err == EINVAL:
            err = 0
            pos = start
            while pos < end and err == 0:
                step = end - pos if end - pos < FADVISE_CHUNK else FADVISE_CHUNK
                err = posix_fadvise(fd, pos, step, POSIX_FADV_WILLNEED)
                pos += step
    if err != 0:
        raise OSError(err, os.strerror(err))


def page_cache_busy(long long begin_ms, long long now_ms, long long timeout_ms):
    cdef long long diff = now_ms - begin_ms
    return diff < 10000000 and diff > timeout_ms
