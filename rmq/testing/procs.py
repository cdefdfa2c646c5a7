"""Real processes on loopback for integration tests.

``RmqProcess`` starts an rmq entry point (``python -m rmq.namesrv.startup``...)
in its own process group, waits until its TCP port accepts connections, keeps
its output in a log file for failure reports, and always stops it.
"""

from __future__ import annotations

import functools
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections import deque
from pathlib import Path

# Ranges free_port handed out lately.  A test often draws several ranges
# before it starts anything (a master and a slave broker): each is free when
# drawn, so without this memory two of them could overlap and the second
# server would fail to bind.
_GIVEN: deque[range] = deque(maxlen=64)
# Ranges drawn with ``keep=True``: a port a test module picks when it is
# imported is bound only when the module runs, maybe hundreds of draws later,
# long after it left ``_GIVEN``; until then it is free, so any later draw
# (a broker's listenPort-2 .. listenPort+1) could take it.  These stay out
# of every draw for the life of the process.
_KEPT: list[range] = []


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def _all_free(base: int, span: int) -> bool:
    if any(base < r.stop and r.start < base + span for r in (*_GIVEN, *_KEPT)):
        return False
    for p in range(base, base + span):
        with socket.socket() as t:
            try:
                t.bind(("127.0.0.1", p))
            except OSError:
                return False
    return True


def free_port(count: int = 1, span: int = 1, keep: bool = False) -> int:
    """A loopback port ``p`` such that ``p .. p+span-1`` are all free now and
    overlap no range this process was given lately.

    ``span`` lets a broker test reserve listenPort-2 .. listenPort+1 at once.
    ``keep``: the range is bound only much later (a module-level constant),
    so no later draw of this process may overlap it.
    Ports are drawn below the kernel's ephemeral range: a port from that range
    can be taken as the local port of any outgoing connection (the suite makes
    thousands) between this check and the server's bind.
    """
    low, _ = _ephemeral_range()
    floor, top = _worker_slice(20000, low)
    if top - floor >= 1000:
        rng = random.Random()
        for _ in range(500):
            base = rng.randrange(floor, top - span)
            if _all_free(base, span):
                return _give(base, span, keep)
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + span <= 65535 and _all_free(base, span):
            return _give(base, span, keep)
    raise RuntimeError("no free port range found")


def _worker_slice(floor: int, top: int) -> tuple[int, int]:
    """The part of ``floor .. top`` this pytest-xdist worker draws from.

    ``_GIVEN`` is per process: two workers could each find the same range free
    and both start a server on it before either binds.  Giving every worker its
    own slice of the range makes that impossible; outside xdist it is the whole.
    """
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    if not worker.startswith("gw") or count <= 1:
        return floor, top
    index = int(worker[2:]) % count
    width = (top - floor) // count
    return floor + index * width, floor + (index + 1) * width


def _give(base: int, span: int, keep: bool = False) -> int:
    (_KEPT if keep else _GIVEN).append(range(base, base + span))
    return base


def wait_port(port: int, host: str = "127.0.0.1", timeout: float = 20.0, proc=None) -> None:
    """Block until ``host:port`` accepts a connection (or the process died)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before listening on {port}")
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listening on {host}:{port} after {timeout}s")


def affinity_setter(cpus: set[int] | None):
    """A ``preexec_fn`` restricting the child to ``cpus`` (None: no restriction)."""
    if not cpus:
        return None
    return functools.partial(os.sched_setaffinity, 0, set(cpus))


class RmqProcess:
    """One rmq process (``module`` run with ``-m``) with its output captured."""

    def __init__(self, module: str, args: list[str], log_path: Path, env: dict | None = None,
                 cwd: str | None = None, cpus: set[int] | None = None) -> None:
        self.module = module
        self.args = list(args)
        self.log_path = Path(log_path)
        self.env = dict(os.environ, **(env or {}))
        self.cwd = cwd
        # CPU affinity set in the child before exec, so every thread it ever
        # starts inherits it (benchmarks pin the broker to one core)
        self.cpus = set(cpus) if cpus else None
        self.proc: subprocess.Popen | None = None

    def start(self, wait_for_port: int | tuple[int, ...] | None = None,
              timeout: float = 30.0) -> RmqProcess:
        """Spawn the process; with ``wait_for_port``, return once each given
        port accepts connections (a broker opens its main port a moment before
        its fast port)."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", self.module, *self.args],
            stdout=log, stderr=subprocess.STDOUT, env=self.env, cwd=self.cwd,
            start_new_session=True, preexec_fn=affinity_setter(self.cpus),
        )
        log.close()
        if wait_for_port is not None:
            ports = (wait_for_port,) if isinstance(wait_for_port, int) else wait_for_port
            try:
                for port in ports:
                    wait_port(port, timeout=timeout, proc=self.proc)
            except Exception:
                self.kill()
                raise RuntimeError(f"{self.module} did not start:\n{self.output()}") from None
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def output(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-20000:]
        except OSError:
            return ""

    def signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM and wait (graceful); SIGKILL when it does not stop in time."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL the whole process group (what a crash looks like)."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(10)

    def wait(self, timeout: float) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout)


def run_cli(module: str, args: list[str], timeout: float = 30.0,
            env: dict | None = None) -> subprocess.CompletedProcess:
    """Run an rmq command line to completion (for -h / -p / bad-config tests)."""
    return subprocess.run(
        [sys.executable, "-m", module, *args], capture_output=True, text=True,
        timeout=timeout, env=dict(os.environ, **(env or {})),
    )
