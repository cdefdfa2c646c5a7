"""SET_MESSAGE_REQUEST_MODE (401): mqadmin ``setConsumeMode`` records whether a
group consumes a topic by PULL or POP (5.3.3's QueryAssignmentProcessor part
that rmq serves; the mode is kept in config/messageRequestMode.json)."""

from __future__ import annotations

from typing import Any

from rmq.broker.message_request_mode import MessageRequestModeManager, parse_mode_body
from rmq.common import fastjson
from rmq.common.codes import ResponseCode
from rmq.remoting import Channel, RemotingCommand


class QueryAssignmentProcessor:
    def __init__(self, controller: Any) -> None:
        self.c = controller
        self.modes = MessageRequestModeManager(controller.store_config.storePathRootDir)
        self.modes.load()
        controller.message_request_mode_manager = self.modes

    def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        try:
            body = parse_mode_body(fastjson.loads(bytes(request.body or b"")))
        except (ValueError, fastjson.FastjsonError) as exc:
            return RemotingCommand.create_response(ResponseCode.SYSTEM_ERROR,
                                                   f"bad SetMessageRequestModeRequestBody: {exc}")
        if body["topic"].startswith("%RETRY%"):
            return RemotingCommand.create_response(ResponseCode.NO_PERMISSION,
                                                   "retry topic is not allowed to set mode")
        self.modes.set_mode(body)
        return RemotingCommand.create_response(ResponseCode.SUCCESS)
