"""``rmq-capacity``: capacity report over one or many broker store directories.

    rmq-capacity [--out DIR] [--master URL] [--broker NAME=PATH ...] [STORE_DIR ...]
                 [--broker-conf [NAME=]PATH ...] [--disk-size [NAME=]SIZE ...]
                 [--retention-hours H] [--target-queue-rate R]

A positional store directory is one broker named after the directory.  Paths
may be any Hadoop file system URI or a local path.

Exit status: 0 report written and every file read cleanly; 3 report written
but some store files were corrupt, truncated or inconsistent (listed in the
report's "Problems" section and tables/issues.csv); 2 bad command line or a
store directory that does not exist; 1 any other failure.
"""

from __future__ import annotations

import argparse
import os
import posixpath
import re
import sys
import time

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_ISSUES = 0, 1, 2, 3
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)i?b?\s*$", re.I)


def parse_size(text: str) -> int:
    """'500G', '1.5T', '1048576' -> bytes (binary multiples)."""
    m = _SIZE.match(text)
    if not m:
        raise ValueError(f"bad size {text!r}")
    unit = m.group(2).upper()
    return int(float(m.group(1)) * (1024 ** ("KMGTP".index(unit) + 1) if unit else 1))


def _named(values: list[str], names: list[str], what: str, later: bool = False) -> dict[str | None, str]:
    """'NAME=VALUE' or a bare VALUE (applies to every broker) -> {name|None: value}.
    ``later``: names not known yet are kept, for the brokerName a store
    directory turns out to have (checked once the stores are read)."""
    out: dict[str | None, str] = {}
    for v in values:
        name, sep, rest = v.partition("=")
        if sep and (name in names or (later and not ("/" in name or ":" in name))):
            out[name] = rest
        elif sep and not ("/" in name or ":" in name):
            raise ValueError(f"{what}: unknown broker {name!r}")
        else:
            out[None] = v
    return out


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rmq-capacity", description=__doc__.split("\n\n")[0])
    p.add_argument("stores", nargs="*", help="store root directories (one broker each, named by directory)")
    p.add_argument("--broker", action="append", default=[], metavar="NAME=PATH", help="a named broker store")
    p.add_argument("--out", default="capacity-report", help="output directory (default %(default)s)")
    p.add_argument("--master", default="local[*]", help="Spark master (default %(default)s)")
    p.add_argument("--broker-conf", action="append", default=[], metavar="[NAME=]PATH",
                   help="broker.conf with the store settings (for every broker, or NAME=PATH)")
    p.add_argument("--disk-size", action="append", default=[], metavar="[NAME=]SIZE",
                   help="size of the store's disk, e.g. 500G (for the days-until-full figures)")
    p.add_argument("--retention-hours", type=float, default=None,
                   help="retention to size the disk for (default: fileReservedTime)")
    p.add_argument("--target-queue-rate", type=float, default=1000.0,
                   help="messages/s one queue should carry at peak (default %(default)s)")
    p.add_argument("--reader", choices=("auto", "arrow", "binaryfile"), default="auto",
                   help="how executors get the file bytes: arrow = each executor reads its files through "
                        "pyarrow.fs (local, hdfs, s3, gs, abfs); binaryfile = Spark's binaryFile source "
                        "(any Hadoop URI, slower); auto = arrow when every path allows it")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark setting")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    return p


def local_path(uri: str) -> str | None:
    """The local path of ``uri`` (no scheme, or file:), None for other file systems."""
    if uri.startswith("file:"):
        return "/" + uri[len("file:"):].lstrip("/")
    return None if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", uri) else uri


def brokers_from_args(args) -> list:
    from spark.job import BrokerInput

    out = []
    for item in args.broker:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise ValueError(f"--broker wants NAME=PATH, got {item!r}")
        out.append(BrokerInput(name, path))
    for path in args.stores:
        out.append(BrokerInput(posixpath.basename(path.rstrip("/")) or path, path,
                               named_by="directory"))
    names = [b.name for b in out]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ValueError(f"broker names must be unique: {', '.join(sorted(dup))} (use --broker NAME=PATH)")
    return out


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    say = (lambda msg: None) if args.quiet else (lambda msg: print(f"[rmq-capacity] {msg}", file=sys.stderr, flush=True))
    try:
        brokers = brokers_from_args(args)
        if not brokers:
            raise ValueError("no store directory given")
        names = [b.name for b in brokers]
        confs = _named(args.broker_conf, names, "--broker-conf")
        by_dir = any(b.named_by == "directory" for b in brokers)
        sizes = {k: parse_size(v) for k, v in _named(args.disk_size, names, "--disk-size", by_dir).items()}
        extra = dict(kv.split("=", 1) for kv in args.conf)
    except ValueError as e:
        print(f"rmq-capacity: {e}", file=sys.stderr)
        return EXIT_USAGE
    missing = [p for p in [b.root for b in brokers] + [c for c in confs.values() if c]
               if local_path(p) is not None and not os.path.exists(local_path(p))]
    if missing:  # before Spark starts: a typo should not cost a JVM start-up
        print(f"rmq-capacity: not found: {', '.join(missing)}", file=sys.stderr)
        return EXIT_USAGE
    from spark import report
    from spark.job import HadoopFs, make_session

    t0 = time.monotonic()
    say(f"starting Spark ({args.master})")
    spark = make_session(args.master, extra=extra)
    try:
        fs = HadoopFs(spark)
        for b in brokers:
            if not fs.is_dir(b.root):
                print(f"rmq-capacity: store directory not found: {b.root}", file=sys.stderr)
                return EXIT_USAGE
        conf_uris = {b.name: confs.get(b.name, confs.get(None)) for b in brokers}
        opts = report.Options(args.retention_hours, args.target_queue_rate)
        tables = run_report(spark, brokers, conf_uris, opts, args.out, say, args.reader, sizes)
    finally:
        spark.stop()
    unused = set(sizes) - {None} - set(names) - {b.name for b in brokers}
    if unused:
        print(f"rmq-capacity: --disk-size: unknown broker {', '.join(sorted(unused))} "
              f"(brokers: {', '.join(b.name for b in brokers)})", file=sys.stderr)
        return EXIT_USAGE
    n_issues = len(tables["issues"])
    say(f"report written to {args.out}/report.html in {time.monotonic() - t0:.1f}s"
        + (f"; {n_issues} problem(s) found in the store files" if n_issues else ""))
    return EXIT_ISSUES if n_issues else EXIT_OK


def run_report(spark, brokers, conf_uris, opts, out_dir: str, say, reader: str = "auto",
               disk_sizes: dict[str | None, int] | None = None) -> dict:
    """Scan, compute and write; the tables are returned for callers (tests, bench).
    ``disk_sizes``: by broker (directory or brokerName) or None for every broker."""
    from spark import report, report_html
    from spark.job import run_scan

    scan = run_scan(spark, brokers, say, conf_uris, reader, disk_sizes or {})
    tables = report.build(scan, opts)
    report_html.write(scan, tables, report.summary(scan, tables, opts), out_dir)
    return tables


if __name__ == "__main__":
    sys.exit(main())
