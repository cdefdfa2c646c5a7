"""``register(spark)`` on a SparkSession made the plain way
(``SparkSession.builder.master("local[2]").getOrCreate()``), in a process
without ``PYSPARK_PYTHON`` whose ``python3`` on PATH has no rmq: the source
reads the store, and a worker Python the user named without rmq is one clear
line before any job runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from rmq.common.topics import is_system_topic

pytestmark = pytest.mark.timeout(300)

_PLAIN_SESSION = """
import sys
from pyspark.sql import SparkSession

spark = SparkSession.builder.master("local[2]").getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
from spark.source import register

register(spark)
print("WORKERS", spark.sparkContext.pythonExec, flush=True)
print("COUNT", spark.read.format("rmq").load(sys.argv[1]).count(), flush=True)
spark.stop()
"""


def _python_without_rmq(bin_dir: Path) -> Path:
    """A ``python3`` that cannot import rmq, pyarrow or anything installed:
    this interpreter without site-packages, isolated from PYTHONPATH."""
    bin_dir.mkdir()
    exe = bin_dir / "python3"
    exe.write_text(f'#!/bin/sh\nexec "{sys.executable}" -I -S "$@"\n')
    exe.chmod(0o755)
    return exe


def _run_plain_session(tmp_path: Path, store: Path, name_it: bool):
    """Run the plain session script; ``python3`` on PATH has no rmq, and with
    ``name_it`` PYSPARK_PYTHON names that Python."""
    bare = _python_without_rmq(tmp_path / "bin")
    script = tmp_path / "plain_session.py"
    script.write_text(_PLAIN_SESSION)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV")}
    env["PATH"] = os.pathsep.join([str(bare.parent), "/usr/bin", "/bin"])
    env["SPARK_LOCAL_IP"] = "127.0.0.1"  # loopback only
    if name_it:
        env["PYSPARK_PYTHON"] = str(bare)
    return subprocess.run([sys.executable, str(script), str(store)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=240, check=False)


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory) -> tuple[Path, int]:
    """A small store written by rmq's store, and how many of its messages
    are in user topics (what ``load(store)`` returns)."""
    root = tmp_path_factory.mktemp("plain") / "store"
    truth = root.parent / "truth.parquet"
    subprocess.run([sys.executable, "-m", "spark.gen_store", str(root), "--messages", "300",
                    "--hours", "1", "--truth", str(truth)], check=True, timeout=120,
                   capture_output=True)
    topics = pd.read_parquet(truth)["topic"]
    return root, int(sum(not is_system_topic(t) for t in topics))


def test_plain_session_runs_the_source_on_the_drivers_python(demo_store, tmp_path):
    store, expected = demo_store
    done = _run_plain_session(tmp_path, store, name_it=False)
    assert done.returncode == 0, done.stderr[-3000:]
    out = dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)
    assert out["WORKERS"] == sys.executable
    assert int(out["COUNT"]) == expected > 0


def test_named_worker_python_without_rmq_is_one_line_before_any_job(demo_store, tmp_path):
    store, _ = demo_store
    bare = tmp_path / "bin" / "python3"
    done = _run_plain_session(tmp_path, store, name_it=True)
    assert done.returncode != 0
    assert "COUNT" not in done.stdout and "WORKERS" not in done.stdout
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("spark.source.workers.WorkerPythonError: rmq data source: "), last
    assert f"run '{bare}' (PYSPARK_PYTHON names it)" in last
    assert "cannot import rmq" in last
    assert f"set PYSPARK_PYTHON={sys.executable}" in last
    assert "Py4JJavaError" not in done.stderr and "at org.apache.spark" not in done.stderr
