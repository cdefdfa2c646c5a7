"""QUERY_ASSIGNMENT (400) and SET_MESSAGE_REQUEST_MODE (401) as RocketMQ 5.3.3's
QueryAssignmentProcessor serves them.

SET_MESSAGE_REQUEST_MODE (mqadmin ``setConsumeMode``) records whether a group
consumes a topic by PULL or POP (config/messageRequestMode.json).  A 5.x Java
consumer with client rebalance off asks QUERY_ASSIGNMENT for its queues: the
broker balances the topic's readable queues (from the name server's route)
over the group's clients with the named strategy; in POP mode with
popShareQueueNum <= 0 every client gets every broker's queues as queueId -1
(pop from all queues), and the answer carries the mode.
"""

from __future__ import annotations

from typing import Any

from rmq.broker.message_request_mode import MessageRequestModeManager, parse_mode_body
from rmq.client.allocate import AllocateMessageQueueAveragely, AllocateMessageQueueAveragelyByCircle
from rmq.client.message import MessageQueue
from rmq.common import fastjson
from rmq.common.codes import RequestCode, ResponseCode
from rmq.common.message import is_readable
from rmq.common.route import TopicRouteData
from rmq.remoting import Channel, RemotingCommand

RC = ResponseCode
STRATEGIES = {s.name: s for s in (AllocateMessageQueueAveragely(),
                                  AllocateMessageQueueAveragelyByCircle())}


def _response(code: int, remark: str | None = None, body: bytes | None = None) -> RemotingCommand:
    r = RemotingCommand.create_response(code, remark)
    if body is not None:
        r.body = body
    return r


def allocate_for_pop(strategy: Any, group: str, cid: str, mq_all: list[MessageQueue],
                     cid_all: list[str], share: int) -> list[MessageQueue]:
    """``allocate4Pop``: all queues as -1, or the client's share plus its
    ``share`` followers' (at least one queue per client)."""
    if share <= 0 or share >= len(cid_all) - 1:  # one -1 queue per broker (a set in 5.3.3)
        return list(dict.fromkeys(MessageQueue(mq.topic, mq.broker_name, -1) for mq in mq_all))
    if len(cid_all) <= len(mq_all):
        out = list(strategy.allocate(group, cid, mq_all, cid_all))
        if cid in cid_all:
            index = cid_all.index(cid)
            for _ in range(share):
                index = (index + 1) % len(cid_all)
                out.extend(strategy.allocate(group, cid_all[index], mq_all, cid_all))
        return out
    if cid not in cid_all:
        return []
    return [mq_all[cid_all.index(cid) % len(mq_all)]]


class QueryAssignmentProcessor:
    def __init__(self, controller: Any) -> None:
        self.c = controller
        self.modes = MessageRequestModeManager(controller.store_config.storePathRootDir)
        self.modes.load()
        controller.message_request_mode_manager = self.modes

    def process_request(self, channel: Channel, request: RemotingCommand) -> Any:
        if request.code == RequestCode.QUERY_ASSIGNMENT:
            return self.query_assignment(request)
        return self.set_mode(request)

    def set_mode(self, request: RemotingCommand) -> RemotingCommand:
        try:
            body = parse_mode_body(fastjson.loads(bytes(request.body or b"")))
        except (ValueError, fastjson.FastjsonError) as exc:
            return _response(RC.SYSTEM_ERROR, f"bad SetMessageRequestModeRequestBody: {exc}")
        if body["topic"].startswith("%RETRY%"):
            return _response(RC.NO_PERMISSION, "retry topic is not allowed to set mode")
        if self.c.topic_config_manager.select_topic_config(body["topic"]) is None:
            return _response(RC.TOPIC_NOT_EXIST, f"topic[{body['topic']}] not exist")
        if self.c.subscription_group_manager.find_subscription_group_config(
                body["consumerGroup"]) is None:
            return _response(RC.SUBSCRIPTION_GROUP_NOT_EXIST,
                             "subscription group does not exist")
        self.modes.set_mode(body)
        return _response(RC.SUCCESS)

    async def _queues(self, topic: str) -> list[MessageQueue] | None:
        """``TopicRouteInfoManager.getTopicSubscribeInfo``: readable queues of
        every broker of the topic (the broker's own when no name server answers)."""
        api = self.c.outer_api
        for addr in api.name_server_addresses:
            try:
                r = await api.client.invoke(addr, RemotingCommand.create_request(
                    RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}), 3000)
            except Exception:
                continue
            if r.code == RC.TOPIC_NOT_EXIST:
                return None
            if r.code != RC.SUCCESS:
                continue
            route = TopicRouteData.decode(bytes(r.body or b"{}"))
            return sorted(MessageQueue(topic, q.brokerName, i) for q in route.queueDatas
                          if is_readable(q.perm) for i in range(q.readQueueNums))
        tc = self.c.topic_config_manager.select_topic_config(topic)
        if tc is None:
            return None
        name = self.c.broker_config.brokerName
        return [MessageQueue(topic, name, i) for i in range(tc.readQueueNums)]

    async def query_assignment(self, request: RemotingCommand) -> RemotingCommand:
        try:
            body = fastjson.loads(bytes(request.body or b""))
            topic, group = str(body["topic"]), str(body["consumerGroup"])
            cid = str(body.get("clientId") or "")
            strategy_name = str(body.get("strategyName") or "AVG")
            model = str(body.get("messageModel") or "CLUSTERING")
        except (ValueError, KeyError, TypeError, fastjson.FastjsonError) as exc:
            return _response(RC.SYSTEM_ERROR, f"bad QueryAssignmentRequestBody: {exc}")
        mode = self.modes.table.get(topic, {}).get(group)
        if mode is None:
            mode = {"mode": "PULL", "popShareQueueNum": 0}
        assigned = await self._assign(topic, group, cid, strategy_name, model, mode)
        out = None if assigned is None else [
            {"messageQueue": mq.to_json_obj(), "mode": mode["mode"]}
            for mq in dict.fromkeys(assigned)]  # a set of assignments in 5.3.3
        return _response(RC.SUCCESS, None, fastjson.dumps({"messageQueueAssignments": out}))

    async def _assign(self, topic: str, group: str, cid: str, strategy_name: str, model: str,
                      mode: dict) -> list[MessageQueue] | None:
        mq_all = await self._queues(topic)
        if mq_all is None or model == "BROADCASTING":
            return mq_all
        if not self.c.broker_config.serverLoadBalancerEnable:
            return mq_all
        info = self.c.consumer_manager.get_consumer_group_info(group)
        strategy = STRATEGIES.get(strategy_name)
        if info is None or strategy is None or not mq_all:
            return None
        cid_all = sorted(info.all_client_ids())
        if mode["mode"] == "POP":
            return allocate_for_pop(strategy, group, cid, mq_all, cid_all,
                                    int(mode.get("popShareQueueNum", 0)))
        return list(strategy.allocate(group, cid, mq_all, cid_all))
