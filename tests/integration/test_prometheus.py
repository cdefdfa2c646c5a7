"""The broker's Prometheus endpoint (metricsExporterType=PROM) against a real
rmq-broker: after producing and consuming with the rmq client, a scrape
parses as Prometheus text and carries RocketMQ 5.3's metric names, types and
labels with the figures the traffic implies; a bad exporter type stops the
start-up with one line."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import pytest_asyncio
from prometheus_client.parser import text_string_to_metric_families

from rmq.client import Message, Producer
from rmq.common.codes import RequestCode
from rmq.remoting import RemotingClient, RemotingCommand
from rmq.testing.messaging import running_cluster
from rmq.testing.procs import free_port
from tests.integration.admin_cli import recording_consumer

# once: the metrics exporter, no compiled/twin pair of its own
pytestmark = [pytest.mark.once, pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(120)]
TOPIC, GROUP, SENT = "TopicProm", "cgProm", 8
PORT = free_port(keep=True)  # (bound when the module runs)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def cluster(tmp_path_factory):
    extra = f"metricsExporterType=PROM\nmetricsPromExporterHost=127.0.0.1\n" \
            f"metricsPromExporterPort={PORT}\n"
    async with running_cluster(tmp_path_factory.mktemp("prom"), extra) as c:
        await c.create_topic(TOPIC, queues=2)
        async with Producer("pgProm", client_config=c.client_config("prom-p")) as p:
            for i in range(SENT):
                await p.send(Message(TOPIC, b"x" * 2000 if i % 2 else b"small"))
            async with recording_consumer(c, GROUP, TOPIC, "*", SENT):
                pass
            await p.send(Message(TOPIC, b"backlog"))  # one left for the lag
        yield c


async def scrape(path: str = "/metrics") -> tuple[int, str, str]:
    def get():
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{PORT}{path}", timeout=10) as r:
                return r.status, r.headers["Content-Type"], r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.headers["Content-Type"], e.read().decode()
    return await asyncio.to_thread(get)


def samples(text: str) -> dict[str, list]:
    out: dict[str, list] = {}
    for family in text_string_to_metric_families(text):
        out.setdefault(family.name + ":" + family.type, []).extend(family.samples)
    return out


async def test_scrape_has_rocketmq_5_metrics(cluster):
    status, ctype, text = await scrape()
    assert status == 200 and ctype.startswith("text/plain")
    got = samples(text)
    for name in ("rocketmq_messages_in:counter", "rocketmq_messages_out:counter",
                 "rocketmq_throughput_in:counter", "rocketmq_throughput_out:counter",
                 "rocketmq_message_size:histogram", "rocketmq_producer_connections:gauge",
                 "rocketmq_consumer_connections:gauge", "rocketmq_consumer_lag_messages:gauge",
                 "rocketmq_consumer_lag_latency:gauge", "rocketmq_consumer_inflight_messages:gauge",
                 "rocketmq_consumer_queueing_latency:gauge",
                 "rocketmq_consumer_ready_messages:gauge",
                 "rocketmq_send_to_dlq_messages:counter", "rocketmq_processor_watermark:gauge",
                 "rocketmq_topic_number:gauge", "rocketmq_consumer_group_number:gauge",
                 "rocketmq_half_messages:gauge", "rocketmq_commit_messages:counter",
                 "rocketmq_rollback_messages:counter", "rocketmq_storage_size:gauge",
                 "rocketmq_storage_flush_behind_bytes:gauge",
                 "rocketmq_storage_dispatch_behind_bytes:gauge",
                 "rocketmq_storage_disk_ratio:gauge", "rocketmq_broker_permission:gauge"):
        assert name in got, name

    def one(name: str, **labels):
        found = [s for s in got[name] if all(s.labels.get(k) == v for k, v in labels.items())]
        assert len(found) == 1, (name, labels, found)
        return found[0]

    msgs_in = one("rocketmq_messages_in:counter", topic=TOPIC)
    assert msgs_in.name == "rocketmq_messages_in_total" and msgs_in.value == SENT + 1
    assert msgs_in.labels["cluster"] == "DefaultCluster" and msgs_in.labels["node_type"] == "broker"
    assert msgs_in.labels["node_id"] == "broker-a" and msgs_in.labels["is_system"] == "false"
    assert one("rocketmq_throughput_in:counter", topic=TOPIC).value > 4 * 2000
    out = one("rocketmq_messages_out:counter", topic=TOPIC, consumer_group=GROUP)
    assert out.value == SENT and out.labels["is_retry"] == "false"
    assert one("rocketmq_consumer_lag_messages:gauge", topic=TOPIC,
               consumer_group=GROUP).value == 1
    assert one("rocketmq_consumer_lag_latency:gauge", topic=TOPIC, consumer_group=GROUP).value >= 0
    sizes = [s for s in got["rocketmq_message_size:histogram"] if s.labels.get("topic") == TOPIC]
    buckets = {s.labels["le"]: s.value for s in sizes if s.name.endswith("_bucket")}
    assert buckets["1024.0"] == SENT // 2 + 1 and buckets["4096.0"] == SENT + 1  # small ones, all
    assert buckets["+Inf"] == SENT + 1
    assert one("rocketmq_broker_permission:gauge").value == 6
    assert one("rocketmq_topic_number:gauge").value >= 2
    assert one("rocketmq_storage_size:gauge").value > 0
    assert {s.labels["processor"] for s in got["rocketmq_processor_watermark:gauge"]} >= \
        {"send", "pull"}
    # rocketmq_rpc_latency: every request timed under 5.3's code names and buckets
    latency = got["rocketmq_rpc_latency:histogram"]
    sends = [s for s in latency if s.labels.get("request_code") == "send_message_v2"
             and s.labels["response_code"] == "success" and s.labels["result"] == "success"]
    counts = {s.name.rsplit("_", 1)[1]: s.value for s in sends if "le" not in s.labels}
    assert counts["count"] == SENT + 1 and counts["sum"] >= 0
    les = [s.labels["le"] for s in sends if s.name.endswith("_bucket")]
    assert les == ["1.0", "3.0", "5.0", "7.0", "10.0", "100.0", "1000.0", "2000.0", "3000.0",
                   "+Inf"]
    assert all(s.labels["protocol_type"] == "remoting" and s.labels["is_long_polling"] == "false"
               for s in sends)
    codes = {s.labels["request_code"] for s in latency}
    assert {"pull_message", "heart_beat", "update_and_create_topic"} <= codes, codes
    created = [s for s in got["rocketmq_topic_create_execution_time:histogram"]
               if s.name.endswith("_count")]
    assert [(s.labels["invocation_status"], s.labels["is_system"], s.value)
            for s in created] == [("success", "false", 1)]


DASHBOARD = Path(__file__).resolve().parents[2] / "contrib" / "grafana" / "rmq-broker.json"


def dashboard_metrics() -> dict[str, set[str]]:
    """metric family -> the labels the Grafana dashboard's queries group or filter by."""
    used: dict[str, set[str]] = {}
    for panel in json.loads(DASHBOARD.read_text())["panels"]:
        for target in panel["targets"]:
            expr = target["expr"]
            groups = set()
            for by in re.findall(r"by \(([^)]*)\)", expr):
                groups |= {label.strip() for label in by.split(",")} - {"le"}
            for name, selector in re.findall(r"(rocketmq_\w+)(?:\{([^}]*)\})?", expr):
                family = re.sub(r"_(bucket|count|sum|total)$", "", name)
                labels = set(re.findall(r"(\w+)=~?\"", selector or ""))
                used.setdefault(family, set()).update(groups | labels)
    return used


