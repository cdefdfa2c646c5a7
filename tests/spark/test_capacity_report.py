"""The capacity report as a planner reads it: a fleet of four brokers given as
bare store directories (named from their own config), one with only six
minutes of data, one whose settings come from three places; summary.json's
headline figures; and the page rendered by headless Chromium at 1280 px."""

from __future__ import annotations

import html
import json
import math
import os
import re
import shutil
import subprocess
import sys

import pandas as pd
import pytest

from spark import gen_store
from spark.capacity import run_report
from spark.job import BrokerInput
from spark.report import Options

pytestmark = pytest.mark.timeout(300)

GIB = 1 << 30
TARGET_RATE = 0.5


def _topics_json(root, add: dict) -> None:
    path = os.path.join(root, "config", "topics.json")
    with open(path, encoding="utf-8") as fh:
        doc = json.load(fh)
    doc["topicConfigTable"].update(add)
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(doc, fh)


@pytest.fixture(scope="module")
def fleet(spark_session, tmp_path_factory):
    base = tmp_path_factory.mktemp("fleet")
    spec = gen_store.GenSpec
    truths = {
        "alpha": gen_store.generate(str(base / "alpha"), spec(messages=3000, hours=4, seed=31, broker_name="alpha")),
        "beta": gen_store.generate(str(base / "beta-dir"), spec(messages=2000, hours=3, seed=32, broker_name="beta")),
        "gamma": gen_store.generate(str(base / "gamma"), spec(messages=2000, hours=0.1, seed=33,
                                                               broker_name="gamma")),
    }
    sparse = spec(messages=2000, hours=2, seed=34, broker_name="delta")
    sparse.topics.append(gen_store.TopicSpec("Sparse", 16, 0.0, 100, 200))
    truths["delta"] = gen_store.generate(str(base / "delta"), sparse)
    # beta: no broker.properties; topics.json holds the broker's own topic
    # (1/1 queues, perm 7) beside its cluster's (16 queues)
    os.remove(base / "beta-dir" / "config" / "broker.properties")
    own = {"order": False, "perm": 7, "readQueueNums": 1, "writeQueueNums": 1, "topicFilterType": "SINGLE_TAG",
           "topicSysFlag": 0}
    _topics_json(base / "beta-dir", {"beta": dict(own, topicName="beta"),
                                     "DefaultCluster": dict(own, topicName="DefaultCluster", readQueueNums=16,
                                                            writeQueueNums=16)})
    # delta: broker.properties < --broker-conf < brokerRuntime.properties
    conf = base / "delta.properties"
    conf.write_text("diskMaxUsedSpaceRatio=80\nfileReservedTime=72\n")
    (base / "delta" / "config" / "brokerRuntime.properties").write_text("fileReservedTime=24\n")
    brokers = [BrokerInput(d, str(base / d), named_by="directory") for d in ("alpha", "beta-dir", "gamma", "delta")]
    out = tmp_path_factory.mktemp("report")
    opts = Options(retention_hours=None, target_queue_rate=TARGET_RATE)
    tables = run_report(spark_session, brokers, {"delta": str(conf)}, opts, str(out), lambda msg: None, "auto",
                        {"alpha": GIB, "beta": GIB // 2, "delta": GIB})
    summary = json.loads((out / "summary.json").read_text())
    return tables, summary, truths, out, conf, base


def _broker(summary: dict, name: str) -> dict:
    return next(b for b in summary["brokers"] if b["name"] == name)


def test_brokers_are_named_from_their_store(fleet):
    tables, summary, *_ = fleet
    named = dict(zip(tables["brokers"]["broker"], tables["brokers"]["namedBy"], strict=True))
    assert named == {"alpha": "store config/broker.properties", "beta": "config/topics.json",
                     "gamma": "store config/broker.properties", "delta": "store config/broker.properties"}
    # a disk size given by brokerName reaches the broker found in directory beta-dir
    assert _broker(summary, "beta")["diskSize"] == GIB // 2
    assert _broker(summary, "gamma")["diskSize"] is None
    assert any("--disk-size gamma=SIZE" in w for w in _broker(summary, "gamma")["warnings"])


def test_settings_say_where_each_value_came_from(fleet):
    tables, summary, _, _, conf, _ = fleet
    s = tables["settings"]
    delta = s[s["broker"] == "delta"].set_index("setting")
    assert delta.loc["fileReservedTime", "value"] == "24"
    assert delta.loc["fileReservedTime", "source"] == "store config/brokerRuntime.properties"
    assert delta.loc["fileReservedTime", "reads"] == "24 h"
    assert delta.loc["diskMaxUsedSpaceRatio", "source"] == f"--broker-conf {conf}"
    assert delta.loc["mappedFileSizeCommitLog", "reads"] == "4.0 MiB"
    assert delta.loc["deleteWhen", "source"].startswith("4.9.8 default")
    disk = tables["disk"].set_index("broker")
    assert disk.loc["delta", "fileReservedTime"] == 24
    assert disk.loc["delta", "diskMaxUsedSpaceRatio"] == pytest.approx(0.8)
    assert _broker(summary, "delta")["settings"]["fileReservedTime"] == {
        "value": "24", "source": "store config/brokerRuntime.properties"}
    beta = s[s["broker"] == "beta"].set_index("setting")
    # no config at all: the file sizes come from the files themselves
    assert beta.loc["mappedFileSizeCommitLog", "source"] == "length of the commitlog files"
    assert beta.loc["fileReservedTime", "source"].startswith("4.9.8 default")
    assert any("fileReservedTime=72 assumed" in w for w in _broker(summary, "beta")["warnings"])


def test_a_short_window_is_flagged_and_never_shrinks_anything(fleet):
    tables, summary, truths, *_ = fleet
    g = _broker(summary, "gamma")
    m = truths["gamma"].messages
    assert g["window"]["short"] and g["window"]["hours"] == pytest.approx(
        (m["storeTimestamp"].max() - m["storeTimestamp"].min()) / 3_600_000)
    assert g["window"]["hours"] < 0.2
    assert any(w.startswith("only 6 min of data") for w in g["warnings"]), g["warnings"]
    growth = g["growthBytesPerDay"]
    assert growth["peak"] >= growth["observed"] > 0
    busiest = m.groupby(m["storeTimestamp"] // 60_000).size().max() / 60
    assert g["peak"]["messagesPerSec"] == pytest.approx(busiest)
    rec = tables["recommendations"]
    queues = rec[rec["kind"] == "queues"]
    assert (queues["recommended"] > queues["current"]).all()  # raised where needed, never lowered
    assert not queues[queues["broker"] == "gamma"].empty


def test_summary_json_headlines(fleet):
    tables, summary, truths, *_ = fleet
    f = summary["fleet"]
    assert f["brokers"] == 4
    assert f["messages"] == sum(len(t.messages) for t in truths.values())
    assert f["storeBytes"] == int(tables["disk"]["storeFileBytes"].sum())
    assert f["recommendations"] == len(tables["recommendations"])
    assert f["groupsAtRisk"] == int(tables["groups"]["atRisk"].sum()) > 0
    peaks = [b["peak"]["messagesPerSec"] for b in summary["brokers"]]
    assert f["peak"]["messagesPerSec"] >= max(peaks)
    full = [(b["daysUntilFull"]["peak"], b["name"]) for b in summary["brokers"]
            if isinstance(b["daysUntilFull"]["peak"], float)]
    if full:
        assert f["soonestFull"] == {"broker": min(full)[1], "daysAtPeak": min(full)[0]}
    alpha = _broker(summary, "alpha")
    assert alpha["busiestTopic"]["topic"] == truths["alpha"].messages["topic"].value_counts().index[0]
    for b in summary["brokers"]:
        for r in b["recommendations"]:
            assert r["action"] and r["basis"]
            if r["kind"] in ("queues", "disk", "lagging-group"):  # the figure behind it
                assert any(ch.isdigit() for ch in r["basis"]), r
        days = b["daysUntilFull"]["observed"]
        assert days is None or days == "never" or (isinstance(days, float) and math.isfinite(days))


CHECK = """
<script>
window.addEventListener('load', function () {
  document.querySelectorAll('details').forEach(function (d) { d.open = true; });
  document.querySelectorAll('table.folded').forEach(function (t) { t.classList.remove('folded'); });
  var r = {width: window.innerWidth, page: document.documentElement.scrollWidth, wide: []};
  r.summary = document.querySelectorAll('#summary .card').length;
  r.text = document.body.innerText;
  r.folded = Array.prototype.map.call(document.querySelectorAll('p.none'), function (p) { return p.innerText; });
  document.querySelectorAll('body *').forEach(function (el) {
    var box = el.getBoundingClientRect();
    if (box.width && box.right > window.innerWidth + 0.5) r.wide.push(el.tagName + ' ' + el.className);
  });
  document.querySelectorAll('div.table').forEach(function (d) {
    if (d.scrollWidth > d.clientWidth + 1) r.wide.push('table ' + d.innerText.slice(0, 60));
  });
  var pre = document.createElement('pre');
  pre.id = 'rmq-check';
  pre.textContent = JSON.stringify(r);
  document.body.appendChild(pre);
});
</script>
"""


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    pytest.fail("headless Chromium is needed to render the report (Debian: apt-get install chromium)")


def test_the_page_reads_well_at_1280_px(fleet, tmp_path):
    _, summary, truths, out, *_ = fleet
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "<details class='broker' id='broker-alpha'>" in page  # more than 3 brokers: folded
    probe = out / "probe.html"
    probe.write_text(page.replace("</body>", CHECK + "</body>"), encoding="utf-8")
    run = subprocess.run(
        [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,1400", "--virtual-time-budget=10000",
         "--dump-dom", probe.as_uri()],
        capture_output=True, text=True, timeout=120)
    found = re.search(r"<pre id=\"rmq-check\">(.*?)</pre>", run.stdout, re.S)
    assert found, f"chromium exit {run.returncode}: {run.stderr[-2000:]}"
    r = json.loads(html.unescape(found.group(1)))
    assert r["width"] == 1280
    assert r["summary"] >= 6
    assert r["page"] <= 1280 and not r["wide"], r["wide"][:10]
    text = r["text"]
    assert "Recommendations" in text and "Until diskMaxUsedSpaceRatio" in text
    epoch_ms = re.findall(r"(?<![\w.,/-])1\d{12}(?![\w,])", text)
    assert not epoch_ms, epoch_ms[:5]
    raw = re.findall(r"(?<![\w.,/-])\d{6,}(?![\w,])", text)
    assert not raw, raw[:5]
    for b in summary["brokers"]:
        assert b["name"] in text
    assert any("16 empty queues of 1 topics folded" in p for p in r["folded"]), r["folded"]
    for b in summary["brokers"]:  # the store's clock, as UTC dates
        first = truths[b["name"]].messages["storeTimestamp"].min()
        assert pd.Timestamp(first, unit="ms").strftime("%Y-%m-%d %H:%M UTC") in text


def test_cli_takes_a_broker_name_from_the_store_for_disk_size(fleet, tmp_path):
    base = fleet[-1]
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    args = [sys.executable, "-m", "spark.capacity", "--master", "local[1]", "--quiet", "--conf",
            "spark.driver.memory=1g", "--out", str(tmp_path / "cli"), os.path.join(base, "alpha"),
            os.path.join(base, "beta-dir")]
    ok = subprocess.run(args + ["--disk-size", "beta=2G"], capture_output=True, text=True, timeout=180, env=env)
    assert ok.returncode == 0, ok.stderr[-2000:]
    summary = json.loads((tmp_path / "cli" / "summary.json").read_text())
    assert _broker(summary, "beta")["diskSize"] == 2 * GIB and _broker(summary, "alpha")["diskSize"] is None
    bad = subprocess.run(args + ["--disk-size", "nobody=2G"], capture_output=True, text=True, timeout=180, env=env)
    assert bad.returncode == 2 and "--disk-size: unknown broker nobody" in bad.stderr

