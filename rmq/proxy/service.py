"""The gRPC endpoint in the broker process: a ``grpc.aio`` server on the
broker's own event loop (grpcio's asyncio stack runs on uvloop), serving
``apache.rocketmq.v2.MessagingService`` on ``grpcServerPort``.

``ProxyService(controller)`` is one of the controller's services (``start``
after the remoting servers, ``shutdown`` before them).  Each call checks the
metadata (``x-mq-client-id`` required: ``CLIENT_ID_REQUIRED``), runs its
activity, and answers errors as a response carrying the 5.x status, as
5.3.3's proxy does.  SyncLiteSubscription (not in 5.3.3) answers
``NOT_IMPLEMENTED`` in its status (so do the consumer RPCs while the broker has no POP
processors: REQUEST_CODE_NOT_SUPPORTED maps to it); a method the service does not define is gRPC
``UNIMPLEMENTED`` and an undecodable request gRPC ``INTERNAL``, both from
grpcio itself.
"""

from __future__ import annotations

import asyncio
import logging
import re
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from time import perf_counter
from types import CoroutineType
from typing import Any

import grpc
from google.protobuf.timestamp_pb2 import Timestamp

from rmq.common.codes import LanguageCode
from rmq.proxy.auth import authenticate
from rmq.proxy.clients import ClientRegistry, ClientSession
from rmq.proxy.consumer import ConsumerService
from rmq.proxy.local import CREDENTIALS, LocalInvoker
from rmq.proxy.offsets import OffsetService
from rmq.proxy.producer import ProducerService
from rmq.proxy.route import RouteService
from rmq.proxy.status import Code, ProxyError, status
from rmq.proxy.tls import PortSplitter, server_credentials
from rmq.proxy.v2 import definition_pb2 as pb
from rmq.proxy.v2 import service_pb2 as spb
from rmq.proxy.v2 import service_pb2_grpc as sgrpc
from rmq.remoting.exceptions import RemotingTimeoutError
from rmq.remoting.rpc_latency import SUCCESS, NamedLatency
from rmq.remoting.tls import TlsConfig, TlsMode

log = logging.getLogger("rmq.proxy")

# gRPC metadata of the 5.x clients (GrpcConstants of 5.3.3)
CLIENT_ID = "x-mq-client-id"
LANGUAGE = "x-mq-language"

SHUTDOWN_GRACE_S = 3.0
SWEEP_INTERVAL_S = 60.0


def peer_address(context: grpc.aio.ServicerContext) -> str:
    """``ipv4:1.2.3.4:5`` / ``ipv6:[::1]:5`` -> ``host:port``."""
    peer = context.peer() or ""
    return peer.split(":", 1)[1] if peer.startswith(("ipv4:", "ipv6:")) else peer


LONG_POLLING_RPCS = frozenset({"receive_message", "pull_message"})


def rpc_name(response_type: type) -> str:
    """``ReceiveMessageResponse`` -> ``receive_message``."""
    name = response_type.__name__.removesuffix("Response")
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def language_code(name: str) -> int:
    try:
        return LanguageCode[name.upper()]
    except KeyError:
        return LanguageCode.OTHER


