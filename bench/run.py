"""The whole benchmark suite in one go (``make bench``).

For each build — compiled extensions, then the pure-Python twins
(``RMQ_NO_EXTENSIONS=1``) — it starts a name server and a broker on free
loopback ports with a fresh store and drives them from a separate load process
running the same build.  The scenarios without a suffix send and pull raw
requests (hand-built SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE / PULL_MESSAGE frames
on one bare connection, ``bench.raw.RawRequests``/``RawPulls``/``RawConnection``),
so that the client costs little of the two cores and the figures are the
broker's capacity; the ``_sdk`` ones go through ``rmq.client``, what an
application sees:

* ``send_1k``          single-message sync sends, 1 KiB, 64 in flight (async flush)
* ``send_1k_1``        the same with one in flight: the round trip of a lone request
* ``send_1k_half``     the same capped at half the rate ``send_1k`` reached (latency at half load)
* ``send_1k_20k``      the same capped at 20,000 msgs/s
* ``batch_32x1k``      SEND_BATCH_MESSAGE of 32 x 1 KiB, 16 in flight
* ``send_1k_sdk``      as ``send_1k`` through the client SDK
* ``batch_32x1k_sdk``  batches of 32 x 1 KiB through the client SDK, 8 in flight
* ``consume``          raw pulls (32 a pull, one per queue outstanding, every message
                       decoded) of a backlog written for it (2 s of batches), from the
                       page cache, re-read in a loop
* ``consume_sdk``      the same backlog through the SDK's LitePullConsumer
* ``e2e_20k``          produce-to-consume latency: raw sends at 20,000 msgs/s whose body
                       starts with the send time, and a long-polling consumer (caught up,
                       its pulls held by the broker) in the same load process
* ``connections``      1,000 idle clients (one HEART_BEAT each): broker RSS / RssAnon
* ``sync_flush_1k``    a second broker with ``flushDiskType=SYNC_FLUSH``, raw 1 KiB, 64 in flight
* ``sync_flush_1k_sdk`` the same through the client SDK
* ``send_1k_1_busy``   a third broker with ``rmqBusyPollMicros=100`` (its loop polls instead of
                       sleeping for 100 µs after each read), raw 1 KiB, one in flight

On a machine with two CPUs or more the broker and its name server run on CPU 0
and the load process on CPU 1 (``--no-pin``: wherever the scheduler puts them),
so that the broker's CPU per message is one core's and the load never takes
it; the broker's CPU is also reported per thread (``/proc/<pid>/task``, by the
names the threads give themselves, "loop" for the event loop).

New commit-log pages cost what the machine's free memory costs to touch
first.  ``--full-page-cache`` measures the steady state of a broker that has
stored more than the machine's memory instead: before each scenario a file
beside the stores is grown until little memory is free (``bench/page_cache.py``),
so that new pages come from reclaiming clean page cache, and the reclaim
threads' CPU per message is reported beside the broker's.

Then it runs the other bench scripts (hot-path micro-benchmarks, broker memory
on a 10 GiB store with 1,000 clients, name server, remoting, store, producer,
consumer), which compare both builds themselves, and writes
``bench/out/results.md`` and ``bench/out/results.json``: msgs/s, MB/s,
avg/p50/p99/max RT, broker CPU µs per message (psutil, measured window only),
broker RSS and RssAnon (/proc/<pid>/status) and the compiled/twin ratio of
every figure.  Everything is on loopback and bounded in time.

    .venv/bin/python -m bench.run [--quick] [--seconds 10] [--only send_1k,consume]
                                  [--modes compiled,twin] [--skip-scripts] [--no-pin]
                                  [--full-page-cache] [--write-each]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

from bench.cluster import Cluster, create_topic
from bench.cpu import BROKER_CPUS, LOAD_CPU, can_pin, proc_status
from bench.flush_floor import measure as flush_floor
from bench.load import LoadSpec, load_in_subprocess
from bench.micro import kernel_bound, verdict
from bench.modes import MODES, OUT_DIR, ROOT, mode_env
from bench.page_cache import PageCacheFiller, kswapd_seconds
from bench.results import git_commit, markdown_table, write_results

TOPIC = "BenchTopic"
# the consume scenario re-reads a backlog of its own, written just before it
# for BACKLOG_SECONDS: small enough to stay in the page cache (the backlog of
# every send scenario together is many GiB, more than the cache keeps hot)
CONSUME_TOPIC = "BenchConsumeTopic"
BACKLOG_SECONDS = 2.0


def _backlog_seconds(args) -> float:
    """How long the consume backlog is written: a quarter in --quick runs, so
    that their short windows still read it to its end (``passes``)."""
    return BACKLOG_SECONDS / 4 if args.quick else BACKLOG_SECONDS
# the e2e scenario's own topic: its consumer reads nothing but stamped messages
E2E_TOPIC = "BenchE2ETopic"
SCENARIOS = ("send_1k", "send_1k_1", "send_1k_half", "send_1k_20k", "batch_32x1k",
             "send_1k_sdk", "batch_32x1k_sdk", "consume", "consume_sdk", "e2e_20k",
             "connections", "sync_flush_1k", "sync_flush_1k_sdk", "send_1k_1_busy")
# the rate of the latency aims (send_1k_20k, e2e_20k)
LATENCY_RATE = 20_000
# the SDK-load counterpart of a raw-load scenario, shown beside its target as information
SDK_OF = {"send_1k": "send_1k_sdk", "batch_32x1k": "batch_32x1k_sdk", "consume": "consume_sdk",
          "sync_flush_1k": "sync_flush_1k_sdk"}
MiB = 1 << 20

# (figure key in a load result, label, scale) in table order; a key ending in
# _ms is shown with three decimals (µs precision)
FIGURES = (
    ("msgs_per_s", "msgs/s", 1),
    ("mb_per_s", "MB/s", 1),
    ("avg_ms", "avg RT ms", 1),
    ("p50_ms", "p50 RT ms", 1),
    ("p99_ms", "p99 RT ms", 1),
    ("max_ms", "max RT ms", 1),
    ("e2e_sent", "e2e sent in window", 1),
    ("e2e_received", "e2e received of them", 1),
    ("e2e_lost", "e2e never received", 1),
    ("e2e_avg_ms", "e2e avg ms", 1),
    ("e2e_p50_ms", "e2e p50 ms", 1),
    ("e2e_p99_ms", "e2e p99 ms", 1),
    ("e2e_max_ms", "e2e max ms", 1),
    ("e2e_caught_up_pulls", "e2e pulls held (sent caught up), share", 1),
    ("e2e_msgs_per_pull", "e2e msgs per pull", 1),
    ("broker_cpu_us_per_msg", "broker CPU µs/msg", 1),
    ("broker_loop_cpu_us_per_msg", "broker loop thread µs/msg", 1),
    ("broker_cpu_util", "broker CPU cores busy", 1),
    ("kswapd_cpu_us_per_msg", "kswapd CPU µs/msg (page reclaim)", 1),
    ("msync_floor_us", "one msync just before, no broker: median µs (bench/flush_floor.py)", 1),
    ("client_cpu_us_per_msg", "client CPU µs/msg", 1),
    ("broker_VmRSS", "broker RSS MiB", 1 / MiB),
    ("broker_RssAnon", "broker RssAnon MiB", 1 / MiB),
    ("connections", "connected clients", 1),
    ("failures", "failures", 1),
)
# per-thread broker CPU rows: "broker thread <name> µs/msg"
THREADS_KEY = "broker_threads_us_per_msg"


class Ratio(float):
    """A target relative to another scenario: ``self`` x that scenario's figure."""

    scenario: str

    def __new__(cls, factor: float, scenario: str) -> Ratio:
        out = super().__new__(cls, factor)
        out.scenario = scenario
        return out


