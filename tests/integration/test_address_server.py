"""fetchNamesrvAddrByAddressServer: a broker started without a name server
asks a (small, local) address server for the list, 10 s after start as
4.9.8 does, and registers with what it answers; unit tests of the URL."""

from __future__ import annotations

import asyncio
import http.server
import threading

import pytest

from rmq.common.codes import RequestCode as R
from rmq.common.top_addressing import fetch_ns_addr, ws_addr
from rmq.remoting import RemotingClient, RemotingCommand
from rmq.testing.cluster import broker_conf, start_namesrv
from rmq.testing.procs import RmqProcess, free_port

pytestmark = pytest.mark.timeout(90)


class AddressServer:
    """Answers GET /rocketmq/<subgroup> with ``self.answer``; counts requests."""

    def __init__(self, answer: str) -> None:
        self.answer, self.paths = answer, []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - the http.server API
                outer.paths.append(self.path)
                body = outer.answer.encode()
                self.send_response(200 if self.path.startswith("/rocketmq/") else 404)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_ws_addr_and_fetch():
    assert ws_addr() == "http://jmenv.tbsite.net:8080/rocketmq/nsaddr"
    assert ws_addr("10.0.0.1:80", "prod", "u1") == "http://10.0.0.1:80/rocketmq/prod-u1?nofix=1"
    server = AddressServer("  127.0.0.1:9876;127.0.0.1:9877\n")
    try:
        assert fetch_ns_addr(ws_addr(f"127.0.0.1:{server.port}")) == "127.0.0.1:9876;127.0.0.1:9877"
        server.answer = "   "
        assert fetch_ns_addr(ws_addr(f"127.0.0.1:{server.port}")) is None
        assert fetch_ns_addr(f"http://127.0.0.1:{server.port}/elsewhere") is None
    finally:
        server.close()
    assert fetch_ns_addr(f"http://127.0.0.1:{free_port()}/rocketmq/nsaddr", 1.0) is None


def test_broker_finds_its_name_server_through_the_address_server(tmp_path):
    ns_port = free_port()
    namesrv = start_namesrv(tmp_path, ns_port)
    server = AddressServer(f"127.0.0.1:{ns_port}")
    port = free_port(span=4) + 2
    conf = broker_conf(tmp_path, port, f"fetchNamesrvAddrByAddressServer=true\n"
                                       f"rmqAddressServerDomain=127.0.0.1:{server.port}\n"
                                       "rmqAddressServerSubGroup=nsaddr-test\n")
    broker = RmqProcess("rmq.broker.startup", ["-c", conf], tmp_path / "broker.out",
                        env={"ROCKETMQ_HOME": str(tmp_path)}).start(wait_for_port=port)

    async def routed() -> bool:
        client = RemotingClient()
        try:
            for _ in range(120):
                request = RemotingCommand.create_request(R.GET_BROKER_CLUSTER_INFO)
                resp = await client.invoke(f"127.0.0.1:{ns_port}", request, 3000)
                if f"127.0.0.1:{port}" in bytes(resp.body or b"").decode():
                    return True
                await asyncio.sleep(0.25)
            return False
        finally:
            await client.close()

    try:
        assert asyncio.run(routed()), "the broker never registered"
        assert server.paths and server.paths[0] == "/rocketmq/nsaddr-test"
    finally:
        broker.kill()
        namesrv.kill()
        server.close()
