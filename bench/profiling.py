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

    .venv/bin/python bench/profiling.py [record] [--duration 10] [--twins] [--native]
        [--kind send|consume] [--size 1024] [--batch 1] [--inflight 64]
        [--flush SYNC_FLUSH] [--pid PID --namesrv HOST:PORT]
    .venv/bin/python bench/profiling.py dump (--pid PID | --port PORT) [--locals]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import subprocess
import sys
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import OUT_DIR, Cluster, LoadSpec, create_topic, mode_env  # noqa: E402

TOPIC = "BenchTopic"


def py_spy() -> str:
    """The py-spy next to this interpreter (the venv's), else the one on PATH."""
    local = Path(sys.executable).with_name("py-spy")
    found = str(local) if local.exists() else shutil.which("py-spy")
    if not found:
        raise SystemExit("py-spy not found: install the bench extra (pip install py-spy)")
    return found


def top_frames(raw: Path, limit: int = 25) -> str:
    """Hottest frames of a collapsed-stack file: by own samples (the frame was
    on top) and by total samples (the frame was anywhere on the stack)."""
    own: Counter[str] = Counter()
    total: Counter[str] = Counter()
    samples = 0
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = stack.split(";")
        samples += n
        own[frames[-1]] += n
        for frame in set(frames):
            total[frame] += n
    if not samples:
        return "no samples (was the process busy? try --idle)\n"
    out = [f"{samples} samples\n", f"by own samples (top {limit}):"]
    out += [f"{100 * n / samples:6.1f}%  {f}" for f, n in own.most_common(limit)]
    out += ["", f"by total samples (top {limit}):"]
    out += [f"{100 * n / samples:6.1f}%  {f}" for f, n in total.most_common(limit)]
    return "\n".join(out) + "\n"


def record(pid: int, out_dir: Path, duration: float, rate: int, formats: list[str],
           native: bool, idle: bool, lines: bool = False) -> list[Path]:
    """One ``py-spy record`` per output format, all at once and non-blocking (the
    broker is never paused), so every file covers the same window."""
    exe = py_spy()
    suffix = {"flamegraph": "flame.svg", "raw": "profile.raw",
              "speedscope": "profile.speedscope.json"}
    procs, paths = [], []
    for fmt in formats:
        path = out_dir / suffix[fmt]
        cmd = [exe, "record", "--pid", str(pid), "--duration", str(int(duration)),
               "--rate", str(rate), "--format", fmt, "--output", str(path), "--nonblocking"]
        if native:
            cmd.append("--native")
        if idle:
            cmd.append("--idle")
        if not lines:
            cmd.append("--function")  # one frame per function, not per line
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True))
        paths.append(path)
    for proc, fmt in zip(procs, formats, strict=True):
        out, _ = proc.communicate(timeout=duration + 120)
        if proc.returncode != 0:
            raise SystemExit(f"py-spy record ({fmt}) failed with {proc.returncode}:\n{out[-2000:]}"
                             "\n(py-spy needs ptrace: run as root or with CAP_SYS_PTRACE, or set "
                             "kernel.yama.ptrace_scope=0)")
    return paths


def _start_load(spec: LoadSpec, env: dict) -> subprocess.Popen:
    import json

    cmd = [sys.executable, str(ROOT / "bench" / "common.py"), "--load", json.dumps(asdict(spec))]
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
        if args.kind == "consume" and cluster is not None:
            print("writing a backlog to consume ...", flush=True)
            fill = LoadSpec("send", namesrv, args.topic, seconds=args.duration, warmup=0.5,
                            size=args.size, batch=32, inflight=8)
            _start_load(fill, env).communicate(timeout=args.duration + 120)
        spec = LoadSpec(args.kind, namesrv, args.topic, seconds=args.duration + 2,
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
            stdout, stderr = load.communicate(timeout=args.duration + 120)
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
    ap.add_argument("command", nargs="?", default="record", choices=("record", "dump"))
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
    return cmd_dump(args) if args.command == "dump" else cmd_record(args)


if __name__ == "__main__":
    sys.exit(main())
