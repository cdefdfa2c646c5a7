"""CPU and memory of the processes under measurement: /proc readings per process
and per thread over a measured window, and the pinning of broker and load
generator to their own cores."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS / RssAnon / RssFile / VmHWM of ``pid`` in bytes, from /proc/<pid>/status.

    RssAnon is the figure that matters for a broker: the mapped store's pages
    are RssFile and belong to the page cache."""
    out: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
                out[key] = int(rest.split()[0]) * 1024
    return out


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds consumed so far by ``pid`` (and its threads)."""
    import psutil

    t = psutil.Process(pid).cpu_times()
    return t.user + t.system


def system_seconds(pid: int) -> float:
    """System (kernel) CPU seconds consumed so far by ``pid`` (and its threads)."""
    import psutil

    return psutil.Process(pid).cpu_times().system


def read_write_calls(pid: int) -> tuple[int, int]:
    """(read, write) system calls of ``pid`` so far, /proc/<pid>/io's ``syscr``
    and ``syscw``: a broker's socket reads and writes, plus its few file ones."""
    calls = {}
    with open(f"/proc/{pid}/io") as f:
        for line in f:
            key, _, value = line.partition(":")
            calls[key] = int(value)
    return calls["syscr"], calls["syscw"]


@dataclass(slots=True)
class CallWindow:
    """Read and write system calls and kernel CPU of a process over a
    measured window.  A lane's cost per message is its cost per read over the
    messages a read brings, and how many arrive per read is set by the two
    sides' timing (and the machine's other work), not by the code measured:
    a figure per message means little without the messages per read beside it."""

    pid: int
    start: tuple[int, int, float] = (0, 0, 0.0)
    reads: int = 0
    writes: int = 0
    system: float = 0.0

    def begin(self) -> None:
        self.start = (*read_write_calls(self.pid), system_seconds(self.pid))

    def end(self) -> None:
        reads, writes = read_write_calls(self.pid)
        self.reads, self.writes = reads - self.start[0], writes - self.start[1]
        self.system = system_seconds(self.pid) - self.start[2]


@dataclass(slots=True)
class CpuWindow:
    """CPU seconds of a process over a measured window (start .. stop)."""

    pid: int
    start: float = 0.0
    seconds: float = 0.0

    def begin(self) -> None:
        self.start = cpu_seconds(self.pid)

    def end(self) -> float:
        self.seconds = cpu_seconds(self.pid) - self.start
        return self.seconds


# Pinning (bench/run.py by default): the broker and its name server on one
# core, the load generator on the other, so neither steals the other's CPU
# and the broker's figures are those of one core.
BROKER_CPUS = frozenset({0})
LOAD_CPU = 1


def can_pin() -> bool:
    """True when this machine has the two CPUs the pinning uses and this
    process may run on both (nothing is pinned otherwise)."""
    if not hasattr(os, "sched_setaffinity") or (os.cpu_count() or 1) < 2:
        return False
    return {*BROKER_CPUS, LOAD_CPU} <= os.sched_getaffinity(0)


def pin_to_broker_cpus() -> None:
    """Run this process where bench/run.py runs the broker, when it can pin:
    the floor scripts measure what the broker's core would pay."""
    if can_pin():
        os.sched_setaffinity(0, BROKER_CPUS)


def stat_cpu_ticks(path: str) -> tuple[str, int] | None:
    """(kernel name, utime + stime in clock ticks) from a /proc ``stat`` file;
    None when the process or thread is gone."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError:
        return None
    # "tid (comm) state ppid ...": comm may hold spaces and parentheses
    head, _, rest = raw.rpartition(b")")
    comm = head.partition(b"(")[2].decode(errors="replace")
    fields = rest.split()
    return comm, int(fields[11]) + int(fields[12])  # utime, stime


def thread_cpu_ticks(pid: int) -> dict[int, tuple[str, int]]:
    """{tid: (kernel name, utime + stime in clock ticks)} of every thread of ``pid``.

    Read from /proc/<pid>/task/*/stat; a thread that ends while it is read is
    left out."""
    out: dict[int, tuple[str, int]] = {}
    base = f"/proc/{pid}/task"
    for entry in os.listdir(base):
        ticks = stat_cpu_ticks(f"{base}/{entry}/stat")
        if ticks is not None:
            out[int(entry)] = ticks
    return out


@functools.cache
def _known_thread_names() -> tuple[str, ...]:
    """The full names the broker's threads give themselves; the kernel keeps
    only the first 15 bytes of each."""
    from rmq.store import allocate, clean, flush, index, stats  # noqa: F401 - subclasses
    from rmq.store.service import ServiceThread

    names = {allocate.THREAD_NAME, index.FLUSH_THREAD_NAME}
    todo = [ServiceThread]
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        names.add(cls.name)
    return tuple(sorted(names))


def thread_label(pid: int, tid: int, comm: str) -> str:
    """"loop" for the process's first thread (the event loop), else the
    thread's own name: a 15-byte kernel name is widened back to the one full
    name of the broker's threads it starts (FlushRealTimeSe ->
    FlushRealTimeService)."""
    if tid == pid:
        return "loop"
    if len(comm.encode()) >= 15:
        full = [n for n in _known_thread_names() if n.startswith(comm)]
        if len(full) == 1:
            return full[0]
    return comm


@dataclass(slots=True)
class ThreadCpuWindow:
    """CPU seconds of each thread of a process over a measured window, summed
    by thread name (see ``thread_label``)."""

    pid: int
    start: dict[int, tuple[str, int]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    def begin(self) -> None:
        self.start = thread_cpu_ticks(self.pid)

    def end(self) -> dict[str, float]:
        tick = os.sysconf("SC_CLK_TCK")
        out: dict[str, float] = {}
        for tid, (comm, ticks) in thread_cpu_ticks(self.pid).items():
            before = self.start.get(tid)
            used = ticks - (before[1] if before is not None else 0)
            name = thread_label(self.pid, tid, comm)
            out[name] = out.get(name, 0.0) + used / tick
        self.seconds = out
        return out
