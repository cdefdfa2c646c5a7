"""``FilterFactory``: the filters by expression type (only SQL92 in 4.9.8;
TAG subscriptions are matched by tag hash codes, not through a filter)."""

from __future__ import annotations

from typing import Protocol

from rmq.filter.expression import BooleanExpression, FilterError
from rmq.filter.sql_filter import SqlFilter


class FilterSpi(Protocol):
    def of_type(self) -> str: ...

    def compile(self, expression: str) -> BooleanExpression: ...


class FilterFactory:
    def __init__(self) -> None:
        self._filters: dict[str, FilterSpi] = {}

    def register(self, spi: FilterSpi) -> None:
        if spi.of_type() in self._filters:
            raise ValueError(f"Filter spi type({spi.of_type()}) already exist!")
        self._filters[spi.of_type()] = spi

    def get(self, expression_type: str | None) -> FilterSpi | None:
        return self._filters.get(expression_type) if expression_type else None

    def compile(self, expression_type: str | None, expression: str) -> BooleanExpression:
        """Compile with the filter of ``expression_type``; FilterError for an
        unknown type or an invalid expression."""
        spi = self.get(expression_type)
        if spi is None:
            raise FilterError(f"no filter for expression type {expression_type}")
        return spi.compile(expression)


INSTANCE = FilterFactory()
INSTANCE.register(SqlFilter())
