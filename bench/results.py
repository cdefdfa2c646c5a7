"""The result tables of a benchmark run: Markdown for reading, JSON for
comparing, and the commit they were measured at."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path

from bench.modes import OUT_DIR, ROOT


def fmt(value) -> str:
    """Compact human formatting of a figure for the Markdown table."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value == 0:
            return "0"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        if abs(value) >= 10:
            return f"{value:.1f}"
        return f"{value:.3g}"
    return str(value)


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(fmt(v) for v in row) + " |")
    return "\n".join(lines) + "\n"


def write_results(stem: str, doc: dict, markdown: str, out_dir: Path = OUT_DIR) -> tuple[Path, Path]:
    """Write ``<stem>.json`` and ``<stem>.md`` under ``out_dir``; returns both paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    jpath, mpath = out_dir / f"{stem}.json", out_dir / f"{stem}.md"
    jpath.write_text(json.dumps(doc, indent=2, sort_keys=True, default=str) + "\n")
    mpath.write_text(markdown)
    return jpath, mpath


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"
