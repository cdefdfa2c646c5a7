# cython: language_level=3, boundscheck=False, wraparound=False, binding=False
"""Compiled twins of the mapped-file helpers in rmq/store/mapped_file.py:
msync of a range of a shared mapping with the GIL released, and the
isOSPageCacheBusy rule (STORE_FORMAT.md 10.7)."""

from libc.stdint cimport uint8_t, uintptr_t

cdef extern from "sys/mman.h" nogil:
    int msync(void *addr, size_t length, int flags)
    int MS_SYNC

cdef extern from "errno.h":
    int errno

import os

cdef enum:
    PAGE = 4096


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


def page_cache_busy(long long begin_ms, long long now_ms, long long timeout_ms):
    cdef long long diff = now_ms - begin_ms
    return diff < 10000000 and diff > timeout_ms
