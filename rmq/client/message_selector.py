"""``MessageSelector``: how a consumer selects messages of a topic, by tags
(``TagA || TagB``, ``*``) or by a SQL92 expression over message properties
(evaluated by the broker, which needs ``enablePropertyFilter=true``)."""

from __future__ import annotations

from dataclasses import dataclass

from rmq.client.heartbeat import EXPRESSION_SQL92, EXPRESSION_TAG, SUB_ALL


@dataclass(frozen=True, slots=True)
class MessageSelector:
    expression_type: str
    expression: str

    @classmethod
    def by_sql(cls, sql: str) -> MessageSelector:
        """Messages whose properties satisfy ``sql``, e.g. ``a > 5 AND region = 'eu'``."""
        return cls(EXPRESSION_SQL92, sql)

    @classmethod
    def by_tag(cls, tag: str | None = SUB_ALL) -> MessageSelector:
        """Messages carrying one of the tags (``TagA || TagB``; ``*`` or None: all)."""
        return cls(EXPRESSION_TAG, tag or SUB_ALL)
