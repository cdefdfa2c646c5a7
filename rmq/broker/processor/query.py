"""QueryMessageProcessor: QUERY_MESSAGE (by key or unique key, through the
index) and VIEW_MESSAGE_BY_ID (by commit-log offset)
(../shared/spec/PROTOCOL.md 3.4).  Bodies are the stored records as
memoryviews of the mapped commit log."""

from __future__ import annotations

from typing import Any

from rmq.client.headers import QueryMessageRequestHeader, ViewMessageRequestHeader
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting import Channel, RemotingCommand

R = RequestCode
RC = ResponseCode
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"


class QueryMessageProcessor:
    def __init__(self, controller: Any) -> None:
        self.c = controller

    def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        if request.code == R.QUERY_MESSAGE:
            return self.query_message(request)
        return self.view_message_by_id(request)

    def query_message(self, request: RemotingCommand) -> RemotingCommand:
        h = request.decode_header(QueryMessageRequestHeader)
        max_num = h.maxNum
        if (request.ext_fields or {}).get(UNIQUE_KEY_QUERY, "").lower() == "true":
            max_num = self.c.store_config.defaultQueryMaxNum
        result = self.c.message_store.query_message(h.topic, h.key, max_num, h.beginTimestamp,
                                                     h.endTimestamp)
        header = {"indexLastUpdateTimestamp": str(result.index_last_update_timestamp),
                  "indexLastUpdatePhyoffset": str(result.index_last_update_phyoffset)}
        if result.buffer_total_size > 0:
            return RemotingCommand.create_response(RC.SUCCESS, header=header,
                                                   body=list(result.message_buffers))
        return RemotingCommand.create_response(
            RC.QUERY_NOT_FOUND, "can not find message, maybe time range not correct",
            header=header)

    def view_message_by_id(self, request: RemotingCommand) -> RemotingCommand:
        h = request.decode_header(ViewMessageRequestHeader)
        mv = self.c.message_store.select_one_message_by_offset(h.offset)
        if mv is None:
            return RemotingCommand.create_response(
                RC.SYSTEM_ERROR, f"can not find message by the offset, {h.offset}")
        return RemotingCommand.create_response(RC.SUCCESS, body=[mv])