async def test_grafana_dashboard_queries_what_is_exported(cluster):
    """Every metric and label contrib/grafana/rmq-broker.json asks for is one the
    broker (or, for rocketmq_namesrv_*, the name server) exports."""
    _, _, text = await scrape()
    labels: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        labels[family.name] = {k for sample in family.samples for k in sample.labels}
    used = dashboard_metrics()
    assert len(used) >= 20
    for family, wanted in used.items():
        if family.startswith("rocketmq_namesrv_"):
            continue  # checked against the name server below
        assert family in labels, family
        if labels[family]:  # a family with no series yet (no producer now) has no labels
            assert wanted <= labels[family], (family, wanted - labels[family])


async def test_other_paths_and_methods(cluster):
    status, _, _ = await scrape("/nothing")
    assert status == 404
    status, _, text = await scrape("/")
    assert status == 200 and "rocketmq_messages_in_total" in text


async def test_unknown_exporter_type_stops_the_broker(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text(f"brokerClusterName=C\nbrokerName=b\nlistenPort={free_port()}\n"
                    f"storePathRootDir={tmp_path / 'store'}\nmetricsExporterType=GRPC\n")
    r = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "rmq.broker.startup", "-c", str(conf)],
                       capture_output=True, text=True, timeout=60,
                       env={"ROCKETMQ_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert r.returncode != 0
    assert "metricsExporterType=GRPC is not supported (DISABLE or PROM)" in r.stderr


async def test_name_server_endpoint(cluster, tmp_path):
    """A name server with the same settings serves its own gauges, and shows
    the cluster's broker once that broker registers with it."""
    from rmq.testing.cluster import start_namesrv

    ns_port, metrics_port = free_port(), free_port()
    ns = start_namesrv(tmp_path, ns_port, "metricsExporterType=PROM\n"
                       f"metricsPromExporterHost=127.0.0.1\nmetricsPromExporterPort={metrics_port}\n")
    try:
        def get():
            for _ in range(100):  # the endpoint opens just after the remoting port
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics",
                                                timeout=10) as r:
                        return r.read().decode()
                except ConnectionRefusedError:
                    pass
                except urllib.error.URLError as exc:
                    if not isinstance(exc.reason, ConnectionRefusedError):
                        raise
                time.sleep(0.05)
            raise AssertionError("no metrics endpoint")
        await asyncio.to_thread(get)  # open: now one remoting request to be timed
        client = RemotingClient()
        try:
            response = await client.invoke(f"127.0.0.1:{ns_port}", RemotingCommand.create_request(
                RequestCode.GET_BROKER_CLUSTER_INFO), 5000)
            assert response.code == 0
        finally:
            await client.close()
        got = samples(await asyncio.to_thread(get))
        assert [s.value for s in got["rocketmq_topic_number:gauge"]] == [0]
        assert got["rocketmq_namesrv_connections:gauge"][0].labels == \
            {"node_type": "namesrv", "node_id": str(ns_port)}
        assert "rocketmq_namesrv_live_brokers:gauge" in got
        assert {s.labels["request_code"] for s in got["rocketmq_rpc_latency:histogram"]} >= \
            {"get_broker_cluster_info"}
        for family, wanted in dashboard_metrics().items():
            if family.startswith("rocketmq_namesrv_"):
                exported = {k for s in got[family + ":gauge"] for k in s.labels}
                assert wanted <= exported | {"cluster"}, (family, wanted - exported)
    finally:
        ns.kill()
