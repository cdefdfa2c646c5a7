"""bench.grpc at a small size: all four paths run against a real broker and
the ratios are printed (the figures themselves go in bench/RESULTS.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.once


@pytest.mark.timeout(120)
def test_grpc_bench_runs():
    out = subprocess.run([sys.executable, "-m", "bench.grpc", "--messages", "300",
                          "--inflight", "4", "--json"],
                         capture_output=True, text=True, timeout=110, cwd=ROOT)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    paths = [r["path"] for r in result["results"]]
    assert paths == ["remoting send", "gRPC send", "remoting pop+ack", "gRPC receive+ack"]
    # a short run's CPU may be below the clock's 10 ms resolution: no figure asserted
    assert all(r["msgs"] >= 300 and r["broker_cpu_us_per_msg"] >= 0 for r in result["results"])
    assert {"send_cpu_ratio", "receive_cpu_ratio"} <= result.keys()
