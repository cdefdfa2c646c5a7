"""Run the fuzz targets with atheris (libFuzzer), each for a bounded time.

    .venv/bin/python -m fuzz.run [TARGET ...] [--seconds 60] [--jobs 1] [--out build/fuzz]
    .venv/bin/python -m fuzz.run --list

Each target runs in its own process: the committed seeds (fuzz/corpus/<target>/)
plus what earlier runs found (<out>/corpus/<target>/, where new inputs are
written) are its starting corpus.  A crash (an exception the decoder's callers
do not handle, or the compiled decoder disagreeing with its twin) stops the
target and leaves the input in <out>/crash-<target>-*; make it a regression
test by copying it to fuzz/corpus/<target>/ once fixed (tests/unit/
test_fuzz_corpus.py replays that directory).  Prints one row per target:
inputs run, inputs/s, coverage (libFuzzer's ``cov`` edges and ``ft``
features over the instrumented rmq modules) and the corpus size; exits
non-zero when any target crashed.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEEDS = ROOT / "fuzz" / "corpus"
# "#12345 DONE cov: 812 ft: 2311 corp: 140/9182b lim: 4096 exec/s: 4115 rss: 87Mb"
_STATUS = re.compile(r"#(\d+)\s+\w+\s+cov: (\d+) ft: (\d+) corp: (\d+)/")
_NAMES = ("frames", "header_json", "header_rocketmq", "stored_message", "batch", "heartbeat",
          "register_broker", "sql92", "properties", "plain_acl")


def child(target: str, libfuzzer_args: list[str]) -> None:
    """Inside the fuzzing process: instrument rmq, then hand over to libFuzzer."""
    import atheris

    with atheris.instrument_imports(include=["rmq", "fuzz"]):
        from fuzz.targets import TARGETS
    fn = TARGETS[target]
    atheris.Setup([sys.argv[0], *libfuzzer_args], fn)
    atheris.Fuzz()


def run_target(target: str, seconds: int, out: Path, max_len: int) -> dict:
    work = out / "corpus" / target
    work.mkdir(parents=True, exist_ok=True)
    args = [str(work), str(SEEDS / target), f"-max_total_time={seconds}", f"-max_len={max_len}",
            f"-artifact_prefix={out}/crash-{target}-", "-print_final_stats=1",
            "-rss_limit_mb=2048", "-timeout=10"]
    cmd = [sys.executable, "-m", "fuzz.run", "--child", target, "--", *args]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True,
                          timeout=seconds + 300, env=dict(os.environ, PYTHONHASHSEED="0"))
    took = time.monotonic() - t0
    log = out / f"{target}.log"
    log.write_text(proc.stderr)
    status = _STATUS.findall(proc.stderr)
    runs, cov, ft, corp = (int(x) for x in status[-1]) if status else (0, 0, 0, 0)
    crashed = proc.returncode != 0
    return {"target": target, "inputs": runs, "per_s": runs / took if took else 0.0,
            "cov": cov, "ft": ft, "corpus": corp, "crashed": crashed, "log": str(log)}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        child(argv[1], argv[3:] if argv[2:3] == ["--"] else argv[2:])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("targets", nargs="*", help=f"default: all ({', '.join(_NAMES)})")
    ap.add_argument("--seconds", type=int, default=int(os.environ.get("FUZZ_SECONDS", 60)))
    ap.add_argument("--jobs", type=int, default=1, help="targets fuzzed at once")
    ap.add_argument("--max-len", type=int, default=4096)
    ap.add_argument("--out", type=Path, default=ROOT / "build" / "fuzz")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args(argv)
    if args.list:
        print("\n".join(_NAMES))
        return 0
    unknown = sorted(set(args.targets) - set(_NAMES))
    if unknown:
        print(f"fuzz: unknown target(s) {', '.join(unknown)}; --list shows them", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    targets = args.targets or list(_NAMES)
    with ThreadPoolExecutor(max(1, args.jobs)) as ex:
        rows = list(ex.map(lambda t: run_target(t, args.seconds, args.out, args.max_len), targets))
    print("| target | inputs | inputs/s | cov | ft | corpus | result |\n|---|---|---|---|---|---|---|")
    for r in rows:
        result = f"CRASH (see {r['log']})" if r["crashed"] else "ok"
        print(f"| {r['target']} | {r['inputs']:,} | {r['per_s']:,.0f} | {r['cov']} | {r['ft']} "
              f"| {r['corpus']} | {result} |")
    print(f"total inputs: {sum(r['inputs'] for r in rows):,}")
    return 1 if any(r["crashed"] for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