# flushes timed (bench/flush_floor.py, 1 KiB each) before a SYNC_FLUSH scenario
MSYNC_FLOOR_FLUSHES = 100
# scenarios on a broker of their own: (broker settings, sends in flight, raw load)
OWN_BROKER = {
    "sync_flush_1k": ({"flushDiskType": "SYNC_FLUSH"}, 64, True),
    "sync_flush_1k_sdk": ({"flushDiskType": "SYNC_FLUSH"}, 64, False),
    "send_1k_1_busy": ({"rmqBusyPollMicros": "100"}, 1, True),
}

# the aims (compiled build, broker on one core, load on the other),
# checked on the raw-load scenarios, the broker's capacity:
# (scenario, figure key, comparison, value, text)
TARGETS = (
    ("send_1k", "broker_cpu_us_per_msg", "<=", 7.0,
     "single 1 KiB sends, 64 in flight: broker CPU <= 7 µs/msg"),
    ("send_1k_1_busy", "avg_ms", "<=", 0.060,
     "single 1 KiB sends, one in flight, rmqBusyPollMicros=100: avg round trip <= 0.060 ms"),
    ("batch_32x1k", "broker_cpu_us_per_msg", "<=", 1.5,
     "batches of 32 x 1 KiB: broker CPU <= 1.5 µs/msg"),
    ("consume", "msgs_per_s", ">=", 1_000_000,
     "pull from page cache, one consumer: >= 1,000,000 msgs/s"),
    ("e2e_20k", "e2e_p50_ms", "<", 1.0,
     "produce-to-consume, long polling, 20,000 msgs/s: p50 < 1 ms"),
    ("e2e_20k", "e2e_p99_ms", "<", 2.0,
     "produce-to-consume, long polling, 20,000 msgs/s: p99 < 2 ms"),
    ("sync_flush_1k", "msgs_per_s", ">=", Ratio(0.5, "send_1k"),
     "SYNC_FLUSH (group commit), 64 in flight: >= 0.5 x send_1k msgs/s"),
    ("connections", "broker_RssAnon", "<", 300 * MiB, "broker RssAnon with the clients: < 300 MiB"),
)

