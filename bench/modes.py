"""Where the benchmarks live and which build they run: the compiled extensions or
the pure-Python twins, chosen per subprocess by its environment."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT_DIR = ROOT / "bench" / "out"
MODES = ("compiled", "twin")


def mode_env(mode: str, base: dict | None = None) -> dict[str, str]:
    """Environment of a subprocess running the compiled build or the twins.

    The compiled mode *requires* the extensions, so a missing ``make ext``
    fails loudly instead of silently measuring the twins twice."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r} (expected one of {MODES})")
    env = dict(os.environ if base is None else base)
    env.pop("RMQ_NO_EXTENSIONS", None)
    env.pop("RMQ_REQUIRE_EXTENSIONS", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    if mode == "twin":
        env["RMQ_NO_EXTENSIONS"] = "1"
    else:
        env["RMQ_REQUIRE_EXTENSIONS"] = "1"
    return env


def current_mode() -> str:
    """The build this process was asked to use: "twin" under RMQ_NO_EXTENSIONS=1."""
    return "twin" if os.environ.get("RMQ_NO_EXTENSIONS") == "1" else "compiled"
