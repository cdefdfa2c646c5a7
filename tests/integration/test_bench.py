"""The benchmark tooling: bench/run.py end to end (short), bench/profiling.py
record and dump against real processes, and the pure helpers of
the bench modules (modes, cpu, stats, raw, load, results), run and profiling."""

from __future__ import annotations

import asyncio
import json
import os
import re
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from bench import profiling as prof
from bench import run as suite
from bench.cluster import Cluster
from bench.cpu import (
    BROKER_CPUS,
    CallWindow,
    ThreadCpuWindow,
    can_pin,
    proc_status,
    thread_cpu_ticks,
    thread_label,
)
from bench.modes import current_mode, mode_env
from bench.raw import RawConnection, RawPulls, RawRequests
from bench.results import markdown_table
from bench.stats import latency_summary, percentile
from rmq.client.codec import parse_properties
from rmq.common.codes import RequestCode
from rmq.common.protocol.headers_broker import SendMessageRequestHeaderV2
from rmq.common.threads import set_native_thread_name
from rmq.remoting import RemotingCommand

# once: the benchmark tooling, no compiled/twin pair of its own
pytestmark = pytest.mark.once

ROOT = Path(__file__).resolve().parents[2]


# --- pure helpers ------------------------------------------------------------------
def test_percentiles_nearest_rank():
    values = [float(i) for i in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile(values, 100) == 100.0
    assert percentile([7.0], 99) == 7.0
    assert percentile([], 50) == 0.0
    s = latency_summary([0.001, 0.002, 0.003, 0.010])
    assert s == pytest.approx({"avg_ms": 4.0, "p50_ms": 2.0, "p99_ms": 10.0, "max_ms": 10.0})
    assert latency_summary([])["p99_ms"] == 0.0


def test_mode_env_switches_the_build():
    base = {"RMQ_NO_EXTENSIONS": "1", "PATH": "/bin"}
    assert mode_env("twin", base)["RMQ_NO_EXTENSIONS"] == "1"
    compiled = mode_env("compiled", base)
    assert "RMQ_NO_EXTENSIONS" not in compiled and compiled["RMQ_REQUIRE_EXTENSIONS"] == "1"
    with pytest.raises(ValueError):
        mode_env("fast")


def test_proc_status_reads_this_process():
    st = proc_status(os.getpid())
    assert st["VmRSS"] > 0 and 0 < st["RssAnon"] <= st["VmRSS"]


def test_markdown_table_formats_figures():
    md = markdown_table(("a", "b"), [("x", 41234.5), ("y", None), ("z", 0.01234)])
    assert md.splitlines()[2] == "| x | 41,234 |"
    assert "| y | - |" in md and "| z | 0.0123 |" in md


def test_script_figures_flattened_and_compared():
    figures = {"compiled": {"rps": 100.0, "levels": [{"inflight": 1, "rps": 10}], "ok": True},
               "twins": {"rps": 25.0, "levels": [{"inflight": 1, "rps": 5}], "ok": True}}
    rows = {r[0]: r[1:] for r in suite.script_rows(figures)}
    assert rows["rps"] == (100.0, 25.0, 4.0)
    assert rows["levels.1.rps"] == (10.0, 5.0, 2.0)
    assert "ok" not in rows  # booleans are not figures


def _batch_props(body: bytes) -> list[dict[str, str]]:
    """Properties of every message of a SEND_BATCH_MESSAGE body."""
    out, pos = [], 0
    while pos < len(body):
        total, _magic, _crc, _flag, body_len = struct.unpack_from(">iiiii", body, pos)
        (props_len,) = struct.unpack_from(">h", body, pos + 20 + body_len)
        start = pos + 22 + body_len
        out.append(parse_properties(body[start:start + props_len].decode()))
        pos += total
    return out


def test_raw_requests_single_sends():
    raw = RawRequests("T", b"abc", batch=1, queues=3, broker_name="b1")
    frames = [raw.frame(n) for n in range(7)]
    for _opaque, frame in frames:  # the length prefix covers the frame
        assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    cmds = [RemotingCommand.decode(bytes(frame[4:])) for _opaque, frame in frames]
    assert [c.opaque for c in cmds] == [opaque for opaque, _frame in frames]
    now_ms = time.time() * 1000
    assert all(abs(int(h) - now_ms) < 60_000 for h in (c.ext_fields["g"] for c in cmds))
    assert {c.code for c in cmds} == {RequestCode.SEND_MESSAGE_V2}
    headers = [c.decode_header(SendMessageRequestHeaderV2) for c in cmds]
    assert [h.e for h in headers] == [0, 1, 2, 0, 1, 2, 0]  # queue ids in turn
    assert {(h.b, h.a, h.n, h.m) for h in headers} == {("T", "bench_producer", "b1", False)}
    props = [parse_properties(h.i) for h in headers]
    assert all(p["WAIT"] == "true" for p in props)
    assert len({p["UNIQ_KEY"] for p in props}) == 7  # a distinct id per message
    assert all(bytes(c.body) == b"abc" for c in cmds)
    assert len({c.opaque for c in cmds}) == 7


def test_raw_requests_batch_body_encoded_once():
    raw = RawRequests("T", b"x" * 10, batch=4, queues=2)
    first, second = (RemotingCommand.decode(bytes(raw.frame(n)[1][4:])) for n in range(2))
    assert first.code == second.code == RequestCode.SEND_BATCH_MESSAGE
    assert first.decode_header(SendMessageRequestHeaderV2).m is True
    assert bytes(first.body) == bytes(second.body)
    props = _batch_props(bytes(first.body))
    assert len(props) == 4 and len({p["UNIQ_KEY"] for p in props}) == 4
    with pytest.raises(ValueError):
        RawRequests("T", b"x", batch=0)


def test_targets_checked_on_raw_load_with_sdk_beside():
    doc = {"date": "d", "commit": "c", "command": "bench/run.py", "machine": "m",
           "loadavg_start": "0", "loadavg_end": "0", "modes": ["compiled"], "scripts": {},
           "pinned": {"broker_cpus": [0], "load_cpu": 1},
           "broker": {"compiled": {
               "send_1k": {"msgs_per_s": 50_000.0, "broker_cpu_us_per_msg": 6.5},
               "send_1k_sdk": {"msgs_per_s": 30_000.0, "broker_cpu_us_per_msg": 9.0},
               "send_1k_1_busy": {"avg_ms": 0.0614},
               "batch_32x1k": {"msgs_per_s": 250_000.0, "broker_cpu_us_per_msg": 1.5},
               "consume": {"msgs_per_s": 900_000.0},
               "consume_sdk": {"msgs_per_s": 600_000.0},
               "e2e_20k": {"e2e_p50_ms": 0.8, "e2e_p99_ms": 2.0},
               "sync_flush_1k": {"msgs_per_s": 26_000.0},
               "sync_flush_1k_sdk": {"msgs_per_s": 21_000.0}}}}
    md = suite.render(doc)
    assert "Pinning: broker and name server pinned to CPU 0, load process to CPU 1" in md
    cells = [line.strip("| ").split(" | ") for line in md.split("## Broker")[0].splitlines()
             if line.startswith("| ") and ":" in line]
    rows = {c[0]: c[1:] for c in cells}
    assert rows["single 1 KiB sends, 64 in flight: broker CPU <= 7 µs/msg"] == [
        "6.5", "yes", "9"]
    assert rows["single 1 KiB sends, one in flight, rmqBusyPollMicros=100: avg round trip "
                "<= 0.060 ms"] == ["0.061", "no", "-"]  # µs precision
    assert rows["batches of 32 x 1 KiB: broker CPU <= 1.5 µs/msg"][:2] == ["1.5", "yes"]
    assert rows["pull from page cache, one consumer: >= 1,000,000 msgs/s"] == [
        "900,000", "no", "600,000"]
    assert rows["produce-to-consume, long polling, 20,000 msgs/s: p50 < 1 ms"][:2] == [
        "0.800", "yes"]
    assert rows["produce-to-consume, long polling, 20,000 msgs/s: p99 < 2 ms"][:2] == [
        "2.000", "no"]
    assert rows["SYNC_FLUSH (group commit), 64 in flight: >= 0.5 x send_1k msgs/s"] == [
        "0.52x (26,000 / 50,000)", "yes", "0.70x (21,000 / 30,000)"]
    assert rows["broker RssAnon with the clients: < 300 MiB"] == ["-", "-", "-"]
    doc["pinned"] = None
    assert "Pinning: nothing pinned" in suite.render(doc)


def test_scenario_rows_list_each_broker_thread():
    res = {"compiled": {"msgs_per_s": 100.0, "avg_ms": 0.05123,
                        "broker_threads_us_per_msg": {"loop": 5.0, "FlushRealTimeService": 1.0,
                                                      "StoreStatsService": 0.0}},
           "twin": {"msgs_per_s": 50.0, "avg_ms": 0.1,
                    "broker_threads_us_per_msg": {"loop": 10.0, "StoreStatsService": 0.0}}}
    rows = {r[1]: r[2:] for r in suite.scenario_rows("send_1k", res)}
    assert rows["avg RT ms"] == ("0.051", "0.100", pytest.approx(0.5123))
    assert rows["broker thread loop µs/msg"] == (5.0, 10.0, 0.5)
    assert rows["broker thread FlushRealTimeService µs/msg"] == (1.0, None, None)
    assert "broker thread StoreStatsService µs/msg" not in rows  # idle in every build
    names = [r[1] for r in suite.scenario_rows("send_1k", res)]
    assert names.index("broker thread loop µs/msg") < names.index(
        "broker thread FlushRealTimeService µs/msg")


def test_call_window_counts_reads_and_writes(tmp_path):
    """The read and write system calls of a process over a window (a load's
    messages per read are its messages over the broker's reads)."""
    window = CallWindow(os.getpid())
    window.begin()
    fd = os.open(tmp_path / "f", os.O_CREAT | os.O_RDWR)
    try:
        for _ in range(20):
            os.write(fd, b"x")
        for _ in range(30):
            os.pread(fd, 1, 0)
    finally:
        os.close(fd)
    window.end()
    assert window.writes >= 20 and window.reads >= 30
    assert window.system >= 0.0


def test_thread_cpu_by_native_name():
    """A thread that names itself and burns CPU shows up under its full name;
    the first thread of the process is "loop"."""
    pid = os.getpid()
    assert thread_label(pid, pid, "python") == "loop"
    assert thread_label(pid, pid + 1, "FlushRealTimeSe") == "FlushRealTimeService"
    assert thread_label(pid, pid + 1, "AllocateMappedF") == "AllocateMappedFileService"
    assert thread_label(pid, pid + 1, "libuv-worker") == "libuv-worker"
    window = ThreadCpuWindow(pid)
    window.begin()
    stop = threading.Event()

    def burn() -> None:
        set_native_thread_name("GroupCommitService")
        while not stop.is_set():
            sum(range(1000))

    t = threading.Thread(target=burn)
    t.start()
    # (burn until the thread has had a tenth of a second of CPU, up to 10 s: a
    # loaded machine gives it less than its wall time)
    tick = os.sysconf("SC_CLK_TCK")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        time.sleep(0.1)
        burnt = [ticks for name, ticks in thread_cpu_ticks(pid).values()
                 if name == "GroupCommitServ"]
        if burnt and burnt[0] > tick // 10:
            break
    names = {name for name, _ticks in thread_cpu_ticks(pid).values()}
    seconds = window.end()
    stop.set()
    t.join(10)
    assert "GroupCommitServ" in names
    assert seconds["GroupCommitService"] > 0.05 and "loop" in seconds


def test_raw_pulls_frames():
    pulls = RawPulls("T", "g", queues=2, max_nums=16, suspend_ms=15_000)
    for queue_id, offset in ((0, 0), (1, 12_345_678_901)):
        opaque, frame = pulls.frame(queue_id, offset)
        assert int.from_bytes(frame[:4], "big") == len(frame) - 4
        cmd = RemotingCommand.decode(frame[4:])
        assert cmd.code == RequestCode.PULL_MESSAGE and cmd.opaque == opaque
        ext = cmd.ext_fields
        assert (ext["queueId"], ext["queueOffset"]) == (str(queue_id), str(offset))
        assert (ext["topic"], ext["consumerGroup"], ext["maxMsgNums"]) == ("T", "g", "16")
        assert ext["subscription"] == "*" and ext["suspendTimeoutMillis"] == "15000"
        assert int(ext["sysFlag"]) == 0x2 | 0x4  # SUSPEND | SUBSCRIPTION
    plain = RemotingCommand.decode(RawPulls("T").frame(0, 5)[1][4:]).ext_fields
    assert plain["sysFlag"] == "4" and plain["suspendTimeoutMillis"] == "0"


def test_raw_requests_stamp_the_body():
    raw = RawRequests("T", b"x" * 64, stamp=True)
    before = time.time_ns()
    _opaque, frame = raw.frame(0)
    body = RemotingCommand.decode(bytes(frame[4:])).body
    assert before <= raw.last_stamp <= time.time_ns()
    assert int.from_bytes(body[:8], "big") == raw.last_stamp and body[8:] == b"x" * 56
    with pytest.raises(ValueError):
        RawRequests("T", b"x" * 64, batch=2, stamp=True)


def test_raw_connection_decodes_split_and_joined_frames():
    async def main() -> list[int]:
        conn = RawConnection()
        frames = [RemotingCommand(0, 0, 409, op, 1, None, {"k": "v"}, b"b" * 5000, 0).encode()
                  for op in (1, 2, 3)]
        futs = [conn._loop.create_future() for _ in frames]
        conn._pending = dict(zip((1, 2, 3), futs, strict=True))
        wire = b"".join(frames)
        for cut in (3, len(frames[0]) + 10, len(wire) - 1):  # mid-length, mid-frame, last byte
            conn.data_received(wire[:cut])
            wire = wire[cut:]
        conn.data_received(wire)
        assert not conn._buf
        resps = [await f for f in futs]
        assert all(r.body == b"b" * 5000 for r in resps)
        return [r.opaque for r in resps]

    assert asyncio.run(main()) == [1, 2, 3]


class _Wire:
    """A transport that keeps each write call's frames."""

    def __init__(self) -> None:
        self.writes: list[list[bytes]] = []

    def write(self, data) -> None:
        self.writes.append([bytes(data)])

    def writelines(self, frames) -> None:
        self.writes.append([bytes(f) for f in frames])

    def is_closing(self) -> bool:
        return False


@pytest.mark.parametrize("write_each", [False, True])
def test_raw_connection_writes_per_turn_or_each(write_each):
    async def main() -> list[list[bytes]]:
        conn = RawConnection(write_each)
        conn._transport = wire = _Wire()
        frames = [bytearray(RemotingCommand(310, 0, 409, op, 0, None, {}, b"m", 0).encode())
                  for op in (1, 2, 3)]
        sends = [asyncio.ensure_future(conn.send(op, f))
                 for op, f in zip((1, 2, 3), frames, strict=True)]
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        for op in (1, 2, 3):
            conn.data_received(RemotingCommand(0, 1, 409, op, 1, None, {}, None, 0).encode())
        assert [r.opaque for r in await asyncio.gather(*sends)] == [1, 2, 3]
        return wire.writes

    writes = asyncio.run(main())
    assert [len(w) for w in writes] == ([1, 1, 1] if write_each else [3])


def test_json_option_detection():
    assert suite._json_option("  --json JSON  write figures") == "path"
    assert suite._json_option("[--rounds ROUNDS] [--json]\n  --json  print JSON") == "flag"
    assert suite._json_option("usage: x.py [--seconds SECONDS]") is None


def test_parse_remoting_output():
    text = ("end to end (one connection, trivial request/response)\n"
            "in flight | compiled req/s  us/req | twin req/s  us/req | ratio\n"
            "        1 |         24,773    40.4 |     10,071    99.3 | 2.46x\n"
            "\ncodec, SEND_MESSAGE_V2 header (13 fields), encode + decode\n"
            "    JSON (400 B): twin 6.00 + 7.60 us | compiled 2.00 + 2.14 us | 3.3x\n")
    figs = suite.parse_remoting(text)
    assert figs["compiled"]["e2e_1_inflight_req_per_s"] == 24773.0
    assert figs["twin"]["e2e_1_inflight_req_per_s"] == 10071.0
    assert figs["twin"]["codec_json_encode_decode_us"] == pytest.approx(13.6)
    with pytest.raises(ValueError):
        suite.parse_remoting("nothing here")


def test_page_floor_measures_every_way():
    out = subprocess.run([sys.executable, "-m", "bench.page_floor", "--mib", "2", "--rounds", "1",
                          "--pause", "0", "--no-pin", "--json"], capture_output=True, text=True,
                         cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    figures = json.loads(out.stdout)["us_per_kib"]
    assert set(figures) == {"fault", "populate", "zero_pwrite", "resident"}
    assert all(v > 0 for v in figures.values())
    bad = subprocess.run([sys.executable, "-m", "bench.page_floor", "--mib", "0"],
                         capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


def test_flush_floor_times_every_case():
    out = subprocess.run([sys.executable, "-m", "bench.flush_floor", "--sizes", "1,8", "--threads",
                          "1,2", "--flushes", "5", "--no-pin", "--json"], capture_output=True,
                         text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    cases = json.loads(out.stdout)["cases"]
    assert [(c["kib"], c["threads"]) for c in cases] == [(1, 1), (8, 1), (1, 2)]
    assert all(c["median_us"] > 0 and c["p90_us"] >= c["median_us"] and c["flushes_per_s"] > 0
               for c in cases)
    bad = subprocess.run([sys.executable, "-m", "bench.flush_floor", "--threads", "0"],
                         capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


def test_run_arguments_validated():
    args = suite.parse_args(["--quick", "--only", "send_1k", "--broker-conf", "a=b=c"])
    assert args.seconds == 2.0 and args.only == ["send_1k"] and args.broker_conf == [("a", "b=c")]
    assert args.pin and not suite.parse_args(["--no-pin"]).pin
    for bad in (["--only", "nope"], ["--modes", "fast"], ["--broker-conf", "novalue"]):
        with pytest.raises(SystemExit):
            suite.parse_args(bad)


def test_top_frames_own_and_total(tmp_path):
    raw = tmp_path / "p.raw"
    raw.write_text("main (a.py);loop (a.py);send (b.py) 30\n"
                   "main (a.py);loop (a.py);pull (b.py) 10\n"
                   "main (a.py);loop (a.py);loop (a.py) 10\n")
    text = prof.top_frames(raw, limit=3)
    own, total = text.split("by total samples")
    assert "50 samples" in own
    assert own.index("60.0%  send (b.py)") < own.index("20.0%  pull (b.py)")
    assert "100.0%  loop (a.py)" in total  # counted once per stack, even when recursive
    assert "event-loop thread only" not in text
    empty = tmp_path / "e.raw"
    empty.write_text("")
    assert "no samples" in prof.top_frames(empty)
    mixed = tmp_path / "m.raw"
    mixed.write_text("main (x.py);Runner.run (asyncio/runners.py:86);send (b.py) 30\n"
                     "main (x.py);Runner.run (asyncio/runners.py:86);epoll_pwait (libc.so.6) 10\n"
                     "Thread.run (threading.py:971);wait (libc.so.6) 60\n")
    whole, loop = prof.top_frames(mixed, limit=5).split("event-loop thread only:")
    assert "60.0%  wait (libc.so.6)" in whole and "100 samples" in whole
    assert "40 samples" in loop and "75.0%  send (b.py)" in loop and "  wait (libc" not in loop


# --- real processes ---------------------------------------------------------------
@pytest.mark.timeout(240)
def test_run_py_quick_writes_results(tmp_path):
    mode = current_mode()
    stem = tmp_path / "results"
    cmd = [sys.executable, "-m", "bench.run", "--quick", "--seconds", "1",
           "--warmup", "0.3", "--only",
           "send_1k,send_1k_1,send_1k_sdk,consume,consume_sdk,e2e_20k,connections",
           "--clients", "20",
           "--modes", mode, "--scripts", "remoting", "--out", str(stem)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=220, cwd=ROOT,
                         env=mode_env(mode))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    doc = json.loads(stem.with_suffix(".json").read_text())
    res = doc["broker"][mode]
    assert (doc["pinned"] is not None) == can_pin() == res["_pinned"]
    for scen in ("send_1k", "send_1k_1", "send_1k_sdk", "consume", "consume_sdk", "e2e_20k"):
        assert res[scen]["msgs_per_s"] > 0 and res[scen]["failures"] == 0, res[scen]
        assert res[scen]["broker_cpu_us_per_msg"] > 0 and res[scen]["broker_RssAnon"] > 0
        assert res[scen]["p50_ms"] <= res[scen]["p99_ms"] <= res[scen]["max_ms"]
        threads = res[scen]["broker_threads_us_per_msg"]
        assert threads["loop"] == res[scen]["broker_loop_cpu_us_per_msg"] > 0
        assert "FlushRealTimeService" in threads and "AllocateMappedFileService" in threads
    assert res["send_1k_1"]["requests"] == res["send_1k_1"]["msgs"]  # one at a time
    e2e = res["e2e_20k"]
    assert 0 < e2e["e2e_received"] == e2e["e2e_sent"] and e2e["e2e_lost"] == 0, e2e
    assert 0 < e2e["e2e_p50_ms"] <= e2e["e2e_p99_ms"] <= e2e["e2e_max_ms"]
    assert e2e["e2e_caught_up_pulls"] > 0.5  # the consumer kept up: its pulls were held
    assert res["consume"]["passes"] > 0 and res["consume"]["lanes"] == 8
    assert res["connections"]["connections"] == 20 and res["connections"]["failures"] == 0
    assert doc["scripts"]["remoting"]["status"] == "ok"
    md = stem.with_suffix(".md").read_text()
    assert "| send_1k | msgs/s |" in md and "## Targets" in md and "### remoting: ok" in md
    assert "| send_1k_sdk | msgs/s |" in md and "SDK load" in md
    assert "| send_1k | broker thread loop µs/msg |" in md and "| e2e_20k | e2e p99 ms |" in md


@pytest.mark.timeout(60)
def test_cluster_pinned_to_one_cpu(tmp_path):
    """Cluster(pin=True): the name server and the broker, every thread of
    them, run on BROKER_CPUS only; the broker's threads carry their names."""
    mode = current_mode()
    with Cluster(env=mode_env(mode), workdir=tmp_path / "pinned", pin=True) as cluster:
        assert cluster.pinned == can_pin()
        pids = (cluster.broker_pid, cluster.namesrv.pid)
        tids = [(pid, int(t)) for pid in pids for t in os.listdir(f"/proc/{pid}/task")]
        if cluster.pinned:
            assert all(os.sched_getaffinity(tid) == set(BROKER_CPUS) for _pid, tid in tids)
        labels = {thread_label(cluster.broker_pid, tid, comm)
                  for tid, (comm, _t) in thread_cpu_ticks(cluster.broker_pid).items()}
        assert {"loop", "FlushRealTimeService", "StoreStatsService"} <= labels, labels


@pytest.mark.timeout(180)
def test_profile_record_and_dump(tmp_path):
    mode = current_mode()
    out_dir = tmp_path / "prof"
    cmd = [sys.executable, "-m", "bench.profiling", "--duration", "2",
           "--warmup", "0.5", "--inflight", "8", "--formats", "flamegraph,raw,speedscope",
           "--out", str(out_dir)] + (["--twins"] if mode == "twin" else [])
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=170, cwd=ROOT,
                         env=mode_env(mode))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert (out_dir / "flame.svg").read_text().lstrip().startswith("<?xml")
    assert json.loads((out_dir / "profile.speedscope.json").read_text())["profiles"]
    top = (out_dir / "top.txt").read_text()
    assert "samples" in top and "by own samples" in top
    assert json.loads((out_dir / "load.json").read_text())["msgs"] > 0

    with Cluster(env=mode_env(mode), workdir=tmp_path / "dump-cluster") as cluster:
        dump = subprocess.run([sys.executable, "-m", "bench.profiling", "dump",
                               "--port", str(cluster.port)], capture_output=True, text=True,
                              timeout=120, cwd=ROOT)
        assert dump.returncode == 0, dump.stdout + dump.stderr
        assert f"Process {cluster.broker_pid}" in dump.stdout and "Thread" in dump.stdout
    bad = subprocess.run([sys.executable, "-m", "bench.profiling", "dump"],
                         capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert bad.returncode != 0 and "dump needs --pid or --port" in bad.stderr


@pytest.mark.timeout(170)
def test_profile_native_consume_records_formats_in_turn(tmp_path):
    """--native stops the broker for its samples: the formats are recorded one
    after another while the consume load runs on, and the loop thread gets
    its own table beside the parked threads."""
    mode = current_mode()
    out_dir = tmp_path / "native"
    cmd = [sys.executable, "-m", "bench.profiling", "--native", "--kind", "consume",
           "--duration", "1", "--warmup", "0.5", "--formats", "flamegraph,raw", "--out",
           str(out_dir)] + (["--twins"] if mode == "twin" else [])
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=160, cwd=ROOT,
                         env=mode_env(mode))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert (out_dir / "flame.svg").read_text().lstrip().startswith("<?xml")
    top = (out_dir / "top.txt").read_text()
    assert "by own samples" in top and "event-loop thread only:" in top
    load = json.loads((out_dir / "load.json").read_text())
    assert load["kind"] == "consume" and load["msgs"] > 0 and load["failures"] == 0
    assert load["elapsed_s"] >= 3.0  # two 1 s windows + 2 s: the load outlasted both


def test_last_json_of_script_output():
    assert suite.last_json('{"a": 1}') == {"a": 1}
    assert suite.last_json('progress\n{"compiled": {"x": 2},\n "twin": {"x": 1}\n}\n') == {
        "compiled": {"x": 2}, "twin": {"x": 1}}
    assert suite.last_json('starting\n{"a": 1}\n') == {"a": 1}
    with pytest.raises(ValueError):
        suite.last_json("no json at all")


def test_micro_floor_marks_kernel_bound_items(tmp_path):
    """bench/micro.py times a flush item's bare kernel work beside both builds;
    an item whose twin is within 5x of that floor is reported kernel-bound,
    not yes/no, and the other items keep their yes/no."""
    from bench import micro

    out = tmp_path / "micro.json"
    assert micro.main(["--quick", "--only", "page_cache_busy,msync_128b", "--dir", str(tmp_path),
                       "--json", str(out)]) == 0
    rows = {r["key"]: r for r in json.loads(out.read_text())["items"]}
    flush, busy = rows["mmap_append_msync_128b"], rows["page_cache_busy"]
    assert flush["floor_ns"] > 0 and flush["ceiling"] == pytest.approx(flush["twin_ns"] / flush["floor_ns"])
    assert busy["floor_ns"] is None and busy["ceiling"] is None
    for row in (flush, busy):
        if row["compiled_ns"] is not None:
            assert row["ratio"] == pytest.approx(row["twin_ns"] / row["compiled_ns"])
    bound = micro.kernel_bound([flush, busy])
    assert bound == (["mmap_append_msync_128b"] if flush["ceiling"] < micro.AIM else [])
    if bound:
        assert flush["meets_5x"] is None and micro.verdict(flush).startswith("kernel-bound (floor ")
    assert micro.verdict(busy) in ("yes", "no", "-")
    table = suite.micro_table([flush, busy])
    assert table.count("\n| ") == 2 and f"of {2 - len(bound)} code-bound hot-path items" in table


@pytest.mark.timeout(180)
def test_compare_runs_the_same_load_against_a_reference(tmp_path):
    """bench/compare.py with a second rmq as the reference: one row per in-flight
    count with both brokers' rates and CPU per message."""
    from bench.producer import bench_cluster

    ref = bench_cluster(False)
    try:
        out = subprocess.run(
            [sys.executable, "-m", "bench.compare", "--ref-namesrv", ref.namesrv_addr,
             "--ref-broker", ref.broker_addr, "--ref-pid", str(ref.broker.pid),
             "--inflight", "2", "--duration", "1", "--topic", "CmpTopic"],
            capture_output=True, text=True, timeout=150, cwd=ROOT)
    finally:
        ref.stop()
    assert out.returncode == 0, out.stderr[-2000:]
    row = [line for line in out.stdout.splitlines() if line.startswith("| 2 |")]
    assert len(row) == 1
    cells = [c.strip() for c in row[0].strip("|").split("|")]
    assert int(cells[1].replace(",", "")) > 0 and int(cells[2].replace(",", "")) > 0
    assert cells[3].endswith("µs") and cells[4].endswith("µs")
    bad = subprocess.run([sys.executable, "-m", "bench.compare", "--ref-namesrv",
                          "x:1", "--ref-broker", "x:2", "--inflight", "0"],
                         capture_output=True, text=True, timeout=30, cwd=ROOT)
    assert bad.returncode == 2 and "--inflight" in bad.stderr


@pytest.mark.timeout(180)
def test_small_benches_run(tmp_path):
    """bench/metrics_cost.py, bench/sql92_bitmap.py, bench/dledger_bench.py,
    bench/lane_reads.py (a send lane's, on JSON and on the Java Producer's
    frames, a DLedger leader's alone and with two followers, a follower's),
    bench/dledger_follow.py, bench/pop_calls.py and bench/idle_cpu.py at small
    sizes: they run and print their figures (the figures themselves go in
    bench/RESULTS.md)."""
    for script, args, expect in (
            ("metrics_cost", ["--messages", "20000", "--series", "200"], "scrape of 200"),
            ("sql92_bitmap", ["--messages", "2000", "--match", "5", "--groups", "2"],
             "drain speed-up"),
            ("dledger_bench", ["--appends", "400", "--inflight", "1,8"], "3 nodes"),
            ("lane_reads", ["--reads", "300", "--frames", "2", "--repeats", "2"],
             "per_read_us (2 frame(s) a read): best"),
            ("lane_reads", ["--java", "--protocol", "--gc-freeze", "--reads", "200", "--frames",
                            "3", "--repeats", "2"], "per_read_us (3 frame(s) a read): best"),
            ("lane_reads", ["--dledger", "--reads", "100", "--frames", "4", "--repeats", "2"],
             "per_read_us (4 frame(s) a read): best"),
            ("lane_reads", ["--dledger", "--followers", "2", "--reads", "50", "--frames", "4",
                            "--repeats", "2"], "per_read_us (4 frame(s) a read): best"),
            ("lane_reads", ["--follower", "--reads", "50", "--frames", "4", "--repeats", "2"],
             "per_read_us (4 frame(s) a read): best"),
            ("dledger_follow", ["--pushes", "50", "--batch", "4", "--repeats", "1"],
             "cpu_us_per_entry (4 entries a push): best"),
            ("pop_calls", ["--cycles", "40", "--repeats", "2", "--parts"],
             "batch_ack_us (32 messages a call): best"),
            ("pop_calls", ["--cycles", "40", "--repeats", "2", "--lane"],
             "batch_ack_us (32 messages a call): best"),
            ("idle_cpu", ["--seconds", "1", "--settle", "0.5"], "broker wake-ups/s")):
        out = subprocess.run([sys.executable, "-m", f"bench.{script}", *args],
                             capture_output=True, text=True, timeout=100, cwd=ROOT)
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
        assert expect in out.stdout


@pytest.mark.timeout(180)
def test_acl_broker_bench_runs():
    """bench/acl.py --broker, one small round: signed sends into an ACL broker
    with the send lane off and on, both rows printed."""
    out = subprocess.run([sys.executable, "-m", "bench.acl", "--broker", "--count", "300",
                          "--rounds", "1", "--inflight", "4"],
                         capture_output=True, text=True, timeout=170, cwd=ROOT)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "| off | " in out.stdout and "| on | " in out.stdout


@pytest.mark.timeout(180)
def test_dledger_broker_bench_runs():
    """bench/dledger_broker.py, one second per broker setup: it prints all four
    rows (the single master again at the group's rate), the ratio at the
    same rate and the floor servers' ratio (--floor); with --full-page-cache
    (its filler held to a few chunks here) the page cache topped up before
    each of the four and before the floor's servers."""
    out = subprocess.run([sys.executable, "-m", "bench.dledger_broker",
                          "--duration", "1", "--inflight", "4", "--same-rate", "--floor",
                          "--full-page-cache", "--filler-max-mib", "192"],
                         capture_output=True, text=True, timeout=170, cwd=ROOT)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    for row in ("single master", "3-node DLedger group", "with enableBatchPush",
                "single master, group's rate", "the group's master at the same rate: ",
                "a leader's traffic alone"):
        assert row in out.stdout
    assert "single master at " in out.stderr  # its threads, at the rate it was held to
    assert out.stderr.count("page cache topped up by ") == 5


@pytest.mark.timeout(180)
def test_dledger_broker_bench_runs_the_java_producers_frames():
    """bench/dledger_broker.py --java-frames: the single master and the group
    under the Java benchmark Producer's frames (1024 queues), each primed
    first, their rows printed with a rate and the leader's ratio.  The
    leader's threads are read around the load process, which measures from
    its first send: their sum is its CPU a message, not that and a
    warm-up's (which, as long as the 1 s measured here, would double the
    loop's line)."""
    out = subprocess.run([sys.executable, "-m", "bench.dledger_broker", "--duration", "1",
                          "--inflight", "4", "--runs", "single,group", "--java-frames"],
                         capture_output=True, text=True, timeout=170, cwd=ROOT)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    rows = {line[:30].strip(): line[30:].split() for line in out.stdout.splitlines()[1:]}
    for row in ("single master", "3-node DLedger group"):
        assert float(rows[row][0].replace(",", "")) > 0, out.stdout
    assert rows["3-node DLedger group"][4].endswith("x"), out.stdout
    leader = float(rows["3-node DLedger group"][2])  # its CPU µs a message, the load's window
    line = next(x for x in out.stderr.splitlines() if x.strip().startswith("leader "))
    threads = [float(x) for x in re.findall(r": ([0-9.]+) µs \(", line)]
    assert threads and 0.6 * leader <= sum(threads) <= 1.4 * leader, (leader, line)


@pytest.mark.timeout(120)
def test_cq_disk_bench_prints_the_queues_disk_use_beside_4_9_8s():
    """bench/cq_disk.py: the Java Producer's frames round 1,024 queues, then
    the consume-queue files' entries and disk use: sparse, about what 4.9.8's
    files would hold, far below the files reserved whole."""
    out = subprocess.run([sys.executable, "-m", "bench.cq_disk", "--seconds", "1", "--prime", "0.5",
                          "--inflight", "4"], capture_output=True, text=True, timeout=110, cwd=ROOT)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    row = out.stdout.strip().splitlines()[-1].split("|")
    rate, files, entries, on_disk, java, whole = (float(row[i].replace(",", ""))
                                                  for i in (2, 4, 5, 6, 7, 8))
    assert rate > 0 and files == 1024 and entries > 0, out.stdout
    assert java <= on_disk <= 2 * java + 1024 * 4096 / 2**20 and on_disk < whole / 100, out.stdout


@pytest.mark.timeout(60)
def test_page_cache_filler_grows_to_its_mark_and_goes(tmp_path):
    from bench.page_cache import CHUNK, PageCacheFiller, kswapd_seconds, meminfo, reclaimed_pages

    assert kswapd_seconds() >= 0 and reclaimed_pages() >= 0
    free = meminfo("MemFree")
    with PageCacheFiller(tmp_path / "filler", leave_free=free - 2 * CHUNK,
                         max_size=6 * CHUNK) as filler:
        added = filler.top_up()
        # it stops at its mark (or earlier: the kernel began to reclaim), and
        # never past its size, whatever else frees memory meanwhile
        assert 0 < added <= 6 * CHUNK and filler.size() == added
        assert PageCacheFiller(filler.path, leave_free=meminfo("MemTotal")).top_up() == 0
        assert PageCacheFiller(filler.path, leave_free=0, leave_disk=1 << 60).top_up() == 0
        assert PageCacheFiller(filler.path, leave_free=0, max_size=added).top_up() == 0
        assert filler.size() == added
        # a bench's line of a top-up: nothing more to add, the file's size
        said = filler.top_up_said()
        assert said.startswith("page cache topped up by 0 MiB (filler ")
        assert f"filler {added // (1 << 20):,} MiB" in said and "MemFree " in said
    assert not (tmp_path / "filler").exists()


@pytest.mark.timeout(60)
def test_sparse_page_cache_filler_caches_pages_without_disk_blocks(tmp_path):
    from bench.page_cache import CHUNK, PageCacheFiller, meminfo

    free = meminfo("MemFree")
    with PageCacheFiller(tmp_path / "filler", leave_free=free - 2 * CHUNK,
                         max_size=3 * CHUNK, sparse=True) as filler:
        added = filler.top_up()
        assert 0 < added <= 3 * CHUNK and filler.size() == added
        # a file of holes: its pages are cached (read), none is on the disk
        assert filler.path.stat().st_blocks == 0
        # the disk's room is no limit of a sparse filler
        assert PageCacheFiller(filler.path, leave_free=0, leave_disk=1 << 60, max_size=added,
                               sparse=True).top_up() == 0
    assert not (tmp_path / "filler").exists()


def test_java_frames_takes_full_page_cache():
    from bench import java_frames

    assert "--full-page-cache" in java_frames.__doc__
    assert java_frames.main(["--rounds", "0", "--full-page-cache"]) == 2


def test_report_says_how_the_page_cache_was():
    doc = {"date": "d", "commit": "c", "command": "bench/run.py", "machine": "m",
           "loadavg_start": "0", "loadavg_end": "0", "modes": ["compiled"], "broker": {},
           "scripts": {}, "pinned": None, "full_page_cache": True}
    assert "`--full-page-cache`" in suite.render(doc)
    doc["full_page_cache"] = False
    assert "new pages from free memory" in suite.render(doc)
    assert "one turn of the load's loop in one write" in suite.render(doc)
    doc["write_each"] = True
    assert "`--write-each`" in suite.render(doc)
    assert suite.parse_args(["--write-each"]).write_each
    assert suite.parse_args(["--full-page-cache"]).full_page_cache
    assert not suite.parse_args([]).full_page_cache


@pytest.mark.timeout(200)
def test_floor_benches_run():
    """bench/floor.py (the single and leader floor servers under a raw send
    load, JSON and Java frames), bench/rtt.py and bench/java_frames.py
    --floor (whose floor is bench.floor's single server) at small sizes:
    every request answered (the load fails on a missing or foreign answer),
    the figures printed."""
    for script, args, expect in (
            ("floor", ["--seconds", "1", "--rounds", "1", "--inflight", "8", "--dledger-pushes"],
             "pushes padded 330 B a frame"),
            ("floor", ["--seconds", "1", "--rounds", "1", "--inflight", "4", "--java-frames"],
             "the leader floor over the single floor"),
            ("rtt", ["--count", "500"], "the floor's server CPU"),
            ("java_frames", ["--lanes", "on", "--rounds", "1", "--seconds", "1", "--prime", "1",
                             "--inflight", "4", "--floor", "--naps", "both"],
             ("| 4 | floor |", "| 4 | floor, naps |", "| 4 | lanes on |",
              "| 4 | lanes on, naps |"))):
        out = subprocess.run([sys.executable, "-m", f"bench.{script}", *args],
                             capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
        for row in (expect,) if isinstance(expect, str) else expect:
            assert row in out.stdout
