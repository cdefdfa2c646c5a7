"""Bad requests against a real name server: junk fields on every request
code, its own request headers with one or two fields made wrong, and broker
registrations whose bodies are broken or of the wrong JSON types.  Every
request must be answered, no Python error may leak into a remark, and a
broker registered before the storm keeps its route."""

from __future__ import annotations

import json
import random
import zlib

import pytest

from rmq.common.codes import RequestCode, ResponseCode
from rmq.common.data_version import DataVersion
from rmq.common.protocol import headers_namesrv as N
from rmq.common.topic_config import RegisterBrokerBody, TopicConfig, TopicConfigSerializeWrapper
from rmq.remoting import RemotingClient, RemotingCommand
from rmq.testing.cluster import start_namesrv
from rmq.testing.fuzz import NUMBERS, ODD, field_names, junk_requests, mutated_requests, storm
from rmq.testing.procs import free_port

R = RequestCode
KEEPER = {"brokerName": "keeper", "brokerAddr": "127.0.0.1:30911", "clusterName": "KeepCluster",
          "haServerAddr": "127.0.0.1:30912", "brokerId": "0"}
NAMES = ["TopicA", "broker-a", "DefaultCluster", "127.0.0.1:10911", "", "a" * 300, "ns",
         "\u4e2d"]
JUNK = NAMES + NUMBERS + ODD
HEADERS = {
    R.REGISTER_BROKER: N.RegisterBrokerRequestHeader,
    R.UNREGISTER_BROKER: N.UnRegisterBrokerRequestHeader,
    R.QUERY_DATA_VERSION: N.QueryDataVersionRequestHeader,
    R.GET_ROUTEINFO_BY_TOPIC: N.GetRouteInfoRequestHeader,
    R.PUT_KV_CONFIG: N.PutKVConfigRequestHeader,
    R.GET_KV_CONFIG: N.GetKVConfigRequestHeader,
    R.DELETE_KV_CONFIG: N.DeleteKVConfigRequestHeader,
    R.GET_KVLIST_BY_NAMESPACE: N.GetKVListByNamespaceRequestHeader,
    R.DELETE_TOPIC_IN_NAMESRV: N.DeleteTopicFromNamesrvRequestHeader,
    R.WIPE_WRITE_PERM_OF_BROKER: N.WipeWritePermOfBrokerRequestHeader,
    R.ADD_WRITE_PERM_OF_BROKER: N.AddWritePermOfBrokerRequestHeader,
    R.GET_TOPICS_BY_CLUSTER: N.GetTopicsByClusterRequestHeader,
}


def register(header: dict[str, str], body: bytes) -> RemotingCommand:
    ext = dict(header, bodyCrc32=str(zlib.crc32(body) & 0x7FFFFFFF), compressed="false")
    return RemotingCommand.create_request(R.REGISTER_BROKER, ext, body)


def keeper_body() -> bytes:
    wrapper = TopicConfigSerializeWrapper({"KeepTopic": TopicConfig("KeepTopic", 4, 4, 6)},
                                          DataVersion(1700000000000, 1))
    return RegisterBrokerBody(wrapper).encode(False)


def odd_registrations(rnd: random.Random, count: int) -> list[RemotingCommand]:
    """Registrations with a correct CRC whose bodies are broken or mistyped."""
    topic = {"topicName": rnd.choice(["T", None, 5]), "readQueueNums": rnd.choice([4, "x", -1]),
             "writeQueueNums": rnd.choice([4, None, 2**40]), "perm": rnd.choice([6, "rw", -1]),
             "topicFilterType": rnd.choice(["SINGLE_TAG", 7, "X"]), "order": rnd.choice([0, "x"])}
    bodies = [
        {"topicConfigSerializeWrapper": {"topicConfigTable": {"T": topic},
                                         "dataVersion": rnd.choice([{"timestamp": "x"}, 5])},
         "filterServerList": rnd.choice([[1], "a", None, ["x:1"]])},
        {"topicConfigSerializeWrapper": rnd.choice([None, [], "x", {"topicConfigTable": 5}])},
        [1, 2], "text", {"filterServerList": {"a": 1}},
    ]
    out = []
    for _ in range(count):
        header = {k: rnd.choice([v, v, rnd.choice(JUNK)]) for k, v in KEEPER.items()}
        header["brokerName"] = rnd.choice(["b1", "b2", ""])  # never the keeper
        out.append(register(header, json.dumps(rnd.choice(bodies)).encode()))
    return out


@pytest.mark.timeout(120)
async def test_bad_requests_get_answers_and_routes_survive(tmp_path):
    port = free_port()
    namesrv = start_namesrv(tmp_path, port)
    addr = f"127.0.0.1:{port}"
    client = RemotingClient()
    try:
        r = await client.invoke(addr, register(KEEPER, keeper_body()), 5000)
        assert r.code == ResponseCode.SUCCESS, r.remark

        rnd = random.Random(20261121)
        requests = junk_requests(rnd, 6, [int(c) for c in RequestCode], field_names(N), JUNK) + \
            mutated_requests(rnd, 40, HEADERS, NAMES[:3], JUNK) + odd_registrations(rnd, 200)
        rnd.shuffle(requests)
        leaked, codes = await storm(client, addr, requests)
        assert not leaked, leaked[:5]
        assert ResponseCode.SYSTEM_ERROR in codes and ResponseCode.SUCCESS in codes

        assert namesrv.proc.poll() is None, "the name server died"
        route = await client.invoke(addr, RemotingCommand.create_request(
            R.GET_ROUTEINFO_BY_TOPIC, {"topic": "KeepTopic"}), 5000)
        assert route.code == ResponseCode.SUCCESS, route.remark
        assert b"127.0.0.1:30911" in bytes(route.body)
    finally:
        await client.close()
        namesrv.kill()
