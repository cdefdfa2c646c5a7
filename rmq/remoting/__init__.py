"""RocketMQ 4.9.8 remoting layer on asyncio/uvloop: frames, commands, the
server and the client.  See docs/remoting.md."""

from rmq.remoting.abstract import ChannelEventListener, Processor, RPCHook
from rmq.remoting.channel import Channel
from rmq.remoting.client import RemotingClient
from rmq.remoting.command import RemotingCommand, SerializeType
from rmq.remoting.server import RemotingServer

__all__ = [
    "Channel",
    "ChannelEventListener",
    "Processor",
    "RemotingClient",
    "RemotingCommand",
    "RemotingServer",
    "RPCHook",
    "SerializeType",
]
