"""A bench module's run counted under valgrind's callgrind.

The benches' ``--instructions`` modes run themselves twice under callgrind,
at two sizes, and print the difference per unit of work: deterministic
counts, unlike timings, on a machine whose cores other runs share.  This is
the one place that starts such a run and reads its total.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path


def callgrind_total(module: str, args: list[str], main_thread: bool = False,
                    inside: str | None = None) -> int:
    """Instructions of ``python -m module *args`` under callgrind; with
    ``main_thread`` those of its first thread alone (threads that wake by the
    clock, such as a store's flushers, run more the slower the run, so they
    would blur a difference of two runs); with ``inside`` (a C function's
    symbol) only those executed within calls of that function."""
    with tempfile.TemporaryDirectory(prefix=module.rpartition(".")[2].replace("_", "-")
                                     + "-cg-") as tmp:
        done = subprocess.run(
            ["valgrind", "--tool=callgrind",
             *(["--separate-threads=yes"] if main_thread else []),
             *([f"--toggle-collect={inside}"] if inside else []),
             f"--callgrind-out-file={tmp}/out", sys.executable, "-m", module, *args],
            capture_output=True, text=True, env=os.environ, check=False)
        if main_thread:
            out = Path(tmp) / "out-01"
            text = out.read_text(errors="replace") if out.exists() else ""
            totals = [line.split()[1] for line in text.splitlines()
                      if line.startswith(("summary:", "totals:"))]
        else:
            found = re.search(r"Collected : (\d+)", done.stderr)
            totals = [found.group(1)] if found else []
    if done.returncode != 0 or not totals:
        raise SystemExit(f"callgrind run failed: {done.stdout[-500:]} {done.stderr[-500:]}")
    return int(totals[0])
