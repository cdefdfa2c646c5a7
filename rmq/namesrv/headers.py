"""The name-server headers the broker's ``BrokerOuterAPI`` imports from here; every
header class is declared once in ``rmq.common.protocol.headers_namesrv``."""

from rmq.common.protocol.headers_namesrv import (  # noqa: F401  (re-exported, see above)
    QueryDataVersionRequestHeader,
    QueryDataVersionResponseHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnRegisterBrokerRequestHeader,
)
