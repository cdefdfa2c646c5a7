"""The cluster-and-measure part the path benchmarks share (bench.grpc,
bench.pop): a name server + broker of their own in the wanted mode, and one
measured path printed as a JSON line: msgs, seconds, msgs/s and the broker's
CPU µs per message, optionally with py-spy's collapsed stacks of the broker
meanwhile."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from bench.cluster import Cluster
from bench.cpu import cpu_seconds
from bench.modes import mode_env

# ``run(cpu)`` of a path: the messages handled, or (messages, seconds, CPU
# seconds read with ``cpu()`` when the last one was done) when the path
# takes its own marks (a last long poll is then not counted)
Run = Callable[[Callable[[], float]], Awaitable[int | tuple[int, float, float]]]


def start_cluster(twin: bool, broker_conf: dict[str, str],
                  env: dict[str, str] | None = None) -> Cluster:
    """Name server + broker, compiled (or the twins), offsets flushed every 5 s."""
    conf = {"flushConsumerOffsetInterval": "5000", **broker_conf}
    return Cluster(env={**mode_env("twin" if twin else "compiled"), **(env or {})},
                   broker_conf=conf).start()


def py_spy() -> str:
    """py-spy beside this interpreter, else the one on PATH."""
    local = Path(sys.executable).with_name("py-spy")
    return str(local) if local.exists() else (shutil.which("py-spy") or "py-spy")


def figures(what: str, msgs: int, elapsed: float, cpu: float) -> dict:
    """One path's printed figures: messages, seconds, msgs/s and the broker's
    CPU µs per message over windows that took ``elapsed`` seconds and
    ``cpu`` broker CPU seconds in all."""
    return {"path": what, "msgs": msgs, "seconds": round(elapsed, 2),
            "msgs_per_s": round(msgs / max(elapsed, 1e-9)), "broker_cpu_us_per_msg":
            round(cpu / max(msgs, 1) * 1e6, 1)}


async def window(c: Cluster, run: Run, spy: str | None = None) -> tuple[int, float, float]:
    """Run one path once: (messages, seconds, broker CPU seconds) of the
    window (``spy``: py-spy's collapsed stacks of the broker over it, to
    this file)."""
    pid = c.broker.proc.pid
    recorder = None
    if spy:
        recorder = subprocess.Popen([py_spy(), "record", "-p", str(pid), "-f", "raw", "-o", spy,
                                     "-r", "200", "--nonblocking"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        await asyncio.sleep(1)
    cpu0, t0 = cpu_seconds(pid), time.perf_counter()
    got = await run(lambda: cpu_seconds(pid))
    if recorder is not None:
        recorder.send_signal(2)
        recorder.wait(30)
    if isinstance(got, tuple):
        return got[0], got[1], got[2] - cpu0
    return got, time.perf_counter() - t0, cpu_seconds(pid) - cpu0


async def measure(c: Cluster, what: str, run: Run, spy: str | None = None) -> dict:
    """Run one path and print its JSON line (``spy``: write py-spy's collapsed
    stacks of the broker over the run to this file)."""
    out = figures(what, *await window(c, run, spy))
    print(json.dumps(out), flush=True)
    return out