# the other bench scripts: their options for a quick run (besides the JSON option);
# (option, value or None for a flag), passed only when the script's --help has it
SCRIPTS: dict[str, list[tuple[str, str | None]]] = {
    "micro": [("--quick", None)],
    "memory": [("--quick", None)],
    "namesrv": [("--duration", "1"), ("--rounds", "1")],
    "remoting": [("--quick", None)],
    "store": [("--quick", None)],
    "producer": [("--quick", None), ("--duration", "2")],
    "consumer": [("--quick", None), ("--messages", "50000"), ("--duration", "10")],
}


# --- broker scenarios ------------------------------------------------------------------
def _spec(args, kind: str, cluster: Cluster, **kw) -> LoadSpec:
    base = {"kind": kind, "namesrv": cluster.namesrv_addr, "topic": TOPIC,
            "seconds": args.seconds, "warmup": args.warmup, "broker_pid": cluster.broker_pid,
            "broker_addr": cluster.broker_addr, "write_each": args.write_each}
    return LoadSpec(**{**base, **kw})


def _log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _load_cpu(cluster: Cluster) -> int | None:
    """The CPU of the load process: the other one when the broker is pinned."""
    return LOAD_CPU if cluster.pinned else None


def _fill(filler: PageCacheFiller | None) -> None:
    """--full-page-cache: top the page cache up before a load."""
    if filler is not None:
        _log("  " + filler.top_up_said())


def _run(name: str, spec: LoadSpec, env: dict, results: dict, cluster: Cluster,
         filler: PageCacheFiller | None = None) -> dict | None:
    """One load; a failing scenario is recorded, the suite goes on."""
    _fill(filler)
    _log(f"  {name} ...")
    kswapd0, t0 = kswapd_seconds(), time.monotonic()
    try:
        res = load_in_subprocess(spec, env, cpu=_load_cpu(cluster))
    except Exception as exc:  # noqa: BLE001 - reported in the table
        results[name] = {"error": str(exc)[-2000:]}
        _log(f"  {name} failed: {str(exc).splitlines()[0]}")
        return None
    if filler is not None and res.get("msgs_per_s"):
        # over the whole load process (warm-up included) at the measured rate
        msgs = res["msgs_per_s"] * (time.monotonic() - t0)
        res["kswapd_cpu_us_per_msg"] = (kswapd_seconds() - kswapd0) / msgs * 1e6
    res["pinned"] = cluster.pinned
    results[name] = res
    if "msgs_per_s" in res:
        _log(f"  {name}: {res['msgs_per_s']:,.0f} msgs/s, avg {res['avg_ms']:.3f} ms, "
             f"p99 {res['p99_ms']:.3f} ms, broker {res.get('broker_cpu_us_per_msg', 0):.1f} "
             f"µs/msg (loop {res.get('broker_loop_cpu_us_per_msg', 0):.1f}), "
             f"failures {res['failures']}")
        if "e2e_p50_ms" in res:
            _log(f"  {name}: produce-to-consume p50 {res['e2e_p50_ms']:.3f} ms, p99 "
                 f"{res['e2e_p99_ms']:.3f} ms, {res['e2e_received']:,} of {res['e2e_sent']:,} "
                 "received")
    else:
        _log(f"  {name}: {res.get('connections')} clients, RssAnon "
             f"{res.get('broker_RssAnon', 0) / MiB:.0f} MiB")
    return res


