"""Native thread names: the kernel sees the names the broker's threads give
themselves (``top -H``, perf and the benchmarks' per-thread CPU rely on it)."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

from rmq.common import threads
from rmq.common.threads import native_name, set_native_thread_name
from rmq.store.service import ServiceThread

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")


def _comm(tid: int) -> str:
    return Path(f"/proc/self/task/{tid}/comm").read_text().rstrip("\n")


def _in_thread(fn):
    out: list = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join(10)
    return out[0]


def test_native_name_is_the_first_15_bytes():
    assert native_name("IndexFileFlush") == "IndexFileFlush"
    assert native_name("FlushRealTimeService") == "FlushRealTimeSe"
    assert native_name("é" * 10) == "é" * 7  # a character cut in half is dropped


@linux_only
def test_thread_names_itself_and_the_kernel_reads_it_back():
    def run():
        ok = set_native_thread_name("FlushRealTimeService")
        return ok, _comm(threading.get_native_id())

    ok, comm = _in_thread(run)
    assert ok and comm == "FlushRealTimeSe"
    assert _comm(threading.get_native_id()) != "FlushRealTimeSe"  # only the caller is named


@linux_only
def test_service_thread_names_its_native_thread():
    seen: list[str] = []

    class Probe(ServiceThread):
        name = "AllocateMappedFileService"

        def run(self) -> None:
            seen.append(_comm(threading.get_native_id()))

    probe = Probe()
    probe.start()
    probe.shutdown()
    assert seen == ["AllocateMappedF"]


def test_no_op_elsewhere_or_on_failure(monkeypatch):
    monkeypatch.setattr(sys, "platform", "darwin")
    assert set_native_thread_name("x") is False
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(threads, "_prctl", False)  # libc without prctl
    assert set_native_thread_name("x") is False

    def broken(*_args):
        raise OSError("no")

    monkeypatch.setattr(threads, "_prctl", broken)
    assert set_native_thread_name("x") is False
