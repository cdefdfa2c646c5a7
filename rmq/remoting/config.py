"""NettyServerConfig / NettyClientConfig with RocketMQ 4.9.8 property names.

The attribute names are the exact keys of broker.conf / namesrv.conf so that
``rmq.common.properties.apply_properties`` fills them from a file unchanged
(defaults: ../shared/spec/DEFAULTS.md section 7).  Settings that only make
sense for Netty's thread model are kept so that files naming them load and
print like Java's; rmq runs everything on one event loop.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

DEFAULT_FRAME_MAX_LENGTH = 16777216


def _env_int(name: str, default: int) -> int:
    """Java's ``Integer.parseInt(System.getProperty(name, default))`` stand-in:
    the system property becomes an environment variable of the same name."""
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


def _frame_max_length() -> int:
    return _env_int("com.rocketmq.remoting.frameMaxLength", DEFAULT_FRAME_MAX_LENGTH)


@dataclass(slots=True)
class NettyServerConfig:
    """Server side of the remoting layer (``NettyServerConfig``)."""

    listenPort: int = 8888
    serverWorkerThreads: int = 8
    serverCallbackExecutorThreads: int = 0
    serverSelectorThreads: int = 3
    serverOnewaySemaphoreValue: int = 256
    serverAsyncSemaphoreValue: int = 64
    serverChannelMaxIdleTimeSeconds: int = 120
    serverSocketSndBufSize: int = field(
        default_factory=lambda: _env_int("com.rocketmq.remoting.socket.sndbuf.size", 0))
    serverSocketRcvBufSize: int = field(
        default_factory=lambda: _env_int("com.rocketmq.remoting.socket.rcvbuf.size", 0))
    serverSocketBacklog: int = field(
        default_factory=lambda: _env_int("com.rocketmq.remoting.socket.backlog", 1024))
    writeBufferHighWaterMark: int = field(
        default_factory=lambda: _env_int("com.rocketmq.remoting.write.buffer.high.water.mark", 0))
    writeBufferLowWaterMark: int = field(
        default_factory=lambda: _env_int("com.rocketmq.remoting.write.buffer.low.water.mark", 0))
    serverPooledByteBufAllocatorEnable: bool = True
    useEpollNativeSelector: bool = False
    # rmq additions (not broker.conf keys in 4.9.8, but the same knobs):
    bindAddress: str = "0.0.0.0"
    frameMaxLength: int = field(default_factory=_frame_max_length)
    # connections a process accepts in all and from one remote IP (0: no bound)
    serverMaxConnections: int = 0
    serverMaxConnectionsPerAddress: int = 0


@dataclass(slots=True)
class NettyClientConfig:
    """Client side of the remoting layer (``NettyClientConfig``)."""

    clientWorkerThreads: int = field(
        default_factory=lambda: _env_int("com.rocketmq.remoting.client.worker.size", 4))
    clientCallbackExecutorThreads: int = field(default_factory=lambda: os.cpu_count() or 1)
    clientOnewaySemaphoreValue: int = field(
        default_factory=lambda: _env_int("com.rocketmq.remoting.clientOnewaySemaphoreValue", 65535))
    clientAsyncSemaphoreValue: int = field(
        default_factory=lambda: _env_int("com.rocketmq.remoting.clientAsyncSemaphoreValue", 65535))
    connectTimeoutMillis: int = field(
        default_factory=lambda: _env_int("com.rocketmq.remoting.client.connect.timeout", 3000))
    channelNotActiveInterval: int = 60000
    clientChannelMaxIdleTimeSeconds: int = field(
        default_factory=lambda: _env_int(
            "com.rocketmq.remoting.client.channel.maxIdleTimeSeconds", 120))
    clientSocketSndBufSize: int = 0
    clientSocketRcvBufSize: int = 0
    clientPooledByteBufAllocatorEnable: bool = False
    clientCloseSocketIfTimeout: bool = True
    useTLS: bool = field(
        default_factory=lambda: os.environ.get("tls.enable", "false").lower() == "true")
    writeBufferHighWaterMark: int = 0
    writeBufferLowWaterMark: int = 0
    frameMaxLength: int = field(default_factory=_frame_max_length)
