"""rocketmq_rpc_latency's recorder: the compiled twin keeps the same rows as the
pure-Python one, buckets follow 5.3's bounds, and the family names codes as
5.3's RemotingHelper does."""

from __future__ import annotations

import random
import time

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from rmq._fast import compiled_or_none
from rmq.common.codes import RequestCode, ResponseCode
from rmq.common.metrics_text import render
from rmq.remoting import rpc_latency as R

FAST = compiled_or_none("rpc_latency")
CLASSES = [R._RpcLatency] + ([FAST.RpcLatency] if FAST is not None else [])


@pytest.mark.parametrize("cls", CLASSES)
def test_buckets_are_upper_inclusive(cls):
    latency = cls()
    for ms in (0, 1, 2, 3, 4, 7, 8, 10, 11, 100, 101, 1000, 2000, 3000, 3001, 50_000):
        latency.record(int(RequestCode.SEND_MESSAGE_V2), 0, False, R.SUCCESS, ms)
    (row,) = latency.rows.values()
    #        <=1 <=3 <=5 <=7 <=10 <=100 <=1000 <=2000 <=3000 more  sum
    assert row == [2, 2, 1, 1, 2, 2, 2, 1, 1, 2, sum((0, 1, 2, 3, 4, 7, 8, 10, 11, 100, 101,
                                                         1000, 2000, 3000, 3001, 50_000))]


@pytest.mark.compiled_only
def test_compiled_twin_keeps_the_same_rows():
    assert FAST is not None
    fast, twin = FAST.RpcLatency(), R._RpcLatency()
    rng = random.Random(7)
    for _ in range(20_000):
        args = (rng.choice([10, 11, 34, 310, 320, 9999]),
                rng.choice([None, 0, 1, 2, 17, 25, 206]), rng.random() < 0.3, rng.randrange(4),
                rng.choice([0, 1, 2, 5, 6, 9, 10, 99, 100, 999, 1000, 2999, 3000, 3001, 10 ** 7]))
        fast.record(*args)
        twin.record(*args)
    assert fast.rows == twin.rows and len(twin.rows) > 100


@pytest.mark.parametrize("cls", CLASSES)
def test_record_since_times_from_perf_counter(cls):
    latency = cls()
    start = time.perf_counter() - 0.004  # arrived 4 ms ago
    latency.record_since(start, int(RequestCode.PULL_MESSAGE), 0, R.SUCCESS)
    (row,) = latency.rows.values()
    assert row[2] == 1 and 4 <= row[-1] <= 50  # the <= 5 ms bucket unless the machine stalls


def test_family_names_codes_like_remoting_helper():
    latency = R.RpcLatency()
    latency.record(int(RequestCode.SEND_MESSAGE_V2), int(ResponseCode.SUCCESS), False,
                   R.SUCCESS, 2)
    latency.record(int(RequestCode.PULL_MESSAGE), int(ResponseCode.PULL_NOT_FOUND), True,
                   R.SUCCESS, 1500)
    latency.record(4242, None, False, R.PROCESS_REQUEST_FAILED, 0)
    family = R.latency_family(latency, ("cluster",), ("C",))

    class One:
        def collect(self):
            return iter((family,))

    registry = CollectorRegistry(auto_describe=False)
    registry.register(One())
    text = render(registry).decode()
    assert text == generate_latest(registry).decode()
    assert ('rocketmq_rpc_latency_count{cluster="C",is_long_polling="false",'
            'protocol_type="remoting",request_code="send_message_v2",response_code="success",'
            'result="success"} 1.0') in text
    assert ('rocketmq_rpc_latency_bucket{cluster="C",is_long_polling="true",le="1000.0",'
            'protocol_type="remoting",request_code="pull_message",'
            'response_code="pull_not_found",result="success"} 0.0') in text
    assert ('request_code="4242",response_code="",result="process_request_failed"} 1.0'
            in text)
    assert R.request_code_desc(int(RequestCode.HEART_BEAT)) == "heart_beat"
