"""One coroutine per remote call the client makes (``MQClientAPIImpl``).

Every method builds the request with the 4.9.8 header names, sends it through
the shared ``RemotingClient`` and turns a non-success answer into
``MQBrokerError(code, remark)``; transport failures stay ``RemotingError``
subclasses so callers can tell "the broker said no" from "no answer".
"""

from __future__ import annotations

import time

import orjson

from rmq.client.codec import decode_messages
from rmq.client.exceptions import MQBrokerError
from rmq.client.heartbeat import HeartbeatData
from rmq.client.message import MessageExt, MessageQueue, PullResult, PullStatus
from rmq.common import fastjson
from rmq.common.codes import LanguageCode, RequestCode, ResponseCode
from rmq.common.protocol.headers_broker import (
    ConsumerSendMsgBackRequestHeader,
    GetConsumerListByGroupRequestHeader,
    GetEarliestMsgStoretimeResponseHeader,
    OffsetResponseHeader,
    QueryConsumerOffsetRequestHeader,
    QueryMessageRequestHeader,
    QueueOffsetRequestHeader,
    SearchOffsetRequestHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
    ViewMessageRequestHeader,
)
from rmq.common.protocol.headers_namesrv import (
    DeleteKVConfigRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    GetKVListByNamespaceRequestHeader,
    GetRouteInfoRequestHeader,
    GetTopicsByClusterRequestHeader,
    PutKVConfigRequestHeader,
    WipeWritePermOfBrokerRequestHeader,
    WipeWritePermOfBrokerResponseHeader,
)
from rmq.common.route import ClusterInfo, KVTable, TopicList, TopicRouteData
from rmq.remoting import RemotingClient, RemotingCommand

RC = RequestCode
OK = ResponseCode.SUCCESS

_PULL_STATUS = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}


def loads(body) -> dict:
    """JSON from a peer, in the fastjson dialect (unquoted integer or object keys
    from Java peers are accepted); an empty body is an empty object."""
    if not body:
        return {}
    return fastjson.loads(bytes(body))


def check(resp: RemotingCommand, addr: str | None, *ok: int) -> RemotingCommand:
    if resp.code == OK or resp.code in ok:
        return resp
    raise MQBrokerError(resp.code, resp.remark, addr)


