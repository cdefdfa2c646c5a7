"""bench/locustfile.py in a real headless locust run against a real name server
and broker: sends and pulls show up in the CSV statistics, nothing fails, and
locust exits by itself when the run time is over."""

from __future__ import annotations

import asyncio
import csv
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from bench.cluster import Cluster, create_topic
from bench.modes import current_mode, mode_env

# once: the locustfile, no compiled/twin pair of its own
pytestmark = pytest.mark.once

ROOT = Path(__file__).resolve().parents[2]
LOCUST = str(Path(sys.executable).with_name("locust"))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(env=mode_env(current_mode()), workdir=tmp_path_factory.mktemp("locust-cluster"))
    c.start()
    try:
        asyncio.run(create_topic(c.broker_addr, c.namesrv_addr, "LocustTopic", 4))
        yield c
    finally:
        c.stop()


def _locust(cluster: Cluster, tmp_path: Path, *extra: str, seconds: int = 12) -> dict[str, dict]:
    """Run locust headless; returns the stats CSV rows by request type.  The
    run is long enough for the users' first requests on a loaded machine (runs
    of 3-4 s there once ended before any user had made one, and one of 8 s
    at a load of five times the cores)."""
    stem = tmp_path / "run"
    cmd = [LOCUST, "-f", str(ROOT / "bench" / "locustfile.py"), "--headless", "-u", "2",
           "-r", "2", "-t", f"{seconds}s", "--csv", str(stem), "--only-summary",
           "--rmq-namesrv", cluster.namesrv_addr, "--rmq-topic", "LocustTopic", *extra]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 60, cwd=ROOT,
                         env=cluster.env)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-5000:]
    with open(f"{stem}_stats.csv", newline="") as f:
        rows = {r["Type"] or "Aggregated": r for r in csv.DictReader(f)}
    with open(f"{stem}_failures.csv", newline="") as f:
        failures = list(csv.DictReader(f))
    assert failures == [], failures
    return rows


@pytest.mark.timeout(120)
def test_producer_and_consumer_users(cluster, tmp_path):
    rows = _locust(cluster, tmp_path, "--rmq-tags", "TagA,TagB", "--rmq-from", "first")
    assert int(rows["SEND"]["Request Count"]) > 0
    assert int(rows["PULL"]["Request Count"]) > 0
    for kind in ("SEND", "PULL", "Aggregated"):
        assert int(rows[kind]["Failure Count"]) == 0, rows[kind]
    assert float(rows["SEND"]["Average Content Size"]) == 1024
    assert rows["SEND"]["Name"] == "LocustTopic"


@pytest.mark.timeout(120)
def test_batch_producer_only(cluster, tmp_path):
    rows = _locust(cluster, tmp_path, "--rmq-batch", "4", "--rmq-size", "100", "ProducerUser")
    assert int(rows["SEND_BATCH"]["Request Count"]) > 0
    assert int(rows["SEND_BATCH"]["Failure Count"]) == 0
    assert float(rows["SEND_BATCH"]["Average Content Size"]) == 400
    assert "PULL" not in rows and "SEND" not in rows


def readme_command() -> list[str]:
    """The locust command of README.md, as a user would paste it."""
    text = (ROOT / "README.md").read_text()
    m = re.search(r"^ *(\.venv/bin/locust -f bench/locustfile\.py(?:[^\n]*\\\n)*[^\n]*)$",
                  text, re.MULTILINE)
    assert m, "README.md shows no locust command"
    return shlex.split(m.group(1).replace("\\\n", " "))


@pytest.mark.timeout(180)
@pytest.mark.parametrize("run_time", ["10s", pytest.param("60s", marks=pytest.mark.soak)])
def test_readme_command_runs_on_a_fresh_broker(tmp_path, run_time):
    """The README's command, unchanged but for the addresses (and its run time:
    10 s in make test, its full 60 s in make soak) against a broker that has no
    BenchTopic yet: exit 0, no failures."""
    argv = readme_command()
    assert argv[argv.index("-t") + 1] == "60s" and "BenchTopic" in argv
    argv[argv.index("-t") + 1] = run_time
    c = Cluster(env=mode_env(current_mode()), workdir=tmp_path / "cluster")
    c.start()
    try:
        argv[0] = LOCUST
        argv[argv.index("--rmq-namesrv") + 1] = c.namesrv_addr
        stem = tmp_path / "readme"
        argv[argv.index("--csv") + 1] = str(stem)
        out = subprocess.run(argv + ["--only-summary"], capture_output=True, text=True,
                             timeout=150, cwd=ROOT, env=c.env)
    finally:
        c.stop()
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-5000:]
    with open(f"{stem}_stats.csv", newline="") as f:
        rows = {r["Type"] or "Aggregated": r for r in csv.DictReader(f)}
    with open(f"{stem}_failures.csv", newline="") as f:
        assert list(csv.DictReader(f)) == []
    assert int(rows["SEND"]["Request Count"]) > 0 and int(rows["PULL"]["Request Count"]) > 0
    assert int(rows["Aggregated"]["Failure Count"]) == 0
