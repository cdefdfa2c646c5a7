"""Profile a broker under load with py-spy.

``record`` (default): start a name server + broker on free loopback ports (or
attach to a running broker with ``--pid``), drive a load from a separate
process (default: 1 KiB sync sends, 64 in flight), and after the warm-up attach
``py-spy record`` to the broker for ``--duration`` seconds.  Writes under
``bench/out/profile-<stamp>/``: ``flame.svg`` (open it in a browser),
``profile.raw`` (collapsed stacks: speedscope.app and flamegraph.pl read it),
optionally ``profile.speedscope.json``, and ``top.txt`` with the hottest
frames by own and by total samples (also printed).

``dump``: print every thread's current stack of a running process
(``py-spy dump``), for a broker that looks stuck; find it by ``--pid`` or by
the ``--port`` it listens on.

``sched``: where the broker's and the load's wall time goes while the load
runs (``--msg-rate`` caps it, e.g. at half the peak): per thread, CPU time
run, time spent runnable but waiting for a CPU (the run queue), voluntary
and involuntary context switches (``/proc/<pid>/task/*/schedstat`` and
``status``), and the machine's CPU pressure.  A latency tail made of
run-queue waits and involuntary switches of the event-loop thread comes from
CPU contention, not from the broker's own code paths; background threads
that run long would show up here too.

    .venv/bin/python -m bench.profiling [record] [--duration 10] [--twins] [--native]
        [--kind send|consume] [--size 1024] [--batch 1] [--inflight 64]
        [--flush SYNC_FLUSH] [--pid PID --namesrv HOST:PORT]
    .venv/bin/python -m bench.profiling dump (--pid PID | --port PORT) [--locals]
    .venv/bin/python -m bench.profiling sched [--duration 5] [--msg-rate 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path

from bench.cluster import Cluster, create_topic
from bench.load import LoadSpec
from bench.modes import OUT_DIR, ROOT, mode_env

TOPIC = "BenchTopic"


def py_spy() -> str:
    """The py-spy next to this interpreter (the venv's), else the one on PATH."""
    local = Path(sys.executable).with_name("py-spy")
    found = str(local) if local.exists() else shutil.which("py-spy")
    if not found:
        raise SystemExit("py-spy not found: install the bench extra (pip install py-spy)")
    return found


# a frame on every stack of the event-loop thread (asyncio.run's runner)
LOOP_FRAME = "Runner.run (asyncio/runners.py"


def _tally(stacks: list[tuple[list[str], int]], limit: int) -> list[str]:
    own: Counter[str] = Counter()
    total: Counter[str] = Counter()
    samples = 0
    for frames, n in stacks:
        samples += n
        own[frames[-1]] += n
        for frame in set(frames):
            total[frame] += n
    out = [f"{samples} samples\n", f"by own samples (top {limit}):"]
    out += [f"{100 * n / samples:6.1f}%  {f}" for f, n in own.most_common(limit)]
    out += ["", f"by total samples (top {limit}):"]
    out += [f"{100 * n / samples:6.1f}%  {f}" for f, n in total.most_common(limit)]
    return out


def top_frames(raw: Path, limit: int = 25) -> str:
    """Hottest frames of a collapsed-stack file: by own samples (the frame was
    on top) and by total samples (the frame was anywhere on the stack); then
    the same for the event-loop thread alone, when the threads are mixed (a
    --native or --idle recording also samples threads parked in a wait)."""
    stacks = []
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            stacks.append((stack.split(";"), int(count)))
    if not stacks:
        return "no samples (was the process busy? try --idle)\n"
    out = _tally(stacks, limit)
    loop = [(frames, n) for frames, n in stacks if any(f.startswith(LOOP_FRAME) for f in frames)]
    if loop and len(loop) < len(stacks):
        out += ["", "", "event-loop thread only:"] + _tally(loop, limit)
    return "\n".join(out) + "\n"


def record(pid: int, out_dir: Path, duration: float, rate: int, formats: list[str],
           native: bool, idle: bool, lines: bool = False) -> list[Path]:
    """One ``py-spy record`` per output format.  Python frames only: all at once
    and non-blocking (the broker is never paused), so every file covers the
    same window.  With ``native``: py-spy must stop the process to unwind its
    C stacks, and only one tracer can attach at a time, so the formats are
    recorded one after another (consecutive windows; see load_seconds)."""
    exe = py_spy()
    suffix = {"flamegraph": "flame.svg", "raw": "profile.raw",
              "speedscope": "profile.speedscope.json"}
    procs, paths = [], []
    for fmt in formats:
        path = out_dir / suffix[fmt]
        cmd = [exe, "record", "--pid", str(pid), "--duration", str(int(duration)),
               "--rate", str(rate), "--format", fmt, "--output", str(path)]
        cmd.append("--native" if native else "--nonblocking")
        if idle:
            cmd.append("--idle")
        if not lines:
            cmd.append("--function")  # one frame per function, not per line
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        paths.append(path)
        if native:
            _finish_record(fmt, proc, duration)
        else:
            procs.append((fmt, proc))
    for fmt, proc in procs:
        _finish_record(fmt, proc, duration)
    return paths


def load_seconds(duration: float, formats: list[str], native: bool) -> float:
    """How long the load must run after the warm-up: one recording window, or
    one per format when native recording takes them in turn."""
    return duration * (len(formats) if native else 1) + 2


def _finish_record(fmt: str, proc: subprocess.Popen, duration: float) -> None:
    out, _ = proc.communicate(timeout=duration + 120)
    if proc.returncode != 0:
        raise SystemExit(f"py-spy record ({fmt}) failed with {proc.returncode}:\n{out[-2000:]}"
                         "\n(py-spy needs ptrace: run as root or with CAP_SYS_PTRACE, or set "
                         "kernel.yama.ptrace_scope=0)")


def _start_load(spec: LoadSpec, env: dict) -> subprocess.Popen:
    import json

    cmd = [sys.executable, "-m", "bench.load", "--load", json.dumps(asdict(spec))]
    return subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def cmd_record(args) -> int:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out_dir = Path(args.out) if args.out else OUT_DIR / f"profile-{stamp}"
    out_dir.mkdir(parents=True, exist_ok=True)
    env = mode_env("twin" if args.twins else "compiled")
    cluster = None
    paths: list[Path] = []
    try:
        if args.pid:
            if not args.namesrv:
                raise SystemExit("--pid needs --namesrv (where the load finds the broker)")
            pid, namesrv = args.pid, args.namesrv
        else:
            conf = {"flushDiskType": args.flush} if args.flush else {}
            cluster = Cluster(env=env, broker_conf=conf).start()
            pid, namesrv = cluster.broker_pid, cluster.namesrv_addr
            asyncio.run(create_topic(cluster.broker_addr, namesrv, args.topic, 8))
        seconds = load_seconds(args.duration, args.formats, args.native)
        if args.kind == "consume" and cluster is not None:
            print("writing a backlog to consume ...", flush=True)
            fill = LoadSpec("send", namesrv, args.topic, seconds=seconds, warmup=0.5,
                            size=args.size, batch=32, inflight=8)
            _start_load(fill, env).communicate(timeout=seconds + 120)
        spec = LoadSpec(args.kind, namesrv, args.topic, seconds=seconds,
                        warmup=args.warmup, size=args.size, batch=args.batch,
                        inflight=args.inflight, broker_pid=pid)
        build = "twins (RMQ_NO_EXTENSIONS=1)" if args.twins else "compiled"
        print(f"broker pid {pid} ({build}); load: {args.kind} {args.size} B x {args.batch}, "
              f"{args.inflight} in flight", flush=True)
        load = _start_load(spec, env)
        try:
            time.sleep(args.warmup)
            if load.poll() is not None:
                raise SystemExit(f"the load stopped early:\n{load.stderr.read()[-3000:]}")
            print(f"recording {args.duration:g} s at {args.rate} Hz ...", flush=True)
            paths = record(pid, out_dir, args.duration, args.rate, args.formats, args.native,
                           args.idle, args.lines)
            stdout, stderr = load.communicate(timeout=seconds + 120)
        finally:
            if load.poll() is None:
                load.kill()
                load.wait()
        if load.returncode == 0 and stdout.strip():
            (out_dir / "load.json").write_text(stdout.strip().splitlines()[-1] + "\n")
            print("load:", stdout.strip().splitlines()[-1])
        elif load.returncode != 0:
            print(f"load failed:\n{stderr[-2000:]}", file=sys.stderr)
    finally:
        if cluster is not None:
            cluster.stop()
    for p in paths:
        print(f"wrote {p}")
    raw = out_dir / "profile.raw"
    if raw.exists():
        summary = top_frames(raw, args.top)
        (out_dir / "top.txt").write_text(summary)
        print(summary)
    return 0


def thread_sched(pid: int) -> dict[str, tuple[str, int, int, int, int]]:
    """tid -> (name, ns run, ns waiting for a CPU, voluntary, involuntary switches)."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        base = f"/proc/{pid}/task/{tid}"
        try:
            with open(f"{base}/comm") as f:
                name = f.read().strip()
            with open(f"{base}/schedstat") as f:
                run, wait, _slices = (int(x) for x in f.read().split())
            with open(f"{base}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
        except (OSError, ValueError):
            continue  # the thread ended meanwhile
        out[tid] = (name, run, wait, int(fields["voluntary_ctxt_switches"]),
                    int(fields["nonvoluntary_ctxt_switches"]))
    return out


def cpu_pressure_total_us() -> int | None:
    """``some`` total of /proc/pressure/cpu (µs some task waited for a CPU)."""
    try:
        with open("/proc/pressure/cpu") as f:
            return int(f.readline().rsplit("total=", 1)[1])
    except (OSError, IndexError, ValueError):
        return None


def sched_report(label: str, before: dict, after: dict, seconds: float) -> list[str]:
    lines = []
    for tid, (name, run, wait, vol, invol) in sorted(after.items()):
        r0, w0, v0, n0 = before.get(tid, (name, 0, 0, 0, 0))[1:]
        if run - r0 < 1_000_000:  # under 1 ms of CPU: idle helper threads
            continue
        lines.append(f"{label:<7} {name[:15]:<15} {tid:>7} {(run - r0) / 1e6 / seconds:9.1f} "
                     f"{(wait - w0) / 1e6 / seconds:9.1f} {(vol - v0) / seconds:9.0f} "
                     f"{(invol - n0) / seconds:9.0f}")
    return lines


def cmd_sched(args) -> int:
    env = mode_env("twin" if args.twins else "compiled")
    conf = {"flushDiskType": args.flush} if args.flush else {}
    cluster = Cluster(env=env, broker_conf=conf).start()
    try:
        pid = cluster.broker_pid
        asyncio.run(create_topic(cluster.broker_addr, cluster.namesrv_addr, args.topic, 8))
        spec = LoadSpec("send", cluster.namesrv_addr, args.topic, seconds=args.duration + 1,
                        warmup=args.warmup, size=args.size, batch=args.batch,
                        inflight=args.inflight, rate=args.msg_rate, broker_pid=pid)
        load = _start_load(spec, env)
        try:
            time.sleep(args.warmup + 0.5)
            b0, l0, p0 = thread_sched(pid), thread_sched(load.pid), cpu_pressure_total_us()
            t0 = time.monotonic()
            time.sleep(args.duration)
            b1, l1, p1 = thread_sched(pid), thread_sched(load.pid), cpu_pressure_total_us()
            seconds = time.monotonic() - t0
            stdout, stderr = load.communicate(timeout=args.duration + 120)
        finally:
            if load.poll() is None:
                load.kill()
                load.wait()
    finally:
        cluster.stop()
    print(f"per second of wall time over {seconds:.1f} s (threads with >= 1 ms CPU):")
    print(f"{'process':<7} {'thread':<15} {'tid':>7} {'run ms':>9} {'wait ms':>9} "
          f"{'vol/s':>9} {'invol/s':>9}")
    for line in sched_report("broker", b0, b1, seconds) + sched_report("load", l0, l1, seconds):
        print(line)
    if p0 is not None and p1 is not None:
        print(f"cpu pressure (some task waiting for a CPU): {(p1 - p0) / 1e4 / seconds:.1f}% "
              "of the time")
    if load.returncode == 0 and stdout.strip():
        print("load:", stdout.strip().splitlines()[-1])
    else:
        print(f"load failed:\n{stderr[-2000:]}", file=sys.stderr)
        return 1
    return 0


def pid_listening_on(port: int) -> int:
    import psutil

    for conn in psutil.net_connections(kind="tcp"):
        if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN:
            if conn.pid:
                return conn.pid
    raise SystemExit(f"no process listens on port {port}")


def cmd_dump(args) -> int:
    if not args.pid and not args.port:
        raise SystemExit("dump needs --pid or --port")
    pid = args.pid or pid_listening_on(args.port)
    cmd = [py_spy(), "dump", "--pid", str(pid)]
    if args.locals:
        cmd.append("--locals")
    if args.native:
        cmd.append("--native")
    return subprocess.run(cmd, timeout=120).returncode


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("command", nargs="?", default="record", choices=("record", "dump", "sched"))
    ap.add_argument("--pid", type=int, help="a running broker (record: also give --namesrv)")
    ap.add_argument("--port", type=int, help="dump: the process listening on this port")
    ap.add_argument("--namesrv", help="record with --pid: the name server the load uses")
    ap.add_argument("--duration", type=float, default=10.0, help="seconds recorded (default 10)")
    ap.add_argument("--warmup", type=float, default=2.0, help="load seconds before recording")
    ap.add_argument("--rate", type=int, default=200, help="samples per second (default 200)")
    ap.add_argument("--twins", action="store_true",
                    help="broker and load with RMQ_NO_EXTENSIONS=1: every hot path a Python frame")
    ap.add_argument("--native", action="store_true",
                    help="also sample C/Cython frames (compiled build: shows time inside _fast)")
    ap.add_argument("--idle", action="store_true", help="include idle (waiting) threads")
    ap.add_argument("--lines", action="store_true",
                    help="one frame per source line instead of per function")
    ap.add_argument("--locals", action="store_true", help="dump: show local variables")
    ap.add_argument("--kind", default="send", choices=("send", "consume"))
    ap.add_argument("--msg-rate", type=float, default=0.0,
                    help="sched: cap the load at this many msgs/s (default: as fast as it goes)")
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--inflight", type=int, default=64)
    ap.add_argument("--topic", default=TOPIC)
    ap.add_argument("--flush", choices=("ASYNC_FLUSH", "SYNC_FLUSH"),
                    help="flushDiskType of the started broker")
    ap.add_argument("--formats", default="flamegraph,raw",
                    help="py-spy formats, comma-separated: flamegraph,raw,speedscope")
    ap.add_argument("--top", type=int, default=25, help="frames listed in top.txt")
    ap.add_argument("--out", help="output directory (default bench/out/profile-<time>)")
    args = ap.parse_args(argv)
    args.formats = [f for f in args.formats.split(",") if f]
    bad = [f for f in args.formats if f not in ("flamegraph", "raw", "speedscope")]
    if bad or not args.formats:
        ap.error(f"unknown --formats: {','.join(bad) or '(none)'}")
    if args.duration < 1 or args.size < 1 or args.batch < 1 or args.inflight < 1:
        ap.error("--duration, --size, --batch and --inflight must be >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.command == "dump":
        return cmd_dump(args)
    return cmd_sched(args) if args.command == "sched" else cmd_record(args)


if __name__ == "__main__":
    sys.exit(main())
