"""The capacity job on local[2] over stores written by rmq's own store code,
every figure checked against the generator's ground truth; two brokers in one
run, an empty store, damaged files, and the command line's exit status."""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from spark import gen_store
from spark.capacity import run_report
from spark.job import BrokerInput
from spark.report import Options

pytestmark = pytest.mark.timeout(240)

DISK = 1 << 30
TARGET_RATE = 0.25


def _report(spark, tmp, brokers, opts=None, confs=None, reader="auto"):
    opts = opts or Options(retention_hours=12.0, target_queue_rate=TARGET_RATE)
    return run_report(spark, brokers, confs or {}, opts, str(tmp), lambda msg: None, reader)


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    base = tmp_path_factory.mktemp("stores")
    a = gen_store.generate(str(base / "broker-a"), gen_store.GenSpec(messages=6000, hours=5, seed=11))
    spec_b = gen_store.GenSpec(messages=3000, hours=3, seed=12, broker_name="broker-b",
                               commitlog_file_size=1 << 20, peak_hour=1)
    b = gen_store.generate(str(base / "broker-b"), spec_b)
    return base, {"broker-a": a, "broker-b": b}


@pytest.fixture(scope="module")
def two_brokers(spark_session, stores, tmp_path_factory):
    base, truths = stores
    out = tmp_path_factory.mktemp("report")
    brokers = [BrokerInput(name, str(base / name), disk_size=DISK) for name in truths]
    return _report(spark_session, out, brokers), truths, out


def _truth_queues(truth) -> pd.DataFrame:
    m = truth.messages
    g = m.groupby(["topic", "queueId"])
    return pd.DataFrame({
        "messages": g.size(), "bytes": g["size"].sum(), "p99": g["size"].quantile(0.99),
        "first": g["storeTimestamp"].min(), "last": g["storeTimestamp"].max(),
        "maxOffset": g["queueOffset"].max() + 1, "born": g["bornTimestamp"].min(),
        "reconsume": g["reconsumeTimes"].max(),
    }).reset_index()


def test_queue_figures_match_ground_truth(two_brokers):
    tables, truths, _ = two_brokers
    q = tables["queues"].set_index(["broker", "topic", "queueId"])
    for name, truth in truths.items():
        for r in _truth_queues(truth).itertuples():
            row = q.loc[(name, r.topic, r.queueId)]
            assert row["messages"] == r.messages
            assert row["bytes"] == r.bytes
            assert row["avgSize"] == pytest.approx(r.bytes / r.messages)
            assert row["p99Size"] == pytest.approx(r.p99)
            assert row["firstStoreTime"] == r.first and row["lastStoreTime"] == r.last
            assert row["maxOffset"] == r.maxOffset
            assert row["firstBornTime"] == r.born and row["maxReconsumeTimes"] == r.reconsume
            assert bool(row["consistent"])
        assert q.loc[name]["messages"].sum() == len(truth.messages)


