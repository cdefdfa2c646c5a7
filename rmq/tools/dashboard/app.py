"""rmq-dashboard: the web console (aiohttp), its JSON API and its login.

    rmq-dashboard --namesrv 127.0.0.1:9876 [--port 8080] [--login-required --users FILE]

Everything the browser loads ships in ``static/`` (no CDN).  Reads are open;
writes (create, update and delete topics, send, reset offsets, consume
directly) need an admin login when ``--login-required`` is given, as
rocketmq-dashboard's ``rocketmq.config.loginRequired`` does, with the same
users file format: ``name=password[,1]``, ``1`` marking an admin.  Every error
from a broker or name server is answered as ``{"error": ...}`` with the
peer's code and remark, and the page shows it.
"""

from __future__ import annotations

import argparse
import asyncio
import hmac
import logging
import secrets
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import orjson
from aiohttp import web

from rmq.client.exceptions import MQBrokerError, MQClientError
from rmq.common.properties import ConfigError, parse_properties
from rmq.remoting.exceptions import RemotingError
from rmq.tools.dashboard.service import DashboardService

log = logging.getLogger("rmq.dashboard")

STATIC = Path(__file__).with_name("static")
SESSION_COOKIE = "rmq_dashboard_session"
SERVICE = web.AppKey("service", DashboardService)
AUTH = web.AppKey("auth", "Auth")


class Auth:
    """Users from rocketmq-dashboard's users.properties and the sessions of
    those logged in (kept in memory: a restart logs everyone out)."""

    def __init__(self, required: bool, users: dict[str, tuple[str, bool]]) -> None:
        self.required = required
        self.users = users
        self.sessions: dict[str, tuple[str, bool]] = {}

    @classmethod
    def from_file(cls, required: bool, path: str | None) -> Auth:
        users: dict[str, tuple[str, bool]] = {}
        if path:
            text = Path(path).read_text(encoding="utf-8")
            for name, value in parse_properties(text).items():
                password, _, flag = value.partition(",")
                users[name.strip()] = (password.strip(), flag.strip() == "1")
        if required and not users:
            raise ConfigError("--login-required needs --users with at least one user")
        return cls(required, users)

    def login(self, name: str, password: str) -> str | None:
        entry = self.users.get(name)
        if entry is None or not hmac.compare_digest(entry[0].encode(), password.encode()):
            return None
        token = secrets.token_urlsafe(24)
        self.sessions[token] = (name, entry[1])
        return token

    def who(self, request: web.Request) -> tuple[str, bool] | None:
        return self.sessions.get(request.cookies.get(SESSION_COOKIE, ""))

    def may_write(self, request: web.Request) -> bool:
        if not self.required:
            return True
        who = self.who(request)
        return who is not None and who[1]


def _json(data, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(data), status=status, content_type="application/json")


def _error(message: str, status: int) -> web.Response:
    return _json({"error": message}, status)


@web.middleware
async def errors(request: web.Request, handler: Callable[[web.Request], Awaitable]) -> web.StreamResponse:
    """Every failure becomes ``{"error": ...}``: a peer's answer (502) keeps its
    code and remark, a bad argument is a 400, and nothing is swallowed."""
    try:
        return await handler(request)
    except web.HTTPException:
        raise
    except MQBrokerError as exc:
        return _error(f"broker {exc.broker_addr or ''} answered {exc}".replace("  ", " "), 502)
    except MQClientError as exc:
        return _error(str(exc), 502 if exc.code >= 0 else 400)
    except (TimeoutError, RemotingError, OSError) as exc:
        return _error(f"{type(exc).__name__}: {exc}", 502)
    except (KeyError, ValueError, TypeError) as exc:
        return _error(f"bad request: {exc}", 400)


async def _body(request: web.Request) -> dict:
    data = await request.json(loads=orjson.loads)
    if not isinstance(data, dict):
        raise ValueError("a JSON object is expected")
    return data


def _write(handler: Callable[[web.Request], Awaitable[web.StreamResponse]]):
    """A write action: refused with 401 when a login is required and missing."""
    async def guarded(request: web.Request) -> web.StreamResponse:
        if not request.app[AUTH].may_write(request):
            return _error("login required: write actions need an admin user", 401)
        return await handler(request)
    return guarded


def _int(data: dict, key: str, default: int | None = None) -> int:
    value = data.get(key, default)
    if value is None or value == "":
        raise ValueError(f"{key} is required")
    return int(value)


def _str(data, key: str) -> str:
    value = (data.get(key) or "").strip()
    if not value:
        raise ValueError(f"{key} is required")
    return value


# ---- handlers -------------------------------------------------------------------
async def index(request: web.Request) -> web.FileResponse:
    return web.FileResponse(STATIC / "index.html")


async def session(request: web.Request) -> web.Response:
    auth = request.app[AUTH]
    who = auth.who(request)
    return _json({"loginRequired": auth.required, "user": who[0] if who else None,
                  "admin": bool(who and who[1]) or not auth.required})


async def login(request: web.Request) -> web.Response:
    data = await _body(request)
    token = request.app[AUTH].login(str(data.get("user", "")), str(data.get("password", "")))
    if token is None:
        return _error("wrong user name or password", 401)
    response = _json({"user": data["user"]})
    response.set_cookie(SESSION_COOKIE, token, httponly=True, samesite="Strict")
    return response


