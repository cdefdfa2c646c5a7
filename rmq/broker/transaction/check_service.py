"""TransactionalMessageCheckService: one back-check round every
``transactionCheckInterval`` ms on the broker loop, the first one interval
after start (4.9.8 waits an interval before its first check).  The period,
``transactionTimeOut`` and ``transactionCheckMax`` are read afresh each
round, so UPDATE_BROKER_CONFIG changes them at run time.  Masters only: the
controller starts it unless the broker is a slave.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from rmq.common.logging import TRANSACTION_LOGGER_NAME
from rmq.common.periodic import PeriodicService

log = logging.getLogger(TRANSACTION_LOGGER_NAME)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class TransactionalMessageCheckService(PeriodicService):
    failure_message = "transaction check round failed"

    def __init__(self, controller: Any) -> None:
        super().__init__("TransactionalMessageCheckService", log)
        self.c = controller

    def period_s(self) -> float:
        return max(self.c.broker_config.transactionCheckInterval, 1) / 1000

    def initial_delay_s(self) -> float:
        return self.period_s()

    async def run_once(self) -> None:
        bc = self.c.broker_config
        begin = _now_ms()
        log.info("Begin to check prepare message, begin time:%d", begin)
        await self.c.transactional_message_service.check(
            bc.transactionTimeOut, bc.transactionCheckMax,
            self.c.transactional_message_check_listener)
        log.info("End to check prepare message, consumed time:%d", _now_ms() - begin)