class MQClientAPI:
    """Thin typed wrappers around ``RemotingClient.invoke``."""

    def __init__(self, remoting: RemotingClient, timeout_ms: int = 3000) -> None:
        self.remoting = remoting
        self.timeout_ms = timeout_ms

    async def call(self, addr: str | None, code: int, header=None, body: bytes | None = None,
                   timeout_ms: int | None = None, ok: tuple[int, ...] = ()) -> RemotingCommand:
        req = RemotingCommand.create_request(code, header, body)
        resp = await self.remoting.invoke(addr, req, timeout_ms or self.timeout_ms)
        return check(resp, addr, *ok)

    # --- name server ---------------------------------------------------------
    async def get_topic_route(self, topic: str, timeout_ms: int | None = None) -> TopicRouteData:
        resp = await self.call(None, RC.GET_ROUTEINFO_BY_TOPIC,
                               GetRouteInfoRequestHeader(topic=topic), timeout_ms=timeout_ms)
        if not resp.body:
            raise MQBrokerError(ResponseCode.TOPIC_NOT_EXIST, f"empty route for {topic}")
        return TopicRouteData.decode(bytes(resp.body))

    async def get_broker_cluster_info(self) -> ClusterInfo:
        resp = await self.call(None, RC.GET_BROKER_CLUSTER_INFO)
        return ClusterInfo.decode(bytes(resp.body or b"{}"))

    async def get_all_topic_list(self) -> list[str]:
        resp = await self.call(None, RC.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        return TopicList.decode(bytes(resp.body or b"{}")).topicList

    async def get_topics_by_cluster(self, cluster: str) -> list[str]:
        resp = await self.call(None, RC.GET_TOPICS_BY_CLUSTER,
                               GetTopicsByClusterRequestHeader(cluster=cluster))
        return TopicList.decode(bytes(resp.body or b"{}")).topicList

    async def put_kv_config(self, namesrv: str, namespace: str, key: str, value: str) -> None:
        await self.call(namesrv, RC.PUT_KV_CONFIG,
                        PutKVConfigRequestHeader(namespace=namespace, key=key, value=value))

    async def delete_kv_config(self, namesrv: str, namespace: str, key: str) -> None:
        await self.call(namesrv, RC.DELETE_KV_CONFIG,
                        DeleteKVConfigRequestHeader(namespace=namespace, key=key))

    async def get_kv_list(self, namespace: str) -> dict[str, str]:
        resp = await self.call(None, RC.GET_KVLIST_BY_NAMESPACE,
                               GetKVListByNamespaceRequestHeader(namespace=namespace))
        return KVTable.decode(bytes(resp.body or b"{}")).table

    async def get_namesrv_config(self, namesrv: str) -> bytes:
        resp = await self.call(namesrv, RC.GET_NAMESRV_CONFIG)
        return bytes(resp.body or b"")

    async def wipe_write_perm(self, namesrv: str, broker_name: str) -> int:
        resp = await self.call(namesrv, RC.WIPE_WRITE_PERM_OF_BROKER,
                               WipeWritePermOfBrokerRequestHeader(brokerName=broker_name))
        return resp.decode_header(WipeWritePermOfBrokerResponseHeader).wipeTopicCount

    async def delete_topic_in_namesrv(self, namesrv: str, topic: str,
                                      cluster: str | None = None) -> None:
        await self.call(namesrv, RC.DELETE_TOPIC_IN_NAMESRV,
                        DeleteTopicFromNamesrvRequestHeader(topic=topic, clusterName=cluster))

    # --- client registration -------------------------------------------------
    async def heartbeat(self, addr: str, data: HeartbeatData, timeout_ms: int | None = None) -> int:
        """Sends HEART_BEAT; returns the broker's version (the response's)."""
        req = RemotingCommand.create_request(RC.HEART_BEAT, None, data.encode())
        req.language = LanguageCode.PYTHON
        resp = await self.remoting.invoke(addr, req, timeout_ms or self.timeout_ms)
        check(resp, addr)
        return resp.version

    async def unregister_client(self, addr: str, client_id: str, producer_group: str | None,
                                consumer_group: str | None) -> None:
        await self.call(addr, RC.UNREGISTER_CLIENT, UnregisterClientRequestHeader(
            clientID=client_id, producerGroup=producer_group, consumerGroup=consumer_group))

    async def get_consumer_id_list(self, addr: str, group: str) -> list[str]:
        resp = await self.call(addr, RC.GET_CONSUMER_LIST_BY_GROUP,
                               GetConsumerListByGroupRequestHeader(consumerGroup=group))
        return list(loads(resp.body).get("consumerIdList") or [])

    # --- pull / offsets ------------------------------------------------------
    async def pull(self, addr: str, ext: dict[str, str], timeout_ms: int,
                   broker_name: str) -> PullResult:
        req = RemotingCommand.create_request(RC.PULL_MESSAGE)
        req.ext_fields = ext  # pull_header's values are all strings: no per-field pass
        resp = await self.remoting.invoke(addr, req, timeout_ms)
        status = _PULL_STATUS.get(resp.code)
        if status is None:
            raise MQBrokerError(resp.code, resp.remark, addr)
        f = resp.ext_fields or {}
        try:
            nxt, mn, mx = int(f["nextBeginOffset"]), int(f["minOffset"]), int(f["maxOffset"])
            suggest = int(f.get("suggestWhichBrokerId", 0))
        except (KeyError, ValueError):
            raise MQBrokerError(ResponseCode.SYSTEM_ERROR,
                                "pull response without offsets", addr) from None
        msgs: list[MessageExt] = []
        if status is PullStatus.FOUND and resp.body:
            msgs = decode_messages(resp.body, broker_name, mn, mx)
        return PullResult(status, nxt, mn, mx, msgs, suggest)

    async def query_consumer_offset(self, addr: str, group: str, mq: MessageQueue) -> int:
        resp = await self.call(addr, RC.QUERY_CONSUMER_OFFSET, QueryConsumerOffsetRequestHeader(
            consumerGroup=group, topic=mq.topic, queueId=mq.queue_id, bname=mq.broker_name))
        return resp.decode_header(OffsetResponseHeader).offset

    async def update_consumer_offset(self, addr: str, group: str, mq: MessageQueue, offset: int,
                                     oneway: bool) -> None:
        header = UpdateConsumerOffsetRequestHeader(
            consumerGroup=group, topic=mq.topic, queueId=mq.queue_id, commitOffset=offset,
            bname=mq.broker_name)
        if oneway:
            req = RemotingCommand.create_request(RC.UPDATE_CONSUMER_OFFSET, header)
            await self.remoting.invoke_oneway(addr, req, self.timeout_ms)
        else:
            await self.call(addr, RC.UPDATE_CONSUMER_OFFSET, header)

    async def _offset(self, addr: str, code: int, mq: MessageQueue) -> int:
        resp = await self.call(addr, code, QueueOffsetRequestHeader(
            topic=mq.topic, queueId=mq.queue_id, bname=mq.broker_name))
        return resp.decode_header(OffsetResponseHeader).offset

    async def get_max_offset(self, addr: str, mq: MessageQueue) -> int:
        return await self._offset(addr, RC.GET_MAX_OFFSET, mq)

    async def get_min_offset(self, addr: str, mq: MessageQueue) -> int:
        return await self._offset(addr, RC.GET_MIN_OFFSET, mq)

    async def get_earliest_msg_storetime(self, addr: str, mq: MessageQueue) -> int:
        resp = await self.call(addr, RC.GET_EARLIEST_MSG_STORETIME, QueueOffsetRequestHeader(
            topic=mq.topic, queueId=mq.queue_id, bname=mq.broker_name))
        return resp.decode_header(GetEarliestMsgStoretimeResponseHeader).timestamp

    async def search_offset(self, addr: str, mq: MessageQueue, timestamp_ms: int) -> int:
        resp = await self.call(addr, RC.SEARCH_OFFSET_BY_TIMESTAMP, SearchOffsetRequestHeader(
            topic=mq.topic, queueId=mq.queue_id, timestamp=timestamp_ms, bname=mq.broker_name))
        return resp.decode_header(OffsetResponseHeader).offset

    async def send_back(self, addr: str, msg: MessageExt, group: str, delay_level: int,
                        max_reconsume_times: int | None, timeout_ms: int | None = None) -> None:
        await self.call(addr, RC.CONSUMER_SEND_MSG_BACK, ConsumerSendMsgBackRequestHeader(
            offset=msg.commit_log_offset, group=group, delayLevel=delay_level,
            originMsgId=msg.msg_id, originTopic=msg.topic,
            maxReconsumeTimes=max_reconsume_times, bname=msg.broker_name or None),
            timeout_ms=timeout_ms)

    async def lock_batch(self, addr: str, group: str, client_id: str,
                         mqs: list[MessageQueue]) -> set[MessageQueue]:
        body = orjson.dumps({"clientId": client_id, "consumerGroup": group,
                             "mqSet": [mq.to_json_obj() for mq in mqs]})
        resp = await self.call(addr, RC.LOCK_BATCH_MQ, None, body)
        return {MessageQueue.from_json_obj(o) for o in loads(resp.body).get("lockOKMQSet") or []}

    async def unlock_batch(self, addr: str, group: str, client_id: str,
                           mqs: list[MessageQueue], oneway: bool) -> None:
        body = orjson.dumps({"clientId": client_id, "consumerGroup": group,
                             "mqSet": [mq.to_json_obj() for mq in mqs]})
        if oneway:
            req = RemotingCommand.create_request(RC.UNLOCK_BATCH_MQ, None, body)
            await self.remoting.invoke_oneway(addr, req, self.timeout_ms)
        else:
            await self.call(addr, RC.UNLOCK_BATCH_MQ, None, body)

    # --- queries ------------------------------------------------------------
    async def query_message(self, addr: str, topic: str, key: str, max_num: int, begin_ms: int,
                            end_ms: int, unique: bool, broker_name: str = "") -> list[MessageExt]:
        ext = QueryMessageRequestHeader(topic=topic, key=key, maxNum=max_num,
                                          beginTimestamp=begin_ms,
                                          endTimestamp=end_ms).to_ext_fields()
        ext["_UNIQUE_KEY_QUERY"] = "true" if unique else "false"
        resp = await self.call(addr, RC.QUERY_MESSAGE, ext, timeout_ms=self.timeout_ms * 3,
                               ok=(ResponseCode.QUERY_NOT_FOUND,))
        if resp.code != OK or not resp.body:
            return []
        return decode_messages(resp.body, broker_name)

    async def view_message(self, addr: str, offset: int, broker_name: str = "") -> MessageExt:
        resp = await self.call(addr, RC.VIEW_MESSAGE_BY_ID, ViewMessageRequestHeader(offset=offset))
        msgs = decode_messages(resp.body or b"", broker_name)
        if not msgs:
            raise MQBrokerError(ResponseCode.SYSTEM_ERROR, f"no message at offset {offset}", addr)
        return msgs[0]


def now_ms() -> int:
    return int(time.time() * 1000)
