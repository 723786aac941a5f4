"""The searches of the evaluation protocol as jobs: one search (an outer fold's, or a bag's) run,
resumed or taken as finished, and jobs run inline, in joblib processes or on a Dask cluster.

:mod:`autoprox.apps.protocols.outer_folds` and :mod:`autoprox.apps.protocols.bagging` share these.
"""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path
from typing import Callable, Mapping

from autoprox.core.errors import RunDirError
from autoprox.core.parallel import Executor, LocalExecutor
from autoprox.data.benchmark import load_benchmark
from autoprox.search.context import RunContext
from autoprox.search.engine import run_search
from autoprox.search.rundir import RunDirectory
from autoprox.search.settings import SearchSettings

#: Settings keys that may differ between a record and a resume without changing any figure:
#: the statistics workers, and the benchmark's spelling (its sha256 is checked instead).
FREE_KEYS = ("workers", "bench")


def log(message: str, quiet: bool) -> None:
    """A progress line of ``autoprox evaluate`` on stderr (nothing when ``quiet``)."""
    if not quiet:
        print(f"autoprox evaluate: {message}", file=sys.stderr, flush=True)


def differing_settings(recorded: Mapping, wanted: Mapping) -> list[str]:
    """Settings keys (but :data:`FREE_KEYS`) whose values differ."""
    return sorted(k for k in set(recorded) | set(wanted) if k not in FREE_KEYS and recorded.get(k) != wanted.get(k))


def check_search_run(run_dir: Path, expected: Mapping, sha256: str) -> None:
    """A fold (or bag) directory left by an earlier start must hold the search this protocol would make."""
    config = RunDirectory(run_dir).config()
    differing = differing_settings(config.get("settings", {}), expected)
    if config.get("benchmark", {}).get("sha256") != sha256:
        differing.append("benchmark")
    if differing:
        raise RunDirError(f"{run_dir} holds a search with other settings ({', '.join(differing)}); use a new --out")


def finished_search(run_dir: Path, expected: Mapping, sha256: str) -> dict:
    """``best.json`` of the finished fold search in ``run_dir`` (of a reused protocol); RunDirError
    when it is missing, unfinished, or another search."""
    run = RunDirectory(run_dir)
    if not run.exists():
        raise RunDirError(f"{run_dir}: no fold search to reuse")
    check_search_run(run_dir, expected, sha256)
    best = run.best()
    if best is None or not best.get("finished"):
        raise RunDirError(f"{run_dir}: its search is not finished; finish it (autoprox evaluate --resume) "
                          "before reusing it")
    return best


def search_job(settings_json: Mapping, bench_path: str, run_dir: str, stop_after: int | None = None,
               quiet: bool = True, reuse: bool = False) -> dict:
    """Run, resume, or take as finished the search of ``settings_json`` in ``run_dir`` (a fold's or a
    bag's); ``reuse``: only take a finished one (of a reused protocol; nothing is run or written).

    A run directory left by an earlier start must hold this search (RunDirError). Plain arguments,
    so that it runs in a joblib process or a Dask task as well as inline. Returns
    ``{"finished": bool, "seconds": ...}``.
    """
    start = time.perf_counter()
    settings = SearchSettings.from_json(settings_json)
    bench = load_benchmark(bench_path)
    run_dir = Path(run_dir)
    run = RunDirectory(run_dir)
    # an interrupted fold is continued by the protocol's resume (OUT/repeat-R/fold-K), not its own
    hint = f"autoprox evaluate --resume --out {shlex.quote(str(run_dir.parent.parent))}"
    if reuse or run.exists():
        expected = RunContext.from_settings(settings, bench=bench).settings.to_json()
    if reuse:
        best = finished_search(run_dir, expected, bench.sha256)
    elif run.exists():
        check_search_run(run_dir, expected, bench.sha256)
        best = run.best()
        if best is None or not best.get("finished"):
            best = run_search(None, run_dir, resume=True, stop_after=stop_after, quiet=quiet, resume_command=hint)
    else:
        best = run_search(settings, run_dir, stop_after=stop_after, quiet=quiet, resume_command=hint)
    return {"finished": bool(best.get("finished")), "seconds": time.perf_counter() - start}


def run_jobs(jobs, fold_workers: int, quiet: bool, executor: Executor | None = None, what: str = "folds"):
    """Yield ``(key, function(*arguments))`` for each job ``(key, function, arguments, description)`` as it
    finishes: inline in order (logging its description), in ``fold_workers`` local processes
    (:class:`~autoprox.core.parallel.LocalExecutor`, whose workers loky does not stop for the torch a fold
    imports after its first task), or as
    the tasks of ``executor`` (a Dask cluster: the benchmark and OUT must then be paths its workers
    share). ``function`` must be importable by name (a module-level function)."""
    if executor is not None and len(jobs) > 1:
        log(f"running {len(jobs)} {what} on {executor.description} (their searches are quiet)", quiet)
        yield from executor.run_unordered(_keyed, [job[:3] for job in jobs])
        return
    if fold_workers == 1 or len(jobs) <= 1:
        for key, function, arguments, description in jobs:
            log(description, quiet)
            yield key, function(*arguments)
        return
    log(f"running {len(jobs)} {what}, {fold_workers} at a time (their searches are quiet)", quiet)
    yield from LocalExecutor(fold_workers).run_unordered(_keyed, [job[:3] for job in jobs])


def _keyed(key, function: Callable, arguments: tuple) -> tuple:
    return key, function(*arguments)


__all__ = ["FREE_KEYS", "check_search_run", "differing_settings", "finished_search", "log", "run_jobs",
           "search_job"]