def broker_scenarios(args, mode: str, results: dict) -> None:
    """Every selected broker scenario for one build, into ``results``
    ({scenario: figures}; what finished stays there if a later step fails)."""
    env = mode_env(mode)
    wanted = set(args.only)
    async_ones = [s for s in SCENARIOS if s in wanted and s not in OWN_BROKER]
    if async_ones:
        with Cluster(env=env, broker_conf=dict(args.broker_conf), pin=args.pin) as cluster:
            asyncio.run(create_topic(cluster.broker_addr, cluster.namesrv_addr, TOPIC, 8))
            results["_broker_start"] = {f"broker_{k}": v
                                        for k, v in proc_status(cluster.broker_pid).items()}
            results["_pinned"] = cluster.pinned

            def run(name: str, kind: str, **kw) -> dict | None:
                return _run(name, _spec(args, kind, cluster, **kw), env, results, cluster,
                            args.filler)

            peak = None
            if "send_1k" in wanted or "send_1k_half" in wanted:
                peak = run("send_1k", "send", inflight=64, raw=True)
            if "send_1k_1" in wanted:
                run("send_1k_1", "send", inflight=1, raw=True)
            if "send_1k_half" in wanted and peak and peak["msgs_per_s"] > 0:
                run("send_1k_half", "send", inflight=64, raw=True, rate=peak["msgs_per_s"] / 2)
            if "send_1k_20k" in wanted:
                run("send_1k_20k", "send", inflight=64, raw=True, rate=LATENCY_RATE)
            if "batch_32x1k" in wanted:
                run("batch_32x1k", "send", inflight=16, batch=32, raw=True)
            if "send_1k_sdk" in wanted:
                run("send_1k_sdk", "send", inflight=64)
            if "batch_32x1k_sdk" in wanted:
                run("batch_32x1k_sdk", "send", inflight=8, batch=32)
            if "consume" in wanted or "consume_sdk" in wanted:
                asyncio.run(create_topic(cluster.broker_addr, cluster.namesrv_addr,
                                         CONSUME_TOPIC, 8))
                _fill(args.filler)
                load_in_subprocess(_spec(args, "send", cluster, topic=CONSUME_TOPIC,
                                         inflight=16, batch=32, raw=True, broker_pid=0,
                                         warmup=0.0, seconds=_backlog_seconds(args)), env,
                                   cpu=_load_cpu(cluster))
            if "consume" in wanted:
                run("consume", "consume", topic=CONSUME_TOPIC, inflight=8, raw=True)
            if "consume_sdk" in wanted:
                run("consume_sdk", "consume", topic=CONSUME_TOPIC, inflight=8)
            if "e2e_20k" in wanted:
                asyncio.run(create_topic(cluster.broker_addr, cluster.namesrv_addr,
                                         E2E_TOPIC, 8))
                run("e2e_20k", "e2e", topic=E2E_TOPIC, inflight=64, raw=True,
                    rate=LATENCY_RATE)
            if "connections" in wanted:
                run("connections", "connections", inflight=args.clients, seconds=1.0)
            results["_store_bytes"] = _dir_size(cluster.store_dir / "commitlog")
    for name, (extra, inflight, raw) in OWN_BROKER.items():
        if name not in wanted:
            continue
        with Cluster(env=env, broker_conf={**dict(args.broker_conf), **extra},
                     pin=args.pin) as cluster:
            asyncio.run(create_topic(cluster.broker_addr, cluster.namesrv_addr, TOPIC, 8))
            # the disk's flush moves from minute to minute; a SYNC_FLUSH figure is
            # read against the floor taken just before it
            floor = (flush_floor([1], [1], MSYNC_FLOOR_FLUSHES)[0]["median_us"]
                     if extra.get("flushDiskType") == "SYNC_FLUSH" else None)
            res = _run(name, _spec(args, "send", cluster, inflight=inflight, raw=raw), env,
                       results, cluster, args.filler)
            if res is not None and floor is not None:
                res["msync_floor_us"] = floor


def _dir_size(path: Path) -> int:
    """Bytes actually allocated under ``path`` (sparse mapped files count what is written)."""
    total = 0
    for p in path.rglob("*"):
        if p.is_file():
            total += p.stat().st_blocks * 512
    return total


# --- the other bench scripts -------------------------------------------------------------
def _json_option(help_text: str) -> str | None:
    """"path" when the script takes ``--json PATH``, "flag" for a bare ``--json``
    (JSON on stdout), None when it has no JSON output."""
    m = re.search(r"--json(?:[ =]([A-Z_]+))?", help_text)
    if not m:
        return None
    return "path" if m.group(1) else "flag"


