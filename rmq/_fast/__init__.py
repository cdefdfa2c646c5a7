"""Compiled hot paths (Cython) and the switch that picks them.

Every module here has a pure-Python twin with the same API next to the code
that uses it.  ``compiled(name)`` returns the compiled module, or ``None`` when
it is not built or when ``RMQ_NO_EXTENSIONS=1`` forces the twins.  When
``RMQ_REQUIRE_EXTENSIONS=1`` a missing compiled module is an error instead, so
a test run that means to exercise the compiled build cannot silently fall back.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

NO_EXTENSIONS = os.environ.get("RMQ_NO_EXTENSIONS", "") == "1"
REQUIRE_EXTENSIONS = os.environ.get("RMQ_REQUIRE_EXTENSIONS", "") == "1" and not NO_EXTENSIONS


def compiled(name: str) -> ModuleType | None:
    """Import ``rmq._fast.<name>`` unless the twins are forced."""
    if NO_EXTENSIONS:
        return None
    try:
        return importlib.import_module(f"rmq._fast.{name}")
    except ImportError:
        if REQUIRE_EXTENSIONS:
            raise
        return None


def compiled_or_none(name: str) -> ModuleType | None:
    """Import the compiled module whatever the environment says (for tests that
    compare both implementations explicitly)."""
    try:
        return importlib.import_module(f"rmq._fast.{name}")
    except ImportError:
        return None
