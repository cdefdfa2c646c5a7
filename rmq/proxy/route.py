"""QueryRoute and QueryAssignment from this broker's own topic table.

The broker serving the endpoint answers with its own queues (local mode):
every queue points back at this endpoint, the addresses being the ones the
client used with the port forced to ``grpcServerPort`` (5.3.3's
``RouteActivity.convertToAddressList``); queue permissions split into
read-only, write-only, read-write and none as 5.3.3 does
(``genMessageQueueFromQueueData``).
"""

from __future__ import annotations

from typing import Any

from rmq.common.message import is_readable, is_writeable
from rmq.common.topics import is_system_topic, validate_topic
from rmq.proxy.messages import accept_message_types
from rmq.proxy.status import Code, ProxyError
from rmq.proxy.v2 import definition_pb2 as pb
from rmq.proxy.v2 import service_pb2 as spb


def check_topic(name: str) -> None:
    """5.3.3's ``GrpcValidator.validateTopic``."""
    reason = validate_topic(name)
    if reason is not None:
        raise ProxyError(Code.ILLEGAL_TOPIC, reason)
    if is_system_topic(name):
        raise ProxyError(Code.ILLEGAL_TOPIC, "cannot access system topic")


def endpoints_for(request_endpoints: pb.Endpoints, host: str, port: int) -> pb.Endpoints:
    """The client's access point with our gRPC port, or this broker's address."""
    if request_endpoints.addresses:
        return pb.Endpoints(scheme=request_endpoints.scheme or pb.IPv4,
                            addresses=[pb.Address(host=a.host, port=port)
                                       for a in request_endpoints.addresses])
    return pb.Endpoints(scheme=pb.IPv4, addresses=[pb.Address(host=host, port=port)])


def queues_of(topic: pb.Resource, perm: int, read_nums: int, write_nums: int,
              types: list[int], broker: pb.Broker) -> list[pb.MessageQueue]:
    r = w = rw = n = 0
    if is_readable(perm) and is_writeable(perm):
        rw = min(read_nums, write_nums)
        r, w = read_nums - rw, write_nums - rw
    elif is_writeable(perm):
        w = write_nums
    elif is_readable(perm):
        r = read_nums
    else:
        n = max(1, read_nums, write_nums)
    out: list[pb.MessageQueue] = []
    for count, permission in ((r, pb.READ), (w, pb.WRITE), (rw, pb.READ_WRITE), (n, pb.NONE)):
        for _ in range(count):
            out.append(pb.MessageQueue(topic=topic, id=len(out), permission=permission,
                                       broker=broker, accept_message_types=types))
    return out


class RouteService:
    def __init__(self, controller: Any, grpc_port: int) -> None:
        self.c = controller
        self.port = grpc_port

    def broker(self, endpoints: pb.Endpoints) -> pb.Broker:
        bc = self.c.broker_config
        return pb.Broker(name=bc.brokerName, id=max(bc.brokerId, 0),
                         endpoints=endpoints_for(endpoints, bc.brokerIP1, self.port))

    def topic_config(self, name: str) -> Any:
        tc = self.c.topic_config_manager.select_topic_config(name)
        if tc is None:
            raise ProxyError(Code.TOPIC_NOT_FOUND, f"topic not found: {name}")
        return tc

    def query_route(self, request: spb.QueryRouteRequest) -> spb.QueryRouteResponse:
        check_topic(request.topic.name)
        tc = self.topic_config(request.topic.name)
        types = accept_message_types(getattr(tc, "attributes", None))
        perm = tc.perm & self.c.broker_config.brokerPermission
        queues = queues_of(request.topic, perm, tc.readQueueNums, tc.writeQueueNums, types,
                           self.broker(request.endpoints))
        return spb.QueryRouteResponse(status=pb.Status(code=Code.OK, message="OK"),
                                      message_queues=queues)

    def query_assignment(self, request: spb.QueryAssignmentRequest,
                         fifo: bool) -> spb.QueryAssignmentResponse:
        """One assignment on queue id -1 (the whole broker) for a plain group; one
        per readable queue for a FIFO group; none readable: FORBIDDEN."""
        check_topic(request.topic.name)
        tc = self.topic_config(request.topic.name)
        perm = tc.perm & self.c.broker_config.brokerPermission
        if not is_readable(perm) or tc.readQueueNums <= 0:
            raise ProxyError(Code.FORBIDDEN, "no readable queue")
        types = accept_message_types(getattr(tc, "attributes", None))
        broker = self.broker(request.endpoints)
        ids = range(tc.readQueueNums) if fifo else (-1,)
        assignments = [pb.Assignment(message_queue=pb.MessageQueue(
            topic=request.topic, id=i, permission=pb.READ_WRITE, broker=broker,
            accept_message_types=types)) for i in ids]
        return spb.QueryAssignmentResponse(status=pb.Status(code=Code.OK, message="OK"),
                                           assignments=assignments)
