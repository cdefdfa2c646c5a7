"""5.x statuses: the error an RPC answers with, and the mapping of broker
response codes to ``apache.rocketmq.v2.Code`` (5.3.3's ``ResponseBuilder``).

Unary RPCs answer errors as a normal response whose ``status`` carries the
code and message, never as a gRPC error, as Apache's proxy does; the 5.x
clients read only that status.
"""

from __future__ import annotations

from rmq.common.codes import ResponseCode as RC
from rmq.proxy.v2 import definition_pb2 as pb

Code = pb.Code

# broker response code -> 5.x code; anything else is INTERNAL_SERVER_ERROR
RESPONSE_CODES: dict[int, int] = {
    RC.SUCCESS: Code.OK,
    RC.SYSTEM_BUSY: Code.TOO_MANY_REQUESTS,
    RC.REQUEST_CODE_NOT_SUPPORTED: Code.NOT_IMPLEMENTED,
    RC.SUBSCRIPTION_GROUP_NOT_EXIST: Code.CONSUMER_GROUP_NOT_FOUND,
    RC.TOPIC_NOT_EXIST: Code.TOPIC_NOT_FOUND,
    RC.NO_PERMISSION: Code.FORBIDDEN,
}


class ProxyError(Exception):
    """An RPC refused with ``code`` and a one-line ``message``."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


_PLAIN: dict[int, pb.Status] = {}


def status(code: int, message: str | None = None) -> pb.Status:
    """A Status; the message defaults to the code's name, as 5.3.3 writes it.
    Those are built once per code and shared: a response copies the status it
    is given, and nothing changes one after it is built."""
    if message is None:
        st = _PLAIN.get(code)
        if st is None:
            st = _PLAIN[code] = pb.Status(code=code, message=Code.Name(code))
        return st
    return pb.Status(code=code, message=message)


def code_of_response(response_code: int) -> int:
    return RESPONSE_CODES.get(response_code, Code.INTERNAL_SERVER_ERROR)


def check_response(response, what: str) -> None:
    """Raise the ProxyError for a broker response that is not SUCCESS."""
    if response.code != RC.SUCCESS:
        raise ProxyError(code_of_response(response.code),
                         response.remark or f"{what} failed: broker code {response.code}")