def run_script(name: str, quick: bool, timeout: float) -> dict:
    """Run bench.<name> (it compares compiled and twins itself) and collect its
    figures: its JSON when it offers one, else the printed text (parsed where we
    know the format)."""
    path = ROOT / "bench" / f"{name}.py"
    if not path.exists():
        return {"status": "missing"}
    env = mode_env("compiled")
    env.pop("RMQ_REQUIRE_EXTENSIONS")  # the script chooses per child itself
    helptext = subprocess.run([sys.executable, "-m", f"bench.{name}", "--help"], capture_output=True,
                              text=True, env=env, cwd=ROOT, timeout=60).stdout
    extra: list[str] = []
    for opt, value in SCRIPTS.get(name, []) if quick else []:
        if re.search(rf"{re.escape(opt)}\b", helptext):  # only options it has
            extra += [opt] if value is None else [opt, value]
    jopt = _json_option(helptext)
    jpath = OUT_DIR / f"{name}.json"
    cmd = [sys.executable, "-m", f"bench.{name}", *extra]
    if jopt == "path":
        cmd += ["--json", str(jpath.relative_to(ROOT))]
    elif jopt == "flag":
        cmd += ["--json"]
    _log(f"  {shlex.join(cmd[1:])}")
    t0 = time.monotonic()
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT,
                             timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"status": f"timed out after {timeout:g} s", "command": shlex.join(cmd[1:])}
    doc: dict = {"command": shlex.join([".venv/bin/python", *cmd[1:]]),
                 "wall_s": time.monotonic() - t0, "json": jopt or "none"}
    (OUT_DIR / f"{name}.txt").write_text(out.stdout + out.stderr)
    if out.returncode != 0:
        doc["status"] = f"exit {out.returncode}: {(out.stderr or out.stdout).strip()[-500:]}"
        return doc
    doc["status"] = "ok"
    try:
        if jopt == "path":
            doc["figures"] = json.loads(jpath.read_text())
        elif jopt == "flag":
            doc["figures"] = last_json(out.stdout)
        elif name == "remoting":
            doc["figures"] = parse_remoting(out.stdout)
        else:
            doc["text"] = out.stdout
    except (OSError, ValueError, IndexError) as exc:
        doc["status"] = f"output not understood: {exc}"
        doc["text"] = out.stdout
    return doc


def last_json(text: str):
    """The JSON document a script printed last: its whole output, its last line,
    or the last block starting with a line that begins with ``{``."""
    text = text.strip()
    try:
        return json.loads(text)
    except ValueError:
        pass
    lines = text.splitlines()
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith("{"):
            try:
                return json.loads("\n".join(lines[i:]))
            except ValueError:
                continue
    raise ValueError("no JSON document in the output")


def parse_remoting(text: str) -> dict:
    """bench/remoting.py prints a table; pick its figures out of it."""
    figures: dict = {"compiled": {}, "twin": {}}
    for m in re.finditer(r"^\s*(\d+) \|\s*([\d,]+)\s+([\d.]+) \|\s*([\d,]+)\s+([\d.]+) \|", text,
                         re.M):
        n = m.group(1)
        figures["compiled"][f"e2e_{n}_inflight_req_per_s"] = float(m.group(2).replace(",", ""))
        figures["twin"][f"e2e_{n}_inflight_req_per_s"] = float(m.group(4).replace(",", ""))
    for m in re.finditer(r"^\s*(\w+) \((\d+) B\): twin ([\d.]+) \+ ([\d.]+) us \| compiled "
                         r"([\d.]+) \+ ([\d.]+) us", text, re.M):
        key = f"codec_{m.group(1).lower()}_encode_decode_us"
        figures["twin"][key] = float(m.group(3)) + float(m.group(4))
        figures["compiled"][key] = float(m.group(5)) + float(m.group(6))
    if not figures["compiled"]:
        raise ValueError("no figures found in bench/remoting.py output")
    return figures


def flatten(doc, prefix: str = "") -> dict[str, float]:
    """Numeric leaves of a nested JSON document as dotted keys."""
    out: dict[str, float] = {}
    if isinstance(doc, dict):
        for k, v in doc.items():
            out.update(flatten(v, f"{prefix}{k}."))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            key = v.get("inflight", v.get("serialization", i)) if isinstance(v, dict) else i
            out.update(flatten(v, f"{prefix}{key}."))
    elif isinstance(doc, (int, float)) and not isinstance(doc, bool):
        out[prefix[:-1]] = float(doc)
    return out


