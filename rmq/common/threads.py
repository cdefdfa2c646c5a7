"""Kernel-visible names of the broker's and name server's own threads.

Python's ``threading.Thread(name=...)`` only names the Python object: the
kernel still calls every thread by the process's name, so ``top -H``, ``perf``,
``py-spy --native`` and ``/proc/<pid>/task/<tid>/comm`` cannot tell the flush
thread from the allocation thread.  Each background thread calls
``set_native_thread_name`` first thing, and then the per-thread CPU of a
running broker can be read (and attributed) from outside.
"""

from __future__ import annotations

import ctypes
import sys

PR_SET_NAME = 15  # <linux/prctl.h>
# the kernel keeps 16 bytes including the terminating NUL
NATIVE_NAME_MAX = 15

_prctl = None  # the libc function, looked up once; False when unavailable


def native_name(name: str) -> str:
    """What the kernel will show for ``name``: its first 15 bytes (UTF-8)."""
    return name.encode("utf-8")[:NATIVE_NAME_MAX].decode("utf-8", "ignore")


def _libc_prctl():
    global _prctl
    if _prctl is None:
        try:
            fn = ctypes.CDLL(None, use_errno=True).prctl
            fn.restype = ctypes.c_int
            _prctl = fn
        except (OSError, AttributeError):
            _prctl = False
    return _prctl


def set_native_thread_name(name: str) -> bool:
    """Give the calling thread the kernel name ``name`` (its first 15 bytes).

    Linux only (prctl PR_SET_NAME); elsewhere, or when the call fails, nothing
    happens: a name is a diagnostic aid and must never stop a thread from
    running.  Returns whether the name was set."""
    if not sys.platform.startswith("linux"):
        return False
    prctl = _libc_prctl()
    if not prctl:
        return False
    raw = name.encode("utf-8")[:NATIVE_NAME_MAX]
    try:
        return prctl(PR_SET_NAME, ctypes.c_char_p(raw), 0, 0, 0) == 0
    except (OSError, ctypes.ArgumentError):
        return False
