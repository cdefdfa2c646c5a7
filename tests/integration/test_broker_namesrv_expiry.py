"""How a broker leaves the name server's routes without unregistering:

* SIGKILL: the kernel closes the broker's connections, so the name server
  drops the broker at once (channel close), long before brokerChannelExpiredMillis;
* a broker that stays connected but stops registering (here the broker's own
  BrokerOuterAPI, registering once from the test process) is removed by the
  scan after brokerChannelExpiredMillis (shortened on the name server)."""

from __future__ import annotations

import asyncio
import time

import pytest

from rmq.broker.outer_api import BrokerIdentity, BrokerOuterAPI
from rmq.common.codes import RequestCode, ResponseCode
from rmq.common.topic_config import TopicConfig, TopicConfigSerializeWrapper
from rmq.remoting import RemotingClient, RemotingCommand
from rmq.remoting.config import NettyClientConfig
from rmq.testing.cluster import Cluster, start_namesrv
from rmq.testing.procs import free_port

R = RequestCode


async def route_code(client: RemotingClient, ns: str, topic: str) -> int:
    request = RemotingCommand.create_request(R.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    return (await client.invoke(ns, request, 3000)).code


async def seconds_until_gone(client: RemotingClient, ns: str, topic: str,
                             timeout: float) -> float:
    began = time.monotonic()
    while await route_code(client, ns, topic) == ResponseCode.SUCCESS:
        assert time.monotonic() - began < timeout, f"{topic} still routed after {timeout} s"
        await asyncio.sleep(0.05)
    return time.monotonic() - began


@pytest.mark.timeout(60)
async def test_sigkilled_broker_leaves_routes_at_once(tmp_path):
    cluster = Cluster(tmp_path)  # name server with the default 120 s expiry
    try:
        broker = cluster.start_broker()
        await cluster.wait_registered()
        broker.kill()
        ns = f"127.0.0.1:{cluster.ns_port}"
        assert await seconds_until_gone(cluster.client, ns, "broker-a", 5) < 5
    finally:
        await cluster.close()


@pytest.mark.timeout(60)
async def test_silent_connected_broker_expires(tmp_path):
    ns_port = free_port()
    namesrv = start_namesrv(tmp_path, ns_port, "brokerChannelExpiredMillis=2000\n"
                                              "scanNotActiveBrokerIntervalMillis=300\n")
    ns = f"127.0.0.1:{ns_port}"
    api = BrokerOuterAPI(NettyClientConfig())
    api.update_name_server_address_list(ns)
    other = RemotingClient()
    try:
        who = BrokerIdentity("DefaultCluster", "127.0.0.1:30911", "broker-silent", 0)
        wrapper = TopicConfigSerializeWrapper({"TopicSilent": TopicConfig("TopicSilent", 4, 4)})
        results = await api.register_broker_all(who, "127.0.0.1:30912", wrapper, [], False,
                                                3000, False)
        assert len(results) == 1
        registered = time.monotonic()
        assert await route_code(other, ns, "TopicSilent") == ResponseCode.SUCCESS
        await seconds_until_gone(other, ns, "TopicSilent", 10)
        total = time.monotonic() - registered
        assert 2.0 <= total <= 6.0, total  # expiry 2 s + at most one 0.3 s scan (+ slack)
        # the broker's connection was never closed: it still gets answers on it
        version = RemotingCommand.create_request(R.GET_NAMESRV_CONFIG)
        assert (await api.client.invoke(ns, version, 3000)).code == ResponseCode.SUCCESS
    finally:
        await other.close()
        await api.close()
        namesrv.kill()
