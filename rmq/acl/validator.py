"""PlainAccessValidator: plain ACL as a broker's server hook (RocketMQ
``PlainAccessValidator`` and the hook ``BrokerController.initialAcl`` registers).

``do_before_request`` runs before every request on both broker ports: it
works out what the request needs and checks it against the rules; a refusal
raises ``AclException``, which the remoting layer answers with SYSTEM_ERROR
and ``org.apache.rocketmq.acl.common.AclException: <message>`` as the remark.
The connection stays open.  The rule files are watched: a change applies
within ``WATCH_INTERVAL_S`` plus the time to parse the file.
"""

from __future__ import annotations

import logging

from rmq.acl import access_resource
from rmq.acl.permission_manager import PlainPermissionManager
from rmq.common.file_watch import FileWatchService
from rmq.remoting import RemotingCommand

log = logging.getLogger("RocketmqCommon")

WATCH_INTERVAL_S = 0.5


class PlainAccessValidator:
    """The rules of ``home``'s ACL files, checked before every request."""

    # nothing is done after a response: a request this hook passed may be
    # answered by the broker's send and pull lanes
    checks_only = True

    def __init__(self, home: str, plain_file: str = "conf/plain_acl.yml") -> None:
        self.manager = PlainPermissionManager(home, plain_file)
        self.watch = FileWatchService("AclFileWatchService", self._watched, self._files_changed,
                                      WATCH_INTERVAL_S, log)
        self.manager.load()

    def _watched(self) -> list[str]:
        return self.manager.file_list()

    def _files_changed(self, _paths: list[str]) -> None:
        self.manager.reload()

    # ---- the server hook ------------------------------------------------------------
    def do_before_request(self, remote_addr: str | None, request: RemotingCommand) -> None:
        self.manager.validate(access_resource.parse(request, remote_addr))

    def do_after_response(self, remote_addr: str | None, request: RemotingCommand,
                          response: RemotingCommand | None) -> None:
        return None

    # ---- service life cycle (the watcher) -----------------------------------------
    async def start(self) -> None:
        await self.watch.start()

    async def shutdown(self) -> None:
        await self.watch.shutdown()
