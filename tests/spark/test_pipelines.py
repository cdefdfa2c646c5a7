"""spark/pipelines/ against a real broker: topic to Parquet and windowed counts
on the test's local session, and topic to Parquet through ``spark-submit`` on
a Spark standalone cluster (a master and a worker from the installed
pyspark's own launch classes) that the test starts on loopback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pyarrow.dataset as ds
import pyspark
import pytest

from rmq.testing.procs import free_port, wait_port
from spark.pipelines import topic_to_parquet, windowed_counts
from spark.pipelines.common import cause
from tests.spark.source_support import produce, running_broker, wait_until_blocking

pytestmark = pytest.mark.timeout(300)
REPO = Path(__file__).resolve().parents[2]
SPARK_HOME = Path(pyspark.__file__).parent


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with running_broker(tmp_path_factory.mktemp("pipelines")) as b:
        yield b


def parquet_rows(out: Path) -> list[dict]:
    return ds.dataset(str(out), format="parquet", partitioning="hive").to_table().to_pylist()


def test_topic_to_parquet_partitions_by_date_and_topic(spark, cluster, tmp_path):
    b = cluster
    b.create_topic("PipeA", 2)
    b.create_topic("PipeB", 2)
    sent = produce(b.namesrv_addr, "PipeA", 120) + produce(b.namesrv_addr, "PipeB", 60)
    out = tmp_path / "out"
    args = topic_to_parquet.parser().parse_args([
        "--namesrv", b.namesrv_addr, "--topic", "PipeA,PipeB", "--out", str(out),
        "--checkpoint", str(tmp_path / "ckpt")])
    assert topic_to_parquet.run(spark, args).awaitTermination(120)
    rows = parquet_rows(out)
    assert sorted((r["topic"], r["msgId"]) for r in rows) == sorted((s.topic, s.msg_id) for s in sent)
    assert all(str(r["date"]) == r["storeTimestamp"].date().isoformat() for r in rows)
    assert {p.name for p in out.glob("date=*/*")} == {"topic=PipeA", "topic=PipeB"}


def test_windowed_counts_reach_the_output_topic(spark, cluster, tmp_path):
    b = cluster
    b.create_topic("PipeIn", 2)
    b.create_topic("PipeCounts", 2)
    sent = produce(b.namesrv_addr, "PipeIn", 90)
    args = windowed_counts.parser().parse_args([
        "--namesrv", b.namesrv_addr, "--topic", "PipeIn", "--out-topic", "PipeCounts",
        "--window", "1 minute", "--checkpoint", str(tmp_path / "ckpt")])
    assert windowed_counts.run(spark, args).awaitTermination(120)
    b.wait_route("PipeCounts")
    latest = {}
    counted = (spark.read.format("rmq").option("namesrv", b.namesrv_addr)
               .option("topic", "PipeCounts").load().collect())
    for m in sorted(counted, key=lambda m: (m.storeTimestamp, m.queueOffset)):
        latest[m.keys] = json.loads(m.body)
    per_tag: dict[str, int] = {}
    for c in latest.values():
        assert c["topic"] == "PipeIn" and c["windowEnd"] > c["windowStart"]
        per_tag[c["tags"]] = per_tag.get(c["tags"], 0) + c["messages"]
    assert per_tag == {"T0": 30, "T1": 30, "T2": 30}
    assert sum(c["bytes"] for c in latest.values()) == sum(len(s.body) for s in sent)


class Daemon:
    """One Spark standalone daemon (``spark-class <main class> ...``) in its own
    process group, its output in a file."""

    def __init__(self, name: str, args: list[str], env: dict, log_dir: Path) -> None:
        self.log = log_dir / f"{name}.out"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen([str(SPARK_HOME / "bin" / "spark-class"), *args], env=env,
                                         stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-5000:]

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


@pytest.fixture
def standalone(tmp_path):
    """A Spark master and one worker (2 cores, 1 GiB) on 127.0.0.1."""
    env = dict(os.environ, SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP="127.0.0.1",
               SPARK_DAEMON_MEMORY="256m", PYSPARK_PYTHON=sys.executable,
               PYSPARK_DRIVER_PYTHON=sys.executable, SPARK_LOG_DIR=str(tmp_path))
    port, ui = free_port(), free_port()
    url = f"spark://127.0.0.1:{port}"
    daemons = [Daemon("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                 "--port", str(port), "--webui-port", str(ui)], env, tmp_path)]
    try:
        wait_port(port, timeout=60, proc=daemons[0].proc)
        daemons.append(Daemon("worker", [
            "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", "2",
            "--memory", "1g", "--webui-port", str(free_port()), "--work-dir", str(tmp_path / "work"),
            url], env, tmp_path))

        def state() -> dict:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json", timeout=5) as r:
                    return json.load(r)
            # the master's web UI opens after its port, and its JSON page is
            # attached after the UI's HTML one (which answers /json till then)
            except (OSError, ValueError):
                return {}
        wait_until_blocking(lambda: state().get("aliveworkers"), 60,
                            what="a worker registered with the master",
                            step=0.5)
        yield url, env, state
    except BaseException:
        for d in daemons:
            print(d.output())
        raise
    finally:
        for d in daemons:
            d.kill()


def test_topic_to_parquet_runs_under_spark_submit_on_a_standalone_cluster(cluster, standalone, tmp_path):
    b = cluster
    url, env, master_state = standalone
    b.create_topic("PipeSubmit", 4)
    sent = produce(b.namesrv_addr, "PipeSubmit", 200)
    out = tmp_path / "out"
    cmd = [str(SPARK_HOME / "bin" / "spark-submit"), "--master", url, "--driver-memory", "512m",
           "--executor-memory", "512m", "--conf", "spark.driver.host=127.0.0.1",
           "--conf", "spark.driver.bindAddress=127.0.0.1", "--conf", f"spark.pyspark.python={sys.executable}",
           str(REPO / "spark" / "pipelines" / "topic_to_parquet.py"),
           "--namesrv", b.namesrv_addr, "--topic", "PipeSubmit", "--out", str(out),
           "--checkpoint", str(tmp_path / "ckpt"), "--group", "pipe-submit"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-5000:]
    apps = master_state()["completedapps"]  # the job ran as an application of the master
    assert [a["name"] for a in apps] == ["rmq-topic-to-parquet"]
    assert list((tmp_path / "work" / apps[0]["id"]).glob("*/stderr")), "no executor on the worker"
    rows = parquet_rows(out)
    assert sorted(r["msgId"] for r in rows) == sorted(s.msg_id for s in sent)
    assert {r["topic"] for r in rows} == {"PipeSubmit"}


def test_pipeline_failures_are_one_line_and_a_nonzero_exit(spark, tmp_path):
    nobody = f"127.0.0.1:{free_port()}"
    argv = ["--namesrv", nobody, "--topic", "T", "--out", str(tmp_path / "out"),
            "--checkpoint", str(tmp_path / "ckpt")]
    bad = subprocess.run([sys.executable, "-m", "spark.pipelines.topic_to_parquet", *argv, "--trigger",
                          "soon"], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert bad.returncode == 2 and "--trigger: available-now or a number of seconds" in bad.stderr
    query = topic_to_parquet.run(spark, topic_to_parquet.parser().parse_args(argv))
    with pytest.raises(Exception) as failed:  # what main() reports on one line, exit status 1
        query.awaitTermination(60)
    assert cause(failed.value).startswith(f"rmq: no name server of {nobody} answers")
