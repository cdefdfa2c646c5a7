"""The name server's clusterTest mode: a topic it does not route is looked up
in the product environment's name servers (NAMESRV_ADDR), as 4.9.8's
ClusterTestRequestProcessor does; without the mode it is not found."""

from __future__ import annotations

import pytest
import pytest_asyncio

from rmq.common.codes import RequestCode as R
from rmq.common.codes import ResponseCode as RC
from rmq.remoting import RemotingClient, RemotingCommand
from rmq.testing.cluster import start_namesrv
from rmq.testing.messaging import running_cluster
from rmq.testing.procs import free_port

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(60)]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def product(tmp_path_factory):
    async with running_cluster(tmp_path_factory.mktemp("product")) as c:
        await c.create_topic("ProductTopic", queues=3)
        yield c


async def _route(addr: str, topic: str) -> RemotingCommand:
    client = RemotingClient()
    try:
        return await client.invoke(addr, RemotingCommand.create_request(R.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}),
                                   5000)
    finally:
        await client.close()


async def test_routes_come_from_the_product_environment(product, tmp_path, monkeypatch):
    monkeypatch.setenv("NAMESRV_ADDR", product.namesrv_addr)
    test_port, plain_port = free_port(), free_port()
    testing = start_namesrv(tmp_path, test_port, "clusterTest=true\nproductEnvName=center\n")
    plain = start_namesrv(tmp_path, plain_port)
    try:
        r = await _route(f"127.0.0.1:{test_port}", "ProductTopic")
        assert r.code == RC.SUCCESS, r.remark
        assert product.addr.encode() in bytes(r.body) and b'"readQueueNums":3' in bytes(r.body)
        missing = await _route(f"127.0.0.1:{test_port}", "NoSuchTopic")
        assert missing.code == RC.TOPIC_NOT_EXIST
        assert "No topic route info in name server for the topic: NoSuchTopic" in missing.remark
        assert (await _route(f"127.0.0.1:{plain_port}", "ProductTopic")).code == RC.TOPIC_NOT_EXIST
    finally:
        testing.kill()
        plain.kill()
