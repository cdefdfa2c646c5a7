"""Master/slave commit-log replication (4.9.8 ``org.apache.rocketmq.store.ha``).

``HAService`` (master: slave connections and SYNC_MASTER waits; slave: the
``HAClient``), the stream codec and ``GroupTransferService``.  See docs/ha.md.
"""

from rmq.store.ha.ha_client import HAClient
from rmq.store.ha.ha_service import HAService

__all__ = ["HAClient", "HAService"]
