"""What a request needs (RocketMQ ``PlainAccessValidator.parse`` and the
request side of ``PlainAccessResource``).

The resources and permissions per request code, as 4.9.8 maps them (a group
is checked as its retry topic ``%RETRY%<group>``; every other code needs no
resource, only a valid signature, and admin rights for the admin-only codes):

=============================  ==================================================
SEND_MESSAGE (10)              ``topic`` PUB; a ``%RETRY%`` topic: ``%RETRY%<group>`` SUB
SEND_MESSAGE_V2 (310)          ``b`` PUB; a ``%RETRY%`` topic: ``%RETRY%<a>`` SUB
CONSUMER_SEND_MSG_BACK (36)    ``%RETRY%<group>`` SUB
PULL_MESSAGE (11)              ``topic`` SUB and ``%RETRY%<consumerGroup>`` SUB
QUERY_MESSAGE (12)             ``topic`` SUB
HEART_BEAT (34)                per consumer: ``%RETRY%<groupName>`` SUB and each
                               subscribed topic SUB
UNREGISTER_CLIENT (35)         ``%RETRY%<consumerGroup>`` SUB
GET_CONSUMER_LIST_BY_GROUP (38)  ``%RETRY%<consumerGroup>`` SUB
UPDATE_CONSUMER_OFFSET (15)    ``%RETRY%<consumerGroup>`` SUB and ``topic`` SUB
=============================  ==================================================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from rmq.acl import permission as P
from rmq.acl.errors import AclException
from rmq.acl.remote_address import peer_ip
from rmq.acl.signer import ACCESS_KEY, SECURITY_TOKEN, SIGNATURE
from rmq.common import fastjson
from rmq.common.codes import RequestCode
from rmq.common.exceptions import RemotingCommandError
from rmq.common.protocol.headers_broker import (
    GetConsumerListByGroupRequestHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rmq.common.topics import RETRY_GROUP_TOPIC_PREFIX, is_retry_topic
from rmq.remoting import RemotingCommand

R = RequestCode


@dataclass(slots=True)
class PlainAccessResource:
    """One request as the validator sees it."""

    remote_ip: str | None
    request_code: int
    access_key: str | None = None
    signature: str | None = None
    security_token: str | None = None
    resources: dict[str, int] | None = None  # resource -> needed permission
    ext_fields: dict[str, str] | None = None  # signed with the body
    body: Any = None

    def need(self, resource: str | None, perm: int) -> None:
        """``addResourceAndPerm``: a None resource (no group given) needs nothing."""
        if resource is None:
            return
        if self.resources is None:
            self.resources = {}
        self.resources[resource] = perm


def retry_topic(group: str | None) -> str | None:
    return None if group is None else RETRY_GROUP_TOPIC_PREFIX + group


def describe(resource: str) -> str:
    """``PlainAccessResource.printStr``: ``group:<g>`` or ``topic:<t>``."""
    if is_retry_topic(resource):
        return f"group:{resource[len(RETRY_GROUP_TOPIC_PREFIX):]}"
    return f"topic:{resource}"


def _heartbeat_json(body: Any) -> dict:
    if not body:
        raise AclException("the heartbeat has no body")
    raw = bytes(body) if type(body) is not list else b"".join(body)
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        try:
            data = fastjson.loads(raw)
        except ValueError as e:
            raise AclException(str(e)) from None
    if not isinstance(data, dict):
        raise AclException("the heartbeat body is not a JSON object")
    return data


def _heartbeat_needs(resource: PlainAccessResource, body: Any) -> None:
    for consumer in _heartbeat_json(body).get("consumerDataSet") or ():
        if not isinstance(consumer, dict):
            continue
        resource.need(retry_topic(consumer.get("groupName")), P.SUB)
        for sub in consumer.get("subscriptionDataSet") or ():
            if isinstance(sub, dict):
                resource.need(sub.get("topic"), P.SUB)


def _send_needs(resource: PlainAccessResource, topic: str | None, group: str | None) -> None:
    """A send needs PUB on its topic; a send to a retry topic (a consumer's
    message back) SUB on the group named in the header (SEND_MESSAGE has no
    ``group`` field, so such a send needs nothing there: 4.9.8's mapping)."""
    if topic is not None and is_retry_topic(topic):
        resource.need(retry_topic(group), P.SUB)
    else:
        resource.need(topic, P.PUB)


def _needs(resource: PlainAccessResource, request: RemotingCommand) -> None:
    ext = request.ext_fields
    code = request.code
    if code == R.SEND_MESSAGE:
        _send_needs(resource, ext.get("topic"), ext.get("group"))
    elif code == R.SEND_MESSAGE_V2:  # the compact header: b = topic, a = producer group
        _send_needs(resource, ext.get("b"), ext.get("a"))
    elif code == R.CONSUMER_SEND_MSG_BACK:
        resource.need(retry_topic(ext.get("group")), P.SUB)
    elif code == R.PULL_MESSAGE:
        resource.need(ext.get("topic"), P.SUB)
        resource.need(retry_topic(ext.get("consumerGroup")), P.SUB)
    elif code == R.QUERY_MESSAGE:
        resource.need(ext.get("topic"), P.SUB)
    elif code == R.HEART_BEAT:
        _heartbeat_needs(resource, request.body)
    elif code == R.UNREGISTER_CLIENT:
        h = UnregisterClientRequestHeader.from_ext_fields(ext)
        resource.need(retry_topic(h.consumerGroup), P.SUB)
    elif code == R.GET_CONSUMER_LIST_BY_GROUP:
        h = GetConsumerListByGroupRequestHeader.from_ext_fields(ext)
        resource.need(retry_topic(h.consumerGroup), P.SUB)
    elif code == R.UPDATE_CONSUMER_OFFSET:
        h = UpdateConsumerOffsetRequestHeader.from_ext_fields(ext)
        resource.need(retry_topic(h.consumerGroup), P.SUB)
        resource.need(h.topic, P.SUB)


def parse(request: RemotingCommand, remote_addr: str | None) -> PlainAccessResource:
    """What ``request`` from ``remote_addr`` needs; AclException when its header
    or heartbeat body cannot be read."""
    resource = PlainAccessResource(peer_ip(remote_addr), request.code)
    ext = request.ext_fields
    if ext is None:  # no keys at all: only a white-listed address gets through
        return resource
    resource.access_key = ext.get(ACCESS_KEY)
    resource.signature = ext.get(SIGNATURE)
    resource.security_token = ext.get(SECURITY_TOKEN)
    try:
        _needs(resource, request)
    except RemotingCommandError as e:
        raise AclException(str(e)) from None
    resource.ext_fields = ext
    resource.body = request.body
    return resource
