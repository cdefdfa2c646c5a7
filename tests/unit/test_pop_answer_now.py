"""A pop answered at once (it finds messages, or finds none and has no
pollTime) and a batch ack whose records are stored at once are served
without a coroutine; a pop that waits for messages, an orderly pop and
work that waits for the store go on in a coroutine from where they
stopped, with the answers the general path gives."""

from __future__ import annotations

import base64
import shutil

import orjson
import pytest

from bench.lane_reads import QUEUES, TOPIC, _controller
from rmq.broker.pop_context import pop_context
from rmq.broker.processor.ack import AckMessageProcessor
from rmq.broker.processor.pop import PopMessageProcessor, PopResult, answer_ext
from rmq.common.codes import ResponseCode
from rmq.store.message import MessageExtBrokerInner
from rmq.store.message_codec import message_properties_to_string

GROUP = "g_pop_now"


class _Channel:
    remote_addr = "127.0.0.1:40000"
    attrs: dict = {}

    @staticmethod
    def is_active() -> bool:
        return True


def _ack_body(ext: dict) -> bytes:
    acks = []
    for so, mo in zip(ext["startOffsetInfo"].split(";"), ext["msgOffsetInfo"].split(";"),
                      strict=True):
        retry, qid, start = so.split(" ")
        offsets = [int(x) for x in mo.split(" ")[2].split(",")]
        bits = sum(1 << (o - int(start)) for o in offsets)
        b = base64.b64encode(bits.to_bytes((bits.bit_length() + 7) // 8, "little")).decode()
        acks.append({"c": GROUP, "t": TOPIC, "r": retry, "so": int(start), "q": int(qid),
                     "rq": int(ext["reviveQid"]), "pt": int(ext["popTime"]),
                     "it": int(ext["invisibleTime"]), "b": b})
    return orjson.dumps({"brokerName": "lane-reads", "acks": acks})


@pytest.mark.timeout(60)
async def test_pops_and_batch_acks_answered_at_once_need_no_coroutine(tmp_path):
    controller = await _controller(tmp_path)
    try:
        store = controller.message_store
        props = {"TAGS": "a"}
        for qid in range(QUEUES):
            for i in range(6):
                store.put_message(MessageExtBrokerInner(
                    topic=TOPIC, queue_id=qid, body=b"m%d" % i, properties=dict(props),
                    properties_string=message_properties_to_string(props), born_timestamp=1,
                    born_host=("10.0.0.1", 5000)))
        while store.reput_from_offset < store.commit_log.get_max_offset():
            store.do_reput()
        pop_context(controller).revive.ensure_loaded()
        pop, ack = PopMessageProcessor(controller), AckMessageProcessor(controller)
        ch = _Channel()
        ext = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "-1", "maxMsgNums": "4",
               "invisibleTime": "60000", "pollTime": "0", "bornTime": "0", "initMode": "0",
               "expType": "TAG", "exp": "*"}
        kinds = {"pop": set(), "ack": set()}
        popped = 0
        for _ in range(30):
            got = pop.pop_answer_now(ch, pop.read_pop(ch, dict(ext)))
            kinds["pop"].add(type(got) is tuple)
            if type(got) is not tuple:  # a revive queue's first record: the general put
                got = await got
            code, remark, out, bodies, size = got
            if code == ResponseCode.POLLING_TIMEOUT:
                assert (remark, out, bodies, size) == ("NO_MESSAGE_IN_QUEUE", None, None, 0)
                break
            assert code == ResponseCode.SUCCESS and size == sum(map(len, bodies))
            assert type(out) is PopResult and bodies is out.bodies  # the header as values
            ext_out = answer_ext(out)
            popped += len(ext_out["msgOffsetInfo"].split(",")) + ext_out["msgOffsetInfo"].count(";")
            answer = ack.batch_ack_now(_ack_body(ext_out))
            kinds["ack"].add(type(answer) is tuple)
            if type(answer) is not tuple:
                answer = await answer
            assert answer == (ResponseCode.SUCCESS, None)
        else:
            raise AssertionError("the queues never ran dry")
        assert popped >= QUEUES * 6  # (and what the controller put there itself)
        assert True in kinds["pop"] and True in kinds["ack"]
        # nothing left and no pollTime: answered at once
        assert pop.pop_answer_now(ch, pop.read_pop(ch, dict(ext)))[0] == \
            ResponseCode.POLLING_TIMEOUT
        # a pollTime to wait: a coroutine, answered when the time is up
        waiting = pop.pop_answer_now(ch, pop.read_pop(ch, {**ext, "pollTime": "100"}))
        assert type(waiting) is not tuple
        assert (await waiting)[0] == ResponseCode.POLLING_TIMEOUT
        # an orderly pop saves its state: a coroutine
        orderly = pop.pop_answer_now(ch, pop.read_pop(ch, {**ext, "order": "true"}))
        assert type(orderly) is not tuple
        assert (await orderly)[0] == ResponseCode.POLLING_TIMEOUT
        # a batch ack's bad entry is answered at once
        assert ack.batch_ack_now(b'{"acks":[{"c":"g"}]}')[0] == ResponseCode.SYSTEM_ERROR
    finally:
        await controller.shutdown()
        shutil.rmtree(tmp_path, ignore_errors=True)
