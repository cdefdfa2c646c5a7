"""SQL92 message filtering of RocketMQ 4.9.8 (the ``filter`` module).

``FILTERS.compile("SQL92", "a > 5 AND region = 'eu'")`` returns a
:class:`BooleanExpression`; ``expr.matches(properties)`` is True when the
selector evaluates to TRUE over a message's properties (a dict of strings).
Invalid selectors raise :class:`FilterError`.  See ``parser.py`` for the
grammar and ``expression.py`` for the evaluation rules.
"""

from rmq.filter.expression import BooleanExpression, FilterError
from rmq.filter.filter_factory import INSTANCE as FILTERS
from rmq.filter.filter_factory import FilterFactory
from rmq.filter.sql_filter import SQL92, SqlFilter

__all__ = ["FILTERS", "SQL92", "BooleanExpression", "FilterError", "FilterFactory", "SqlFilter"]
