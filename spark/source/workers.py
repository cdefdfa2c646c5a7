"""Which Python Spark's workers run for the ``rmq`` data source.

Spark plans a Python data source in a worker process beside the driver and
reads it in executor workers; both run ``SparkContext.pythonExec``, which
PySpark takes from ``PYSPARK_PYTHON`` when the context starts and otherwise
sets to ``python3`` from PATH.  A session made the plain way from a virtual
environment that is not activated therefore hands the source to a Python
that has no rmq, and the user sees ``ModuleNotFoundError`` deep inside a Java
stack.  :func:`ensure_worker_python` checks that Python before any job runs:

* it imports rmq and the source (with the ``PYTHONPATH`` Spark gives its
  workers): nothing to do;
* it does not, nobody chose it (no ``PYSPARK_PYTHON``) and the master is
  local, so every worker runs on this machine: the session's workers take
  the driver's own interpreter, which has rmq;
* otherwise :class:`WorkerPythonError`, one line naming the workers' Python,
  what it lacks and how to point the workers at this environment.

Only the worker on the driver's machine can be checked from here: on a
cluster every node needs that same Python path with rmq installed.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys

log = logging.getLogger(__name__)

# What a worker imports to run the source: rmq and every module of the source.
_PROBE = "import rmq, spark.source.datasource"
_PROBE_TIMEOUT_S = 120.0
_DEFAULT_EXEC = "python3"  # PySpark's choice when PYSPARK_PYTHON is unset

_checked: dict[tuple[str, str], str | None] = {}


class WorkerPythonError(RuntimeError):
    """Spark's Python workers cannot run the ``rmq`` data source."""


def ensure_worker_python(spark) -> None:
    """Make sure the workers of ``spark`` can import rmq, switching a local
    session that nobody pointed anywhere to the driver's interpreter; raise
    :class:`WorkerPythonError` (one line) when they cannot."""
    sc = getattr(spark, "_sc", None)
    if sc is None:  # a Spark Connect session: its server picks the workers' Python
        return
    python_path = _worker_python_path(sc)
    lacks = _lacks(sc.pythonExec, python_path)
    if lacks is None:
        return
    chosen = "PYSPARK_PYTHON" in os.environ or sc.pythonExec != _DEFAULT_EXEC
    local = str(sc.master).startswith("local")
    if not chosen and local and _lacks(sys.executable, python_path) is None:
        log.info("rmq data source: Spark's workers run %s (this driver's Python) instead of %s, "
                 "which %s", sys.executable, sc.pythonExec, lacks)
        sc.pythonExec = sys.executable
        return
    raise WorkerPythonError(_explain(sc.pythonExec, lacks, chosen, local))


def _explain(python: str, lacks: str, chosen: bool, local: bool) -> str:
    """The one line a user reads when the workers cannot run the source."""
    where = "" if local else " on every node"
    how = ("PYSPARK_PYTHON names it" if chosen else
           "PYSPARK_PYTHON is not set, so PySpark runs python3 from PATH")
    return (f"rmq data source: Spark's Python workers run {python!r} ({how}), which {lacks}; "
            f"set PYSPARK_PYTHON={sys.executable} (a Python with rmq installed{where}) "
            f"before the SparkSession starts, or make it with spark.job.make_session")


def _worker_python_path(sc) -> str:
    """The ``PYTHONPATH`` Spark's workers get: PySpark's own archives, then
    the driver environment's."""
    parts = [str(sc._jvm.PythonUtils.sparkPythonPath())]
    if os.environ.get("PYTHONPATH"):
        parts.append(os.environ["PYTHONPATH"])
    return os.pathsep.join(p for p in parts if p)


def _lacks(python: str, python_path: str) -> str | None:
    """None when ``python`` imports the source with that path, else what
    went wrong in a few words (remembered per Python and path)."""
    key = (python, python_path)
    if key not in _checked:
        _checked[key] = _probe(python, python_path)
    return _checked[key]


def _probe(python: str, python_path: str) -> str | None:
    env = dict(os.environ, PYTHONPATH=python_path)
    try:
        done = subprocess.run([python, "-c", _PROBE], env=env, capture_output=True, text=True,
                              timeout=_PROBE_TIMEOUT_S, check=False)
    except FileNotFoundError:
        return "is not found"
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"cannot be started ({e})"
    if done.returncode == 0:
        return None
    lines = [ln.strip() for ln in done.stderr.splitlines() if ln.strip()]
    return f"cannot import rmq ({lines[-1] if lines else f'exit status {done.returncode}'})"