def test_topic_figures_peak_hour_and_skew(two_brokers):
    tables, truths, _ = two_brokers
    t = tables["topics"].set_index(["broker", "topic"])
    for name, truth in truths.items():
        m = truth.messages.assign(hour=truth.messages["storeTimestamp"] // 3_600_000)
        for spec in truth.spec.topics:
            tm = m[m["topic"] == spec.name]
            row = t.loc[(name, spec.name)]
            assert row["messages"] == len(tm) and row["bytes"] == tm["size"].sum()
            assert row["p99Size"] == pytest.approx(np.percentile(tm["size"], 99))
            per_hour = tm.groupby("hour").size()
            assert row["peakHour"] == per_hour.idxmax()
            assert row["peakHourMessages"] == per_hour.max()
            assert row["peakMessagesPerSec"] == pytest.approx(per_hour.max() / 3600)
            per_queue = tm.groupby("queueId").size().reindex(range(spec.queues), fill_value=0)
            assert row["queueSkew"] == pytest.approx(per_queue.max() / per_queue.mean())
            assert row["queues"] == spec.queues
        # the generator's busiest hour is the one it was told to make the peak
        busiest = m.groupby("hour").size().idxmax()
        assert busiest == truth.spec.start_ms // 3_600_000 + truth.spec.peak_hour


def test_throughput_per_minute_and_hour(two_brokers):
    tables, truths, _ = two_brokers
    mins = tables["throughput_minute"]
    hours = tables["throughput_hour"]
    for name, truth in truths.items():
        m = truth.messages
        want = m.groupby(["topic", m["storeTimestamp"] // 60000])["size"].agg(["size", "sum"])
        got = mins[mins["broker"] == name].set_index(["topic", "minute"])[["messages", "bytes"]]
        assert len(got) == len(want)
        assert (got.loc[want.index, "messages"].to_numpy() == want["size"].to_numpy()).all()
        assert (got.loc[want.index, "bytes"].to_numpy() == want["sum"].to_numpy()).all()
        assert hours[hours["broker"] == name]["messages"].sum() == len(m)


def test_consumer_groups_lag_rate_and_idle_groups(two_brokers):
    tables, truths, _ = two_brokers
    groups = tables["groups"].set_index(["broker", "group"])
    lagq = tables["group_queues"].set_index(["broker", "group", "topic", "queueId"])
    for name, truth in truths.items():
        m = truth.messages
        totals: dict[str, list[float]] = {}
        for r in truth.offsets.itertuples():
            qm = m[(m["topic"] == r.topic) & (m["queueId"] == r.queueId)]
            lag = int((qm["queueOffset"] >= r.offset).sum())
            lag_bytes = int(qm.loc[qm["queueOffset"] >= r.offset, "size"].sum())
            row = lagq.loc[(name, r.group, r.topic, r.queueId)]
            assert row["lagMessages"] == lag and row["lagBytes"] == lag_bytes
            t = totals.setdefault(r.group, [0, 0, 0])
            t[0] += lag
            t[1] += lag_bytes
            t[2] += r.offset - r.previousOffset
        for group, (lag, lag_bytes, progress) in totals.items():
            row = groups.loc[(name, group)]
            assert row["lagMessages"] == lag and row["lagBytes"] == lag_bytes
            rate = progress / (truth.spec.flush_consumer_offset_interval / 1000)
            assert row["consumeRatePerSec"] == pytest.approx(rate)
            if rate > 0 and lag:
                assert row["drainSeconds"] == pytest.approx(lag / rate)
        assert groups.loc[(name, "billing"), "status"] == "consuming"
        assert groups.loc[(name, "analytics"), "status"] == "stalled"
        assert groups.loc[(name, "archiver"), "status"] == "caught up"
        assert groups.loc[(name, "reporting"), "status"] == "no offsets"
        idle = set(groups.loc[name][groups.loc[name]["noConsumption"]].index)
        assert idle == {"analytics", "reporting"}


def test_disk_figures_and_recommendations(two_brokers, stores):
    tables, truths, _ = two_brokers
    base, _ = stores
    disk = tables["disk"].set_index("broker")
    rec = tables["recommendations"]
    for name, truth in truths.items():
        m, spec = truth.messages, truth.spec
        row = disk.loc[name]
        on_disk = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(base / name) for f in fs)
        assert row["storeFileBytes"] == on_disk
        first, last = m["storeTimestamp"].min(), m["storeTimestamp"].max()
        span_ms = last - first
        growth = (m["size"].sum() + 20 * len(m)) / (span_ms / 86_400_000)
        assert row["bytesPerDayObserved"] == pytest.approx(growth)
        # the busiest hour, its bytes over the part of it the data covers
        hour = m["storeTimestamp"] // 3_600_000
        hourly = m.groupby(hour)["size"].agg(["size", "sum"])
        begin = hourly.index.to_numpy() * 3_600_000
        cover = np.clip(np.minimum(begin + 3_600_000, last) - np.maximum(begin, first), 60_000, 3_600_000)
        peak = max(float(((hourly["sum"] + 20 * hourly["size"]) / (cover / 86_400_000)).max()), growth)
        assert row["bytesPerDayPeak"] == pytest.approx(peak)
        assert row["bytesPerDayPeak"] >= row["bytesPerDayObserved"]
        assert row["bytesPerDayLow"] <= row["bytesPerDayHigh"]
        assert row["retentionHeldHours"] == pytest.approx(span_ms / 3_600_000)
        assert row["fileReservedTime"] == spec.file_reserved_time
        assert bool(row["retentionBelowReserved"]) and bool(row["shortWindow"])
        index_file = 40 + spec.index_slots * 4 + spec.index_entries * 20

        def level(per_day, hold_h, m=m, span_ms=span_ms, spec=spec, index_file=index_file):
            msgs = len(m) / (span_ms / 3_600_000) * hold_h
            queues = sum(t.queues for t in spec.topics)
            # each queue's sparse file past its entries: a page, or half its share of them
            ahead = min(spec.cq_file_size, max(4096, min(1 << 20, msgs * 20 / queues / 2)))
            fixed = (2 * spec.commitlog_file_size + queues * ahead
                     + math.ceil(msgs / (spec.index_entries - 1)) * index_file)
            return per_day / 24 * hold_h + fixed

        # the store levels off at fileReservedTime + the day until deleteWhen: far below 75% of 1 GiB
        assert row["steadyBytesPeak"] == pytest.approx(level(peak, spec.file_reserved_time + 24))
        assert row["steadyBytesPeak"] < 0.75 * DISK
        assert math.isinf(row["daysUntilRatioObserved"]) and math.isinf(row["daysUntilRatioPeak"])
        assert row["diskNeededPeak"] == pytest.approx(level(peak, 12 + 24) / 0.75)
        daily = tables["disk_daily"]
        assert daily[daily["broker"] == name]["messageBytes"].sum() == m["size"].sum()
        for t in spec.topics:
            tm = m[m["topic"] == t.name]
            peak_rate = tm.groupby(tm["storeTimestamp"] // 60_000).size().max() / 60
            need = max(1, math.ceil(peak_rate / TARGET_RATE))
            got = rec[(rec["broker"] == name) & (rec["kind"] == "queues") & (rec["target"] == t.name)]
            if need > t.queues:  # raised from the busiest minute
                assert got.iloc[0]["recommended"] == need and got.iloc[0]["current"] == t.queues
            else:  # fewer queues are never advised on less than a day of data
                assert got.empty
        d = rec[(rec["broker"] == name) & (rec["kind"] == "disk")]
        assert d.empty  # 1 GiB is enough for 12 h at the peak growth


def test_index_headers_and_report_files(two_brokers):
    tables, truths, out = two_brokers
    idx = tables["index_files"]
    for name, truth in truths.items():
        mine = idx[idx["broker"] == name]
        # one key (UNIQ_KEY) per message; entry 0 of every file is unused
        assert (mine["indexCount"] - 1).sum() == len(truth.messages)
        assert mine["endTimestamp"].max() == truth.messages["storeTimestamp"].max()
    assert tables["issues"].empty
    html = (out / "report.html").read_text()
    for needle in ("id='summary'", "Consumer groups", "Until diskMaxUsedSpaceRatio", "Recommendations", "broker-b"):
        assert needle in html
    for name in ("queues", "topics", "groups", "disk", "throughput_hour", "recommendations", "settings"):
        assert pd.read_parquet(out / "tables" / f"{name}.parquet").shape == tables[name].shape
        assert (out / "tables" / f"{name}.csv").stat().st_size > 0
    for broker in truths:
        for chart in ("throughput", "lag", "disk"):
            png = out / "charts" / f"{broker.replace('-', '_')}-{chart}.png"
            assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
            assert f"src='charts/{png.name}'" in html


def test_binaryfile_reader_gives_the_same_tables(two_brokers, spark_session, stores, tmp_path):
    tables, truths, _ = two_brokers
    base, _ = stores
    brokers = [BrokerInput(name, str(base / name), disk_size=DISK) for name in truths]
    other = _report(spark_session, tmp_path, brokers, reader="binaryfile")
    for name in ("queues", "topics", "throughput_minute", "groups", "group_queues", "disk", "recommendations"):
        pd.testing.assert_frame_equal(other[name], tables[name], check_dtype=False)


def test_empty_store(spark_session, tmp_path):
    root = tmp_path / "empty"
    gen_store.generate(str(root), gen_store.GenSpec(messages=0))
    tables = _report(spark_session, tmp_path / "out", [BrokerInput("empty", str(root))])
    assert tables["queues"]["messages"].sum() == 0
    assert tables["throughput_minute"].empty and tables["issues"].empty
    assert (tmp_path / "out" / "report.html").exists()


@pytest.fixture(scope="module")
def damaged(stores, tmp_path_factory):
    """broker-b copied, then: a commit log file cut short, one record's magic
    broken, a consume queue file cut to a non-multiple of 20, topics.json garbled."""
    base, truths = stores
    root = tmp_path_factory.mktemp("damaged") / "broker-b"
    shutil.copytree(base / "broker-b", root)
    m = truths["broker-b"].messages.sort_values("physicalOffset")
    size = truths["broker-b"].spec.commitlog_file_size
    cl = root / "commitlog"
    files = sorted(os.listdir(cl))
    last = cl / files[-1]
    last_start = int(files[-1])
    in_last = m[m["physicalOffset"] >= last_start]
    cut = int(in_last.iloc[len(in_last) // 2]["physicalOffset"]) - last_start + 10
    with open(last, "r+b") as fh:
        fh.truncate(cut)
    victim = m[m["physicalOffset"] < size].iloc[100]
    with open(cl / files[0], "r+b") as fh:
        fh.seek(int(victim["physicalOffset"]) + 4)
        fh.write(b"\0\0\0\0")
    cq = root / "consumequeue" / "Payments" / "0" / f"{0:020d}"
    with open(cq, "r+b") as fh:
        fh.truncate(20 * 50 + 7)
    (root / "config" / "topics.json").write_text("{not json")
    lost_tail = int((in_last["physicalOffset"] - last_start >= cut - 10).sum())
    return root, truths["broker-b"], lost_tail, victim


@pytest.mark.parametrize("reader", ["arrow", "binaryfile"])
def test_damaged_files_are_reported_not_fatal(spark_session, damaged, tmp_path, reader):
    root, truth, lost_tail, victim = damaged
    tables = _report(spark_session, tmp_path / "out", [BrokerInput("broker-b", str(root))], reader=reader)
    issues = "\n".join(tables["issues"]["issue"])
    assert "truncated" in issues and "commit log file is" in issues
    assert "unreadable record" in issues and f"offset {int(victim['physicalOffset'])}" in issues
    assert "Payments/0/" in issues and "consume queue file is 1007 bytes" in issues
    assert "topics.json: unparsable JSON" in issues
    assert "commit log records" in issues  # consume queue vs commit log disagreement
    q = tables["queues"].set_index(["topic", "queueId"])
    assert q.loc[("Payments", 0), "entries"] == 50
    assert q["records"].sum() == len(truth.messages) - lost_tail - 1


def test_cli_exit_status_and_output(damaged, stores, tmp_path):
    root, _, _, _ = damaged
    base, _ = stores
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    bad = subprocess.run([sys.executable, "-m", "spark.capacity", "--master", "local[1]", "--out",
                          str(tmp_path / "bad"), "--broker", f"damaged={root}", "--broker", f"good={base / 'broker-a'}",
                          "--conf", "spark.driver.memory=1g"],
                         capture_output=True, text=True, timeout=180, env=env)
    assert bad.returncode == 3, bad.stderr[-2000:]
    assert "problem(s) found" in bad.stderr and "[rmq-capacity] listed damaged" in bad.stderr
    assert (tmp_path / "bad" / "report.html").exists()
    brokers = pd.read_csv(tmp_path / "bad" / "tables" / "brokers.csv")
    assert sorted(brokers["broker"]) == ["damaged", "good"]
    missing = subprocess.run([sys.executable, "-m", "spark.capacity", "--master", "local[1]",
                              str(tmp_path / "nowhere")], capture_output=True, text=True, timeout=120, env=env)
    # checked before Spark starts: no JVM start-up for a typo
    assert missing.returncode == 2 and f"rmq-capacity: not found: {tmp_path / 'nowhere'}" in missing.stderr
    assert "Spark" not in missing.stderr
    usage = subprocess.run([sys.executable, "-m", "spark.capacity", "--broker", "x"],
                           capture_output=True, text=True, timeout=60, env=env)
    assert usage.returncode == 2 and "NAME=PATH" in usage.stderr


def test_a_local_run_stays_on_loopback(spark_session):
    conf = spark_session.sparkContext.getConf()
    assert conf.get("spark.driver.host") == "127.0.0.1"
    assert conf.get("spark.driver.bindAddress") == "127.0.0.1"
    assert os.environ["SPARK_LOCAL_IP"] == "127.0.0.1"