def script_rows(figures: dict) -> list[tuple]:
    """(figure, compiled, twin, ratio) rows of a script's {"compiled":..., "twin(s)":...}."""
    comp = flatten(figures.get("compiled", {}))
    twin = flatten(figures.get("twin", figures.get("twins", {})))
    rows = []
    for key in sorted(set(comp) | set(twin)):
        c, t = comp.get(key), twin.get(key)
        rows.append((key, c, t, c / t if c is not None and t else None))
    if not rows:  # not split by build: list whatever it measured
        rows = [(k, v, None, None) for k, v in sorted(flatten(figures).items())]
    return rows


# --- report ------------------------------------------------------------------------------
def _met(value: float | None, op: str, target: float) -> bool | None:
    if value is None:
        return None
    if op == ">=":
        return value >= target
    return value <= target if op == "<=" else value < target


def _ms(value: float | None) -> str | None:
    """A time in ms with three decimals: the round trips are tens of µs."""
    return None if value is None else f"{value:.3f}"


def _ratio(v: float | None, base: float | None) -> tuple[float | None, str | None]:
    """``v / base`` and how it is shown: "0.50x (v / base)"."""
    if v is None or not base:
        return None, None
    return v / base, f"{v / base:.2f}x ({v:,.0f} / {base:,.0f})"


def target_rows(comp: dict) -> list[tuple]:
    """(aim, measured, met, SDK load) of every target on the compiled figures;
    a ``Ratio`` target is measured as the ratio of the two scenarios' figures."""
    rows = []
    for scen, key, op, target, text in TARGETS:
        v = comp.get(scen, {}).get(key)
        sdk = comp.get(SDK_OF[scen], {}).get(key) if scen in SDK_OF else None
        if isinstance(target, Ratio):
            ratio, shown = _ratio(v, comp.get(target.scenario, {}).get(key))
            if scen in SDK_OF and target.scenario in SDK_OF:
                sdk = _ratio(sdk, comp.get(SDK_OF[target.scenario], {}).get(key))[1]
            rows.append((text, shown, _met(ratio, op, float(target)), sdk))
            continue
        scale = 1 / MiB if key.startswith("broker_Rss") else 1
        if key.endswith("_ms"):
            rows.append((text, _ms(v), _met(v, op, target), _ms(sdk)))
        else:
            rows.append((text, None if v is None else v * scale, _met(v, op, target),
                         None if sdk is None else sdk * scale))
    return rows


def scenario_rows(scen: str, per_mode: dict[str, dict | None]) -> list[tuple]:
    """(scenario, figure, compiled, twin, compiled/twin) rows of one scenario:
    its figures, then the broker's CPU per message of each of its threads that
    used any in the window (the JSON has them all)."""
    rows = []
    for m, res in per_mode.items():
        if res and "error" in res:
            rows.append((scen, f"ERROR ({m})", res["error"].splitlines()[0][:150], None, None))
    for key, label, scale in FIGURES:
        vals = {m: (r or {}).get(key) for m, r in per_mode.items()}
        if all(v is None for v in vals.values()):
            continue
        c = None if vals.get("compiled") is None else vals["compiled"] * scale
        t = None if vals.get("twin") is None else vals["twin"] * scale
        ratio = c / t if c is not None and t else None
        if key.endswith("_ms"):
            c, t = _ms(c), _ms(t)
        rows.append((scen, label, c, t, ratio))
    threads = {m: (r or {}).get(THREADS_KEY) or {} for m, r in per_mode.items()}
    names = sorted({n for per in threads.values() for n in per},
                   key=lambda n: -max(per.get(n, 0.0) for per in threads.values()))
    for name in names:
        c, t = threads.get("compiled", {}).get(name), threads.get("twin", {}).get(name)
        if not c and not t:
            continue
        rows.append((scen, f"broker thread {name} µs/msg", c, t,
                     c / t if c is not None and t else None))
    return rows


def micro_table(items: list[dict]) -> str:
    """bench/micro.py's rows: ns per call of each side, twin ÷ compiled, the 5x
    aim (or the kernel floor that rules it out)."""
    rows = [(it["op"], it["input"], it["twin_ns"], it.get("compiled_ns"), it.get("ratio"),
             verdict(it)) for it in items]
    met = sum(1 for it in items if it.get("meets_5x"))
    bound = kernel_bound(items)
    return (markdown_table(("operation", "input", "twin ns/op", "compiled ns/op",
                            "twin/compiled", "meets 5x"), rows)
            + f"\n{met} of {len(items) - len(bound)} code-bound hot-path items at >= 5x "
            f"(one process, best of N); kernel-bound: {', '.join(bound) or 'none'}.\n")