async def logout(request: web.Request) -> web.Response:
    request.app[AUTH].sessions.pop(request.cookies.get(SESSION_COOKIE, ""), None)
    response = _json({"user": None})
    response.del_cookie(SESSION_COOKIE)
    return response


async def cluster(request: web.Request) -> web.Response:
    return _json(await request.app[SERVICE].cluster())


async def topics(request: web.Request) -> web.Response:
    return _json(await request.app[SERVICE].topics())


async def topic(request: web.Request) -> web.Response:
    return _json(await request.app[SERVICE].topic(request.match_info["topic"]))


@_write
async def create_topic(request: web.Request) -> web.Response:
    d = await _body(request)
    return _json(await request.app[SERVICE].create_topic(
        _str(d, "topic"), _str(d, "cluster"), _int(d, "readQueueNums", 8),
        _int(d, "writeQueueNums", 8), _int(d, "perm", 6), bool(d.get("order", False))))


@_write
async def delete_topic(request: web.Request) -> web.Response:
    return _json(await request.app[SERVICE].delete_topic(
        request.match_info["topic"], _str(request.query, "cluster")))


@_write
async def send(request: web.Request) -> web.Response:
    d = await _body(request)
    return _json(await request.app[SERVICE].send(
        request.match_info["topic"], str(d.get("tag", "")), str(d.get("key", "")),
        str(d.get("body", ""))))


async def groups(request: web.Request) -> web.Response:
    return _json(await request.app[SERVICE].groups())


async def group(request: web.Request) -> web.Response:
    return _json(await request.app[SERVICE].group(request.match_info["group"]))


@_write
async def reset_offset(request: web.Request) -> web.Response:
    d = await _body(request)
    return _json(await request.app[SERVICE].reset_offset(
        request.match_info["group"], _str(d, "topic"), _int(d, "timestamp")))


@_write
async def skip(request: web.Request) -> web.Response:
    d = await _body(request)
    return _json(await request.app[SERVICE].reset_offset(
        request.match_info["group"], _str(d, "topic"), -1))


async def messages(request: web.Request) -> web.Response:
    q, service = request.query, request.app[SERVICE]
    topic_name = _str(q, "topic")
    if q.get("key"):
        return _json(await service.messages_by_key(topic_name, q["key"].strip()))
    if q.get("id"):
        return _json(await service.message_by_id(topic_name, q["id"].strip()))
    now = int(time.time() * 1000)
    return _json(await service.messages_by_time(topic_name, _int(q, "begin", now - 3_600_000),
                                                _int(q, "end", now)))


@_write
async def consume_directly(request: web.Request) -> web.Response:
    d = await _body(request)
    return _json(await request.app[SERVICE].consume_directly(
        _str(d, "group"), _str(d, "clientId"), _str(d, "msgId")))


async def producers(request: web.Request) -> web.Response:
    q = request.query
    return _json(await request.app[SERVICE].producers(_str(q, "topic"), _str(q, "group")))


async def live(request: web.Request) -> web.Response:
    return _json(request.app[SERVICE].live())


def make_app(service: DashboardService, auth: Auth) -> web.Application:
    app = web.Application(middlewares=[errors])
    app[SERVICE] = service
    app[AUTH] = auth
    r = app.router
    r.add_get("/", index)
    r.add_static("/static/", STATIC)
    r.add_get("/api/session", session)
    r.add_post("/api/login", login)
    r.add_post("/api/logout", logout)
    r.add_get("/api/cluster", cluster)
    r.add_get("/api/topics", topics)
    r.add_post("/api/topics", create_topic)
    r.add_get("/api/topics/{topic}", topic)
    r.add_delete("/api/topics/{topic}", delete_topic)
    r.add_post("/api/topics/{topic}/send", send)
    r.add_get("/api/groups", groups)
    r.add_get("/api/groups/{group}", group)
    r.add_post("/api/groups/{group}/reset", reset_offset)
    r.add_post("/api/groups/{group}/skip", skip)
    r.add_get("/api/messages", messages)
    r.add_post("/api/messages/consume-directly", consume_directly)
    r.add_get("/api/producers", producers)
    r.add_get("/api/live", live)
    return app


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="rmq-dashboard", description="rmq web console")
    p.add_argument("-n", "--namesrv", required=True, help="name server address(es), host:port;...")
    p.add_argument("--host", default="0.0.0.0", help="address to listen on")
    p.add_argument("--port", type=int, default=8080, help="HTTP port (0: any free port)")
    p.add_argument("--login-required", action="store_true",
                   help="write actions need an admin login")
    p.add_argument("--users", help="users file: name=password[,1] per line (1: admin)")
    p.add_argument("--sample-interval", type=float, default=5.0,
                   help="seconds between samples of the live charts")
    return p.parse_args(argv)


async def serve(ns: argparse.Namespace) -> None:
    auth = Auth.from_file(ns.login_required, ns.users)
    service = DashboardService(ns.namesrv)
    runner = web.AppRunner(make_app(service, auth), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, ns.host, ns.port)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # the port chosen for --port 0
    print(f"rmq-dashboard on http://{ns.host}:{port}/ (name server {ns.namesrv})", flush=True)
    service.start_sampler(ns.sample_interval)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
        await service.close()


def main(argv: list[str] | None = None) -> int:
    ns = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    try:
        asyncio.run(serve(ns))
    except (ConfigError, OSError) as exc:
        print(f"rmq-dashboard: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
