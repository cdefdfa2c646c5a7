"""``SqlFilter``: the SQL92 expression type, compiling selectors with a
bounded cache of parse results (4.9.8 keeps the last 100 in
``SelectorParser``), so the many pulls and heartbeats that carry the same
expression parse it once.  Compiled expressions are immutable and shared."""

from __future__ import annotations

from collections import OrderedDict

from rmq.filter.expression import BooleanExpression, FilterError
from rmq.filter.parser import parse

SQL92 = "SQL92"
PARSE_CACHE_SIZE = 100


class SqlFilter:
    """Compiles SQL92 selectors; failures are cached too (as 4.9.8 does)."""

    def __init__(self, cache_size: int = PARSE_CACHE_SIZE) -> None:
        self._cache: OrderedDict[str, BooleanExpression | FilterError] = OrderedDict()
        self._cache_size = cache_size

    def of_type(self) -> str:
        return SQL92

    def compile(self, expression: str) -> BooleanExpression:
        """The compiled selector; FilterError when it does not compile."""
        if expression is None:
            raise FilterError("Expression can't be null!")
        cached = self._cache.get(expression)
        if cached is None:
            try:
                cached = parse(expression)
            except FilterError as exc:
                cached = exc
            self._cache[expression] = cached
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(expression)
        if isinstance(cached, FilterError):
            raise FilterError(str(cached))
        return cached