def render(doc: dict) -> str:
    b = doc["broker"]
    pinned = doc.get("pinned")
    pin_text = (f"broker and name server pinned to CPU {','.join(map(str, pinned['broker_cpus']))}, "
                f"load process to CPU {pinned['load_cpu']}" if pinned
                else "nothing pinned (client and broker share the CPUs as the scheduler likes)")
    lines = [f"# rmq benchmark — {doc['date']}, commit {doc['commit']}\n",
             f"Command: `{doc['command']}`  ",
             f"Machine: {doc['machine']}; client and broker share it "
             f"(load average at start {doc['loadavg_start']}, at end {doc['loadavg_end']}; "
             "other work on the machine lowers every figure).  ",
             f"Pinning: {pin_text}.  ",
             "Page cache: " + ("topped up before each scenario until the machine had "
                               "little free memory (`--full-page-cache`): new pages came "
                               "from reclaim.  " if doc.get("full_page_cache") else
                               "as the machine had it (new pages from free memory).  "),
             "Raw sends: " + ("each request in its own write (`--write-each`).  "
                              if doc.get("write_each") else
                              "the requests of one turn of the load's loop in one write.  "),
             "compiled/twin = compiled figure ÷ twin figure (`RMQ_NO_EXTENSIONS=1`).\n",
             "## Targets (compiled build; the aims are checked on the raw load, "
             "the broker's capacity; the SDK load's figure beside them is information)\n"]
    rows = target_rows(b.get("compiled", {}))
    mem = doc["scripts"].get("memory", {}).get("figures", {}).get("compiled", {})
    if mem.get("mem_with_clients"):
        anon = mem["mem_with_clients"]["RssAnon"]
        gib = mem.get("store", {}).get("commitlog_bytes", 0) / (1 << 30)
        rows.append((f"broker RssAnon, {gib:.1f} GiB store + {mem['clients']['connected']:,} "
                     "clients (bench/memory.py): < 300 MiB", anon, anon < 300, None))
    lines.append(markdown_table(("aim", "measured (raw load)", "met", "SDK load"), rows))
    lines.append("\n## Broker scenarios\n")
    rows = []
    for scen in SCENARIOS:
        per_mode = {m: b.get(m, {}).get(scen) for m in doc["modes"]}
        if any(per_mode.values()):
            rows += scenario_rows(scen, per_mode)
    lines.append(markdown_table(("scenario", "figure", "compiled", "twin", "compiled/twin"), rows))
    for m in doc["modes"]:
        if b.get(m, {}).get("_error"):
            lines.append(f"\n**{m} build stopped early:** {b[m]['_error'].splitlines()[0]}")
        size = b.get(m, {}).get("_store_bytes")
        if size:
            lines.append(f"\nStore written ({m}): {size / MiB:,.0f} MiB of commit log.")
    micro = doc["scripts"].get("micro")
    if micro is not None:
        lines.append(f"\n## micro: hot-path micro-benchmarks ({micro.get('status')})\n")
        if "command" in micro:
            lines.append(f"`{micro['command']}`\n")
        if "items" in micro.get("figures", {}):
            lines.append(micro_table(micro["figures"]["items"]))
    lines.append("\n## Other bench scripts\n")
    for name, res in doc["scripts"].items():
        if name == "micro":
            continue
        lines.append(f"### {name}: {res.get('status')}\n")
        if "command" in res:
            lines.append(f"`{res['command']}`\n")
        if "figures" in res:
            lines.append(markdown_table(("figure", "compiled", "twin", "compiled/twin"),
                                        script_rows(res["figures"])))
        elif res.get("text"):
            lines.append("```\n" + res["text"].strip()[-4000:] + "\n```\n")
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 2 s per scenario, 200 clients, short script runs")
    ap.add_argument("--seconds", type=float, help="measured seconds per scenario (default 10)")
    ap.add_argument("--warmup", type=float, help="unmeasured seconds first (default 2)")
    ap.add_argument("--clients", type=int, help="idle clients of the connections scenario "
                                                "(default 1000)")
    ap.add_argument("--only", help=f"comma-separated scenarios of {','.join(SCENARIOS)}")
    ap.add_argument("--modes", default=",".join(MODES), help="compiled,twin (default both)")
    ap.add_argument("--skip-scripts", action="store_true", help="broker scenarios only")
    ap.add_argument("--no-pin", dest="pin", action="store_false",
                    help="do not pin the broker to CPU 0 and the load to CPU 1 "
                         "(pinned by default on a machine with 2 CPUs or more)")
    ap.add_argument("--scripts", default=",".join(SCRIPTS),
                    help="which other bench scripts to run (default all)")
    ap.add_argument("--broker-conf", action="append", default=[], metavar="KEY=VALUE",
                    help="extra broker property for every scenario (repeatable)")
    ap.add_argument("--full-page-cache", action="store_true",
                    help="before each scenario grow a file beside the stores until the "
                         "machine has little free memory (bench/page_cache.py): new pages "
                         "then come from reclaim, as on a broker that has run a while")
    ap.add_argument("--write-each", action="store_true",
                    help="raw sends: write each request as it is made (as a Java client's "
                         "channel does), not a turn of the load's loop in one write")
    ap.add_argument("--out", default=str(OUT_DIR / "results"), help="output stem (.md, .json)")
    args = ap.parse_args(argv)
    args.seconds = args.seconds or (2.0 if args.quick else 10.0)
    args.warmup = args.warmup if args.warmup is not None else (0.5 if args.quick else 2.0)
    args.clients = args.clients or (200 if args.quick else 1000)
    args.only = args.only.split(",") if args.only else list(SCENARIOS)
    args.modes = args.modes.split(",")
    bad = [s for s in args.only if s not in SCENARIOS] + [m for m in args.modes if m not in MODES]
    unknown_scripts = [s for s in args.scripts.split(",") if s and s not in SCRIPTS]
    if bad or unknown_scripts:
        ap.error(f"unknown scenario/mode/script: {', '.join(bad + unknown_scripts)}")
    args.scripts = [] if args.skip_scripts else [s for s in args.scripts.split(",") if s]
    args.filler = None  # main() makes it for --full-page-cache
    try:
        args.broker_conf = [tuple(kv.split("=", 1)) for kv in args.broker_conf]
        if any(len(kv) != 2 or not kv[0] for kv in args.broker_conf):
            raise ValueError
    except ValueError:
        ap.error("--broker-conf takes KEY=VALUE")
    return args


