"""5.x topic attributes and subscription group fields as 5.3.3 writes them."""

import pytest

from rmq.broker.subscription_group_manager import SubscriptionGroupConfig
from rmq.common import fastjson, topic_attributes
from rmq.common.topic_config import TopicConfig


def test_parse_and_alter_on_create_and_update():
    created = topic_attributes.alter(True, {}, topic_attributes.parse("+message.type=FIFO"))
    assert created == {"message.type": "FIFO"}
    changed = topic_attributes.alter(False, created, topic_attributes.parse("+message.type=DELAY"))
    assert topic_attributes.message_type(changed) == "DELAY"
    assert topic_attributes.alter(False, changed, topic_attributes.parse("-message.type")) == {}


@pytest.mark.parametrize("create,current,text,reason", [
    (True, {}, "+message.type=BAD", "value is not in set"),
    (True, {}, "+nope=1", "unsupported key: nope"),
    (True, {}, "-message.type", "only add attribute"),
    (False, {}, "-message.type", "nonexistent key"),
    (False, {"queue.type": "SimpleCQ"}, "+queue.type=BatchCQ", "unchangeable"),
])
def test_refusals_name_the_reason(create, current, text, reason):
    with pytest.raises(ValueError, match=reason):
        topic_attributes.alter(create, current, topic_attributes.parse(text))


def test_bad_format_is_refused():
    with pytest.raises(ValueError):
        topic_attributes.parse("message.type=FIFO")


def test_topic_config_json_carries_attributes_first():
    tc = TopicConfig("T", 4, 4, 6, attributes={"message.type": "FIFO"})
    text = fastjson.dumps(tc.to_json_obj())
    assert text.startswith(b'{"attributes":{"message.type":"FIFO"},"order":false,')
    assert TopicConfig.from_json_obj(fastjson.loads(text)).attributes == {"message.type": "FIFO"}


def test_subscription_group_5x_fields_round_trip():
    body = (b'{"groupName":"g","consumeEnable":true,"consumeFromMinEnable":true,'
            b'"consumeBroadcastEnable":true,"consumeMessageOrderly":true,"retryQueueNums":1,'
            b'"retryMaxTimes":3,"brokerId":0,"whichBrokerWhenConsumeSlowly":1,'
            b'"notifyConsumerIdsChangedEnable":true,"groupSysFlag":0,'
            b'"consumeTimeoutMinute":15,"attributes":{}}')
    cfg = SubscriptionGroupConfig.from_json_obj(fastjson.loads(body))
    assert cfg.consumeMessageOrderly and cfg.retryMaxTimes == 3
    keys = list(cfg.to_json_obj())
    assert keys == sorted(keys)
    assert cfg.to_json_obj()["groupRetryPolicy"] == {"type": "CUSTOMIZED"}