class MessagingServicer(sgrpc.MessagingServiceServicer):
    """Each RPC: the caller's session, the activity, its errors as statuses."""

    def __init__(self, controller: Any, grpc_port: int, local_addr: str) -> None:
        self.c = controller
        self.invoker = LocalInvoker(controller.remoting_server)
        self.clients = ClientRegistry(controller, self.invoker, local_addr)
        self.route = RouteService(controller, grpc_port)
        self.producer = ProducerService(controller, self.clients)
        self.consumer = ConsumerService(controller, self.clients)
        self.offsets = OffsetService(controller, self.clients)
        self.splitter: PortSplitter | None = None  # permissive TLS (rmq.proxy.tls)
        # rocketmq_rpc_latency rows of the RPCs, while the metrics exporter is on
        self.latency: NamedLatency | None = None
        if getattr(controller, "rpc_latency", None) is not None:
            self.latency = controller.grpc_rpc_latency = NamedLatency("grpc")

    # ---- plumbing ----------------------------------------------------------------------
    def _peer(self, context: grpc.aio.ServicerContext) -> str:
        """The client's host:port, also when it came through the TLS splitter."""
        if self.splitter is not None:
            peer = self.splitter.peer_of(context.peer() or "")
            if peer is not None:
                return peer
        return peer_address(context)

    def _session(self, context: grpc.aio.ServicerContext) -> ClientSession:
        """The caller's session; the peer address and language are read only
        for a client not seen before (every call pays for this)."""
        metadata = context.invocation_metadata() or ()
        client_id = ""
        for key, value in metadata:
            if key == CLIENT_ID:
                client_id = str(value).strip()
                break
        if not client_id:
            raise ProxyError(Code.CLIENT_ID_REQUIRED, "client id cannot be empty")
        session = self.clients.sessions.get(client_id)
        if session is None:
            meta = dict(metadata)
            session = self.clients.session(client_id, self._peer(context),
                                           language_code(str(meta.get(LANGUAGE, ""))))
        else:
            session.channel.last_active = time.monotonic()
        validator = self.c.access_validator
        if validator is not None:
            credentials = authenticate(validator.manager, dict(metadata))
            if credentials is None:
                session.channel.attrs.pop(CREDENTIALS, None)
            else:
                session.channel.attrs[CREDENTIALS] = credentials
        return session

    async def _unary(self, context: grpc.aio.ServicerContext, response_type: type,
                     run: Callable[[ClientSession], Awaitable[Any] | Any]) -> Any:
        start = perf_counter()
        try:
            result = run(self._session(context))
            if type(result) is CoroutineType:
                result = await result
        except ProxyError as exc:
            result = response_type(status=status(exc.code, exc.message))
        except RemotingTimeoutError as exc:
            result = response_type(status=status(Code.PROXY_TIMEOUT, str(exc)))
        except Exception as exc:  # noqa: BLE001 - any failure is an INTERNAL_SERVER_ERROR status
            log.exception("gRPC call failed")
            result = response_type(status=status(Code.INTERNAL_SERVER_ERROR,
                                                 f"{type(exc).__name__}: {exc}"))
        if self.latency is not None:
            self._record(response_type, result, start)
        return result

    def _record(self, response_type: type, result: Any, start: float) -> None:
        """One row of rocketmq_rpc_latency: the RPC by name, its 5.x status."""
        first = result[0] if isinstance(result, list) else result
        code = first.status.code if first.HasField("status") else Code.OK
        name = rpc_name(response_type)
        self.latency.record(name, Code.Name(code).lower(), name in LONG_POLLING_RPCS, SUCCESS,
                            int((perf_counter() - start) * 1000))

    def _record_command(self, start: float, code: int) -> None:
        """One row of rocketmq_rpc_latency per command a client writes on its
        Telemetry stream (the stream itself lasts as long as the client):
        request code ``telemetry``, the status of the answer."""
        if self.latency is not None:
            self.latency.record("telemetry", Code.Name(code).lower(), False, SUCCESS,
                                int((perf_counter() - start) * 1000))

    # ---- RPCs ----------------------------------------------------------------------------
    async def QueryRoute(self, request, context):
        return await self._unary(context, spb.QueryRouteResponse,
                                 lambda s: self.route.query_route(request))

    async def QueryAssignment(self, request, context):
        def run(s: ClientSession):
            group = self.c.subscription_group_manager.find_subscription_group_config(
                request.group.name)
            fifo = bool(getattr(group, "consumeMessageOrderly", False))
            return self.route.query_assignment(request, fifo)
        return await self._unary(context, spb.QueryAssignmentResponse, run)

    async def Heartbeat(self, request, context):
        async def run(s: ClientSession):
            await self.clients.heartbeat(s)
            return spb.HeartbeatResponse(status=status(Code.OK))
        return await self._unary(context, spb.HeartbeatResponse, run)

    async def NotifyClientTermination(self, request, context):
        async def run(s: ClientSession):
            await self.clients.terminate(s)
            self.consumer.renewals.clear(s.client_id)
            return spb.NotifyClientTerminationResponse(status=status(Code.OK))
        return await self._unary(context, spb.NotifyClientTerminationResponse, run)

    async def SendMessage(self, request, context):
        return await self._unary(context, spb.SendMessageResponse,
                                 lambda s: self.producer.send(s, request))

    async def EndTransaction(self, request, context):
        return await self._unary(context, spb.EndTransactionResponse,
                                 lambda s: self.producer.end_transaction(s, request))

    async def RecallMessage(self, request, context):
        return await self._unary(context, spb.RecallMessageResponse,
                                 lambda s: self.producer.recall(s, request))

    async def UpdateOffset(self, request, context):
        return await self._unary(context, spb.UpdateOffsetResponse,
                                 lambda s: self.offsets.update_offset(s, request))

    async def GetOffset(self, request, context):
        return await self._unary(context, spb.GetOffsetResponse,
                                 lambda s: self.offsets.get_offset(s, request))

    async def QueryOffset(self, request, context):
        return await self._unary(context, spb.QueryOffsetResponse,
                                 lambda s: self.offsets.query_offset(s, request))

    async def SyncLiteSubscription(self, request, context):
        return spb.SyncLiteSubscriptionResponse(status=status(
            Code.NOT_IMPLEMENTED, "SyncLiteSubscription is not served by this broker"))

    async def AckMessage(self, request, context):
        return await self._unary(context, spb.AckMessageResponse,
                                 lambda s: self.consumer.ack(s, request))

    async def ForwardMessageToDeadLetterQueue(self, request, context):
        return await self._unary(context, spb.ForwardMessageToDeadLetterQueueResponse,
                                 lambda s: self.consumer.forward_to_dlq(s, request))

    async def ChangeInvisibleDuration(self, request, context):
        return await self._unary(context, spb.ChangeInvisibleDurationResponse,
                                 lambda s: self.consumer.change_invisible(s, request))

    async def ReceiveMessage(self, request, context):
        """Server streaming: a status, the messages, then the server's time."""
        async def run(s: ClientSession):
            remaining = context.time_remaining()
            return await self.consumer.receive(
                s, request, None if remaining is None else int(remaining * 1000))
        answer = await self._unary(context, spb.ReceiveMessageResponse, run)
        for element in answer if isinstance(answer, list) else [answer]:
            yield element
        now = time.time_ns()
        yield spb.ReceiveMessageResponse(delivery_timestamp=Timestamp(
            seconds=now // 1_000_000_000, nanos=now % 1_000_000_000 // 1_000_000 * 1_000_000))

    async def PullMessage(self, request, context):
        """Server streaming: a status, the messages, then the next offset."""
        async def run(s: ClientSession):
            remaining = context.time_remaining()
            return await self.offsets.pull(
                s, request, None if remaining is None else int(remaining * 1000))
        answer = await self._unary(context, spb.PullMessageResponse, run)
        for element in answer if isinstance(answer, list) else [answer]:
            yield element

    async def Telemetry(self, request_iterator: AsyncIterator[spb.TelemetryCommand],
                        context) -> AsyncIterator[spb.TelemetryCommand]:
        """Settings in, merged settings out; the broker's requests to the
        client (transaction checks) are written to the stream as they come."""
        start = perf_counter()
        try:
            session = self._session(context)
        except ProxyError as exc:
            self._record_command(start, exc.code)
            yield spb.TelemetryCommand(status=status(exc.code, exc.message))
            return
        outbox: asyncio.Queue = asyncio.Queue()
        session.outbox = outbox
        reader = asyncio.get_running_loop().create_task(
            self._read_telemetry(session, request_iterator, outbox))
        try:
            while True:
                command = await outbox.get()
                if command is None:
                    break
                yield command
        finally:
            reader.cancel()
            if session.outbox is outbox:
                session.outbox = None

    async def _read_telemetry(self, session: ClientSession,
                              request_iterator: AsyncIterator[spb.TelemetryCommand],
                              outbox: asyncio.Queue) -> None:
        try:
            async for command in request_iterator:
                if command.HasField("settings"):
                    start = perf_counter()
                    answer = await self._settings_answer(session, command.settings)
                    self._record_command(start, answer.status.code)
                    outbox.put_nowait(answer)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - a broken stream ends the stream, nothing else
            log.debug("telemetry stream of %s ended", session.client_id, exc_info=True)
        outbox.put_nowait(None)

    async def _settings_answer(self, session: ClientSession,
                               settings: pb.Settings) -> spb.TelemetryCommand:
        try:
            merged = await self.clients.apply_settings(session, settings)
        except ProxyError as exc:
            return spb.TelemetryCommand(status=status(exc.code, exc.message))
        except RemotingTimeoutError as exc:
            return spb.TelemetryCommand(status=status(Code.PROXY_TIMEOUT, str(exc)))
        return spb.TelemetryCommand(status=status(Code.OK), settings=merged)


class ProxyService:
    """The endpoint's life cycle, as one of the broker controller's services."""

    def __init__(self, controller: Any) -> None:
        self.c = controller
        self.port = controller.broker_config.grpcServerPort
        self.server: grpc.aio.Server | None = None
        self.servicer: MessagingServicer | None = None
        self._sweeper: asyncio.Task | None = None
        self._renewer: asyncio.Task | None = None
        self.splitter: PortSplitter | None = None
        self._socket_dir: str | None = None

    async def start(self) -> None:
        bc = self.c.broker_config
        local_addr = f"{bc.brokerIP1}:{self.port}"
        self.servicer = MessagingServicer(self.c, self.port, local_addr)
        # no SO_REUSEPORT: a second broker on the host must not share the port
        server = grpc.aio.server(options=[("grpc.so_reuseport", 0),
                                          ("grpc.max_receive_message_length", -1),
                                          ("grpc.max_send_message_length", -1)])
        sgrpc.add_MessagingServiceServicer_to_server(self.servicer, server)
        tls = getattr(self.c.remoting_server, "tls", None) or TlsConfig.from_environ()
        try:
            bound = await self._bind(server, tls)
        except (RuntimeError, OSError, ValueError) as exc:
            bound = 0
            log.error("gRPC port %d: %s", self.port, exc)
        if not bound:
            await server.stop(None)
            await self._close_splitter()
            raise OSError(f"cannot listen on grpcServerPort {self.port} (in use?): set "
                          f"grpcServerPort to a free port or enableProxy=false")
        await server.start()
        self.server = server
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep())
        self._renewer = asyncio.get_running_loop().create_task(
            self.servicer.consumer.renewals.run())
        log.info("gRPC MessagingService listening on port %d (tls.server.mode %s)", self.port,
                 tls.serverMode.value)

    async def _bind(self, server: grpc.aio.Server, tls: TlsConfig) -> int:
        """Listen as ``tls.server.mode`` says (rmq.proxy.tls); 0 when it cannot."""
        if tls.serverMode is TlsMode.DISABLED:
            return server.add_insecure_port(f"0.0.0.0:{self.port}")
        loop = asyncio.get_running_loop()
        try:
            credentials = await loop.run_in_executor(None, server_credentials, tls)
        except Exception as exc:  # noqa: BLE001 - no certificate: plaintext, unless TLS is a must
            if tls.serverMode is TlsMode.ENFORCING:
                raise OSError(f"no TLS certificate for the gRPC port: {exc}") from None
            log.warning("gRPC port %d serves plaintext only, no TLS certificate: %s",
                        self.port, exc)
            return server.add_insecure_port(f"0.0.0.0:{self.port}")
        if tls.serverMode is TlsMode.ENFORCING:
            return server.add_secure_port(f"0.0.0.0:{self.port}", credentials)
        self._socket_dir = tempfile.mkdtemp(prefix="rmq-grpc-")
        splitter = PortSplitter(self._socket_dir)
        if not (server.add_insecure_port(f"unix:{splitter.plain_path}")
                and server.add_secure_port(f"unix:{splitter.tls_path}", credentials)):
            return 0
        await splitter.start(self.port)
        self.splitter = self.servicer.splitter = splitter
        return self.port

    async def _close_splitter(self) -> None:
        if self.splitter is not None:
            await self.splitter.close()
            self.splitter = None
        if self._socket_dir is not None:
            shutil.rmtree(self._socket_dir, ignore_errors=True)
            self._socket_dir = None

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(SWEEP_INTERVAL_S)
            gone = self.servicer.clients.sweep()
            if gone:
                log.info("gRPC clients gone silent, forgotten: %s", gone)

    async def shutdown(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        if self._renewer is not None:
            self._renewer.cancel()
            self._renewer = None
        if self.servicer is not None:
            await self.servicer.consumer.renewals.close()
            self.servicer.clients.close()
        if self.splitter is not None:
            await self.splitter.close()
        if self.server is not None:
            await self.server.stop(SHUTDOWN_GRACE_S)
            self.server = None
        await self._close_splitter()