def _broker_builds(args, doc: dict) -> None:
    """The broker scenarios of every selected build, into ``doc["broker"]``."""
    for mode in args.modes:
        _log(f"broker scenarios, {mode} build")
        results = doc["broker"][mode] = {}
        try:
            broker_scenarios(args, mode, results)
        except Exception as exc:  # noqa: BLE001 - a broker that cannot start is reported
            results["_error"] = str(exc)[-2000:]
            _log(f"  {mode}: {str(exc).splitlines()[0]}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    doc: dict = {"date": time.strftime("%Y-%m-%d %H:%M:%S %z"), "commit": git_commit(),
                 "command": shlex.join(["bench/run.py", *(argv if argv is not None
                                                          else sys.argv[1:])]),
                 "machine": f"{os.cpu_count()} CPUs, {platform.machine()}, "
                            f"Python {platform.python_version()}",
                 "loadavg_start": " ".join(f"{x:.2f}" for x in os.getloadavg()),
                 "modes": args.modes, "seconds": args.seconds, "broker": {}, "scripts": {},
                 "pinned": ({"broker_cpus": sorted(BROKER_CPUS), "load_cpu": LOAD_CPU}
                            if args.pin and can_pin() else None)}
    args.filler = (PageCacheFiller(OUT_DIR / f"page-cache-filler-{os.getpid()}")
                   if args.full_page_cache else None)
    doc["full_page_cache"] = args.full_page_cache
    doc["write_each"] = args.write_each
    try:
        _broker_builds(args, doc)
    finally:
        if args.filler is not None:
            args.filler.remove()
    for name in args.scripts:
        _log(f"bench/{name}.py")
        doc["scripts"][name] = run_script(name, args.quick, 300 if args.quick else 1200)
        _log(f"  {doc['scripts'][name]['status']}")
    doc["loadavg_end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    out = Path(args.out)
    jpath, mpath = write_results(out.name, doc, render(doc), out.parent)
    print(mpath.read_text())
    _log(f"wrote {mpath} and {jpath}")
    failed = [m for m, r in doc["broker"].items() if "_error" in r]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
