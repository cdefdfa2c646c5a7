"""Smoke test: a real server and client on loopback exchanging commands."""

from __future__ import annotations

import pytest

from rmq.common.codes import ResponseCode
from rmq.remoting import RemotingClient, RemotingCommand, RemotingServer, SerializeType
from rmq.remoting.config import NettyServerConfig


class Echo:
    def process_request(self, channel, request):
        return RemotingCommand.create_response(0, "ok", {"seen": request.code}, request.body)


@pytest.mark.timeout(20)
@pytest.mark.parametrize("stype", [SerializeType.JSON, SerializeType.ROCKETMQ])
async def test_request_response_and_unknown_code(stype):
    server = RemotingServer(NettyServerConfig(listenPort=0, bindAddress="127.0.0.1"))
    server.register_processor(7, Echo())
    await server.start()
    client = RemotingClient()
    try:
        addr = f"127.0.0.1:{server.port}"
        req = RemotingCommand.create_request(7, {"k": "v"}, b"payload")
        req.serialize_type = stype
        resp = await client.invoke(addr, req, 3000)
        assert (resp.code, resp.remark, resp.body) == (0, "ok", b"payload")
        assert resp.opaque == req.opaque and resp.is_response()
        assert resp.serialize_type == stype and resp.ext_fields == {"seen": "7"}
        unknown = await client.invoke(addr, RemotingCommand.create_request(999), 3000)
        assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        assert unknown.remark == " request type 999 not supported"
    finally:
        await client.close()
        await server.stop()
