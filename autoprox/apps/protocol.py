"""The evaluation protocol: how well does a search configuration's proxy rank architectures
it was not searched on, beside descriptor baselines chosen the same way?

For a search configuration (:class:`~autoprox.search.settings.SearchSettings`),
:func:`run_protocol` cuts *all* the benchmark's architectures into ``folds`` disjoint
outer folds, ``repeats`` times with other shuffles (repeat ``r`` shuffles with seed
``protocol_seed + r``). For each outer fold it runs a whole search
(:func:`autoprox.search.engine.run_search`) whose search part is exactly the other folds
(``SearchSettings.split_indices``) and whose test part is the fold, into
``OUT/repeat-R/fold-K/``; then it scores on the test part the proxy the search chose
(a selection of :data:`SELECTIONS`, by default the run's ``best.json`` genome) and each
descriptor baseline of :mod:`autoprox.proxies.baselines`, chosen on the same search
part. Nothing is chosen on a test part. :mod:`autoprox.apps.protocol_summary` turns the
per-fold figures into means, sds and paired differences with intervals. With bags
(:mod:`autoprox.apps.bagging`) each fold also runs searches on subsamples of its search part,
and its proxy is the rank average of all their best proxies.

``OUT/protocol.json`` records the settings, the folds with their indices and, as each
fold finishes, its figures and the summary; it is written atomically after every fold.
Run again with ``resume=True`` after an interruption: finished folds are kept, an
unfinished fold resumes through ``run_search``'s resume. With ``fold_workers > 1`` folds
run side by side in joblib processes (each fold's search then computes statistics with
one worker); every fold is deterministic, so the figures do not depend on it.
"""

from __future__ import annotations

import datetime as _dt
import functools
import os
import random
import shlex
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np

from autoprox import __version__
from autoprox.apps.bagging import (
    DEFAULT_BAG_FRACTION,
    bagged_folds,
    check_bagging,
    fold_bags,
)
from autoprox.apps.protocol_jobs import (
    differing_settings,
    log,
    run_jobs,
    search_job,
)
from autoprox.apps.protocol_summary import (
    BOOTSTRAP_SAMPLES,
    REFERENCE,
    fold_jcm,
    summarise,
)
from autoprox.apps.selection import SELECTIONS, register_selection, select_best
from autoprox.core.atomic import json_safe, make_directory
from autoprox.core.correlation import correlate
from autoprox.core.errors import ConfigError, RunDirError
from autoprox.core.numbers import format_float
from autoprox.core.parallel import Executor
from autoprox.core.progress import Progress, format_seconds
from autoprox.data.benchmark import Benchmark, load_benchmark, locate_benchmark
from autoprox.data.cache import build_cache
from autoprox.genome.tree import InvalidProxy
from autoprox.proxies.baselines import BASELINES, baseline_scores, choose_baselines
from autoprox.proxies.ensemble import EnsembleProxy
from autoprox.proxies.proxy import Proxy
from autoprox.search.context import RunContext
from autoprox.search.rundir import ARCHIVE, LOCK, PROTOCOL, RunDirectory, hold_lock
from autoprox.search.settings import SearchSettings
from autoprox.spaces.descriptors import descriptor_columns

#: Outer folds per repeat unless told otherwise.
DEFAULT_FOLDS = 5

#: Protocol options a record leaves out at their default (``bags`` only when there are some).
_UNRECORDED = {"bags": 0}


# ------------------------------------------------------------------ the outer folds

@dataclass(frozen=True)
class OuterFold:
    """One outer fold: its repeat, its number, and its search and test parts (benchmark indices)."""

    repeat: int
    fold: int
    search: tuple[int, ...]
    test: tuple[int, ...]

    @property
    def name(self) -> str:
        """Its run directory, relative to the protocol's: ``repeat-R/fold-K``."""
        return f"repeat-{self.repeat}/fold-{self.fold}"

    def to_json(self) -> dict:
        return {"repeat": self.repeat, "fold": self.fold, "run": self.name,
                "search": list(self.search), "test": list(self.test)}


#: Fewest test architectures of an outer fold: fewer cannot be ranked (every figure NaN).
MIN_FOLD_TEST = 3


def check_fold_count(folds: int, size: int) -> None:
    """Refuse a fold count the benchmark cannot give (each test part needs 3 architectures to rank)."""
    if folds < 2:
        raise ConfigError(f"--folds must be at least 2, got {folds}")
    if folds > size:
        raise ConfigError(f"--folds {folds} is more than the benchmark's {size} architectures")
    if size // folds < MIN_FOLD_TEST:
        raise ConfigError(f"--folds {folds} leaves {size // folds} test architecture(s) in a fold of the benchmark's "
                          f"{size}, and a fold needs at least {MIN_FOLD_TEST} to rank them: give at most "
                          f"--folds {max(size // MIN_FOLD_TEST, 2)}")


def outer_folds(size: int, folds: int, repeats: int = 1, seed: int = 0) -> list[OuterFold]:
    """``repeats`` x ``folds`` outer folds of ``range(size)``.

    Repeat ``r`` shuffles the indices with ``random.Random(seed + r)`` and deals them out
    round-robin, so the test parts of one repeat are disjoint, cover every architecture
    and differ in size by at most one.
    """
    check_fold_count(folds, size)
    if repeats < 1:
        raise ConfigError(f"--repeats must be at least 1, got {repeats}")
    made = []
    for repeat in range(repeats):
        order = list(range(size))
        random.Random(seed + repeat).shuffle(order)
        for fold in range(folds):
            test = sorted(order[fold::folds])
            chosen = set(test)
            made.append(OuterFold(repeat, fold, tuple(i for i in range(size) if i not in chosen), tuple(test)))
    return made


def fold_settings(settings: SearchSettings, fold: OuterFold, workers: int | None = None) -> SearchSettings:
    """The search of one outer fold: ``settings`` with the fold's search part as ``split_indices``."""
    return replace(settings, split_indices=fold.search,
                   workers=settings.workers if workers is None else workers)


# ------------------------------------------------------------------ choosing the proxy

# ------------------------------------------------------------------ one fold

def test_scores(proxy: Proxy | EnsembleProxy, context: RunContext, part: str = "test") -> dict[str, np.ndarray]:
    """Scores per target of ``proxy`` on ``part`` of the fold's run: a proxy's at each target's class
    count, an ensemble's through :meth:`EnsembleProxy.target_scores`. Raises InvalidProxy."""
    targets = list(context.targets)
    if isinstance(proxy, EnsembleProxy):
        return proxy.target_scores(context.archs(part), context.cache, context.plan, targets)
    scores = context.score(proxy, part, workers=1)
    return {t: scores[context.plan.target_classes[t]] for t in targets}


def fold_figures(proxy: Proxy | EnsembleProxy, context: RunContext, choices: Mapping[str, Mapping[str, dict]],
                 columns: Mapping[str, np.ndarray]) -> dict:
    """Test-part scores, Kendall per target and JCM of the proxy (or ensemble) and of each baseline's choice.

    ``context`` is the fold's run context (its test part is the outer test part).
    """
    targets, test = list(context.targets), context.indices("test")
    accuracies = context.accuracies("test")
    scores: dict[str, dict[str, list]] = {}
    result: dict = {}
    try:
        scores[REFERENCE] = test_scores(proxy, context)
    except InvalidProxy as exc:
        result["invalid"] = str(exc)
        scores[REFERENCE] = {t: np.full(len(test), np.nan) for t in targets}
    for name, per_target in choices.items():
        scores[name] = {t: baseline_scores(name, per_target[t], columns, test) for t in targets}
    kendall = {m: {t: correlate(s[t], accuracies[t])["kendall"] for t in targets} for m, s in scores.items()}
    weights = context.settings.weights
    result |= {
        "kendall": kendall,
        "jcm": {m: fold_jcm(k, weights) for m, k in kendall.items()},
        "choices": {name: dict(per_target) for name, per_target in choices.items()},
        "scores": {m: {t: np.asarray(v, dtype=np.float64).tolist() for t, v in s.items()} for m, s in scores.items()},
    }
    return result


def fold_result(run_dir: Path, fold: OuterFold, bench_path: str, baselines: Sequence[str],
                choose: Callable[[Path], Proxy | EnsembleProxy]) -> dict:
    """The figures of the finished fold search in ``run_dir``: the proxy ``choose(run_dir)`` returns
    and each baseline chosen on the fold's search part, scored on its test part (JSON-safe)."""
    bench = load_benchmark(bench_path)
    best = RunDirectory(run_dir).best(missing_ok=False)
    context = RunContext.open(run_dir, bench=bench_path)
    if list(context.split.test) != list(fold.test):
        raise RunDirError(f"{run_dir}: its test part is not the outer fold's")
    columns = descriptor_columns(bench.archs)
    choices = choose_baselines(columns, bench.accuracies, fold.search, context.targets, baselines)
    proxy = choose(run_dir)
    result = {"proxy": proxy.name, "genome": best["genome"], "search_jcm": best["search"].get("jcm"),
              **({"ensemble": proxy.to_json()} if isinstance(proxy, EnsembleProxy) else {}),
              **fold_figures(proxy, context, choices, columns)}
    return json_safe(result)


def _outer_fold(fold_json: Mapping) -> OuterFold:
    return OuterFold(fold_json["repeat"], fold_json["fold"], tuple(fold_json["search"]), tuple(fold_json["test"]))


def evaluate_fold(settings_json: Mapping, bench_path: str, fold_json: Mapping, out: str, selection: str,
                  baselines: Sequence[str], stop_after: int | None = None, quiet: bool = True,
                  searches: str | None = None) -> dict:
    """Run (or resume, or take as finished) one outer fold's search, then score it on its test part.

    ``searches``: a protocol directory whose finished fold search is read instead (nothing is
    run or written there). Plain arguments, so that it runs in a joblib process as well as
    inline. Returns ``{"finished": bool, "result": figures or None, "seconds": ...}``.
    """
    start = time.perf_counter()
    fold = _outer_fold(fold_json)
    run_dir = Path(searches if searches is not None else out) / fold.name
    if not search_job(settings_json, bench_path, str(run_dir), stop_after, quiet, searches is not None)["finished"]:
        return {"finished": False, "result": None, "seconds": time.perf_counter() - start}
    result = fold_result(run_dir, fold, bench_path, baselines, SELECTIONS[selection])
    return {"finished": True, "result": result, "seconds": time.perf_counter() - start}


# ------------------------------------------------------------------ the whole protocol

def _open_protocol(out: Path, settings: SearchSettings | None, spec: dict, resume: bool):
    """The benchmark, normalised settings and the protocol record to continue (or None for a new one)."""
    path = out / PROTOCOL
    if resume:
        previous = _unarchived(RunDirectory(out).protocol(), out)
        recorded = SearchSettings.from_json(previous["settings"])
        bench = load_benchmark(locate_benchmark(recorded.bench, previous.get("benchmark_sha256"), near=out))
        if settings is not None:
            given = RunContext.from_settings(settings, bench=bench).settings.to_json()
            differing = differing_settings(previous["settings"], given)
            if load_benchmark(settings.bench).sha256 != bench.sha256:
                differing.append("bench")
            if differing:
                raise RunDirError(f"{path}: recorded with other search settings ({', '.join(differing)}); "
                                  "resume without search options, or use a new --out")
        differing = [k for k, v in spec.items() if k != "repeats"  # more repeats grow it: _grown_repeats
                     and v is not None and previous["protocol"].get(k, _UNRECORDED.get(k)) != v]
        if differing:
            raise RunDirError(f"{path}: recorded with other protocol options ({', '.join(differing)}); "
                              "resume without them, or use a new --out")
        return bench, recorded, previous
    if settings is None:
        raise ConfigError("settings are needed for a new evaluation protocol")
    if path.exists():
        raise RunDirError(f"{out} already holds an evaluation protocol; continue it with --resume "
                          "or choose a new --out")
    if out.exists() and (not out.is_dir() or any(p.name != LOCK for p in out.iterdir())):
        raise RunDirError(f"{out} is not empty and holds no {PROTOCOL}; its files are left as they are: "
                          "choose a new --out")
    return load_benchmark(settings.bench), settings, None


def _holding_the_protocol_lock(run: Callable) -> Callable:
    """``run(settings, out, ...)`` with ``out`` created and locked (its own lock, as each fold's run has):
    a second process writing the same protocol is refused, naming the holder's pid."""

    @functools.wraps(run)
    def locked(settings, out, *args, **kwargs):
        new = not (Path(out).exists() or Path(out).is_symlink())
        out = make_directory(out)
        try:
            with hold_lock(out / LOCK, f"{out} is being written by another autoprox process"):
                return run(settings, out, *args, **kwargs)
        except BaseException:
            if new:  # refused before anything was written: leave no folder behind (rmdir takes only an empty one)
                try:
                    out.rmdir()
                except OSError:
                    pass
            raise

    return locked


@_holding_the_protocol_lock
def run_protocol(settings: SearchSettings | None, out: str | Path, folds: int | None = None,
                 repeats: int | None = None, protocol_seed: int | None = None, fold_workers: int = 1,
                 resume: bool = False, selection: str | None = None, baselines: Sequence[str] | None = None,
                 bootstrap: int | None = None, stop_after: int | None = None, quiet: bool = False,
                 executor: Executor | None = None, reuse_searches: str | Path | None = None,
                 bags: int | None = None, bag_fraction: float | None = None) -> dict:
    """Run (or resume) the evaluation protocol of ``settings`` into ``out``; return ``protocol.json``'s content.

    Parameters
    ----------
    settings : SearchSettings or None
        The search configuration (``split_seed``/``search_fraction`` are replaced by each
        outer fold's split; ``split_seed`` still seeds ``cv_folds``). On resume, None takes
        the recorded ones; given ones must equal them.
    out : path
        The protocol directory: ``protocol.json`` and ``repeat-R/fold-K/`` run directories.
    folds, repeats, protocol_seed : int, optional
        Outer folds per repeat (at least 2, at most the benchmark's size; default 5), repeats
        (default 1), and the seed of the first repeat's shuffle (default 0).
    executor : Executor, optional
        Where folds run (``--scheduler``: a Dask cluster's workers, each fold one task);
        ``fold_workers`` is then the cluster's size. The figures do not depend on it.
    fold_workers : int
        Folds run side by side (joblib processes); each fold's search then computes
        statistics with one worker. The figures do not depend on it.
    selection : str, optional
        How the proxy of a fold's search is chosen (a key of :data:`SELECTIONS`; default ``best``).
    baselines : sequence of str, optional
        Baselines of :data:`autoprox.proxies.baselines.BASELINES` (default all).
    bootstrap : int, optional
        Paired bootstrap resamples of the summary (0: none; default
        :data:`~autoprox.apps.protocol_summary.BOOTSTRAP_SAMPLES`).
    stop_after : int, optional
        Each fold's search stops after that iteration as if interrupted (tests).
    reuse_searches : path, optional
        A protocol directory whose finished fold searches are scored again instead of run:
        same settings (None takes its recorded ones), folds, repeats, seed and benchmark, or
        RunDirError. Nothing is written there; ``protocol.json`` records it (``"searches"``,
        relative to ``out``) and only the selection and the scoring are redone.
    bags, bag_fraction : optional
        Bagging (:mod:`autoprox.apps.bagging`): besides each fold's search, ``bags`` searches on
        subsamples of ``bag_fraction`` (default 0.5) of its search part into
        ``repeat-R/fold-K-bag-b``; the fold's proxy is then their and the fold search's best
        genomes rank-averaged (``repeat-R/fold-K-bagged.json``), and ``selection`` must be
        ``best``. With ``reuse_searches`` only the bags run. 0 (the default) is no bagging,
        and then neither is recorded in ``protocol.json``.

    Notes
    -----
    On resume, protocol options left None take the recorded values; given ones must equal them.
    """
    out = Path(out)
    if fold_workers < 1:
        raise ConfigError(f"--fold-workers must be at least 1, got {fold_workers}")
    given = {"folds": folds, "repeats": repeats, "seed": protocol_seed, "selection": selection,
             "baselines": None if baselines is None else list(baselines), "bootstrap": bootstrap,
             "bags": bags, "bag_fraction": bag_fraction}
    if settings is not None:
        settings = replace(settings, split_indices=None)  # each outer fold sets its own
    reused = None
    if reuse_searches is not None and not resume:
        settings, reused = _reused_searches(Path(reuse_searches), out, settings, given)
        given["searches"] = os.path.relpath(Path(reuse_searches), out)
    bench, settings, previous = _open_protocol(out, settings, given, resume)
    if previous:
        spec = {**previous["protocol"], "repeats": _grown_repeats(previous, given["repeats"], out)}
    else:
        defaults = {"folds": DEFAULT_FOLDS, "repeats": 1, "seed": 0, "selection": "best",
                    "baselines": list(BASELINES), "bootstrap": BOOTSTRAP_SAMPLES, "bags": 0,
                    "bag_fraction": DEFAULT_BAG_FRACTION}
        spec = {k: defaults.get(k) if v is None else v for k, v in given.items()}
        if not spec["bags"]:
            if bag_fraction is not None:
                raise ConfigError("--bag-fraction needs --bags B with B > 0")
            del spec["bags"], spec["bag_fraction"]
    check_bagging(spec.get("bags", 0), spec.get("bag_fraction"))
    if spec.get("bags") and spec["selection"] != "best":
        raise ConfigError(f"--selection {spec['selection']} cannot be combined with --bags: each fold's proxy is "
                          "then the bagged ensemble of the searches' best proxies (leave --selection out)")
    SELECTIONS.lookup(spec["selection"])
    for name in spec["baselines"]:
        BASELINES.lookup(name)
    if spec["bootstrap"] < 0:
        raise ConfigError(f"bootstrap resamples must be >= 0, got {spec['bootstrap']}")
    context = RunContext.from_settings(settings, bench=bench)
    settings, targets = context.settings, list(context.targets)
    made = outer_folds(len(bench), spec["folds"], spec["repeats"], spec["seed"])
    folds = list(previous["folds"]) if previous else []
    if [f.to_json() for f in made[:len(folds)]] != [{k: f[k] for k in ("repeat", "fold", "run", "search", "test")}
                                                    for f in folds]:
        raise RunDirError(f"{out / PROTOCOL}: its folds are not the ones its seed gives")
    if previous and len(made) > len(folds):
        log(f"extending {out} from {previous['protocol']['repeats']} to {spec['repeats']} repeats: "
            f"{len(made) - len(folds)} new folds", quiet)
    folds += [f.to_json() | _bags_json(f, spec) | {"result": None} for f in made[len(folds):]]
    if reused is not None and [f.to_json() for f in made] != [
            {k: f.get(k) for k in ("repeat", "fold", "run", "search", "test")} for f in reused["folds"]]:
        raise RunDirError(f"{reuse_searches}: its folds are not the ones this protocol makes")
    searches = str(out / spec["searches"]) if spec.get("searches") else None
    now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    protocol = {
        "autoprox_version": __version__,
        "created": previous["created"] if previous else now,
        # the command that started it; a resume is recorded beside, not over it (the report shows both)
        "command": previous["command"] if previous else [Path(sys.argv[0]).name, *sys.argv[1:]],
        **({"resumed_with": [Path(sys.argv[0]).name, *sys.argv[1:]]} if previous else {}),
        "space": bench.space,
        "benchmark_sha256": bench.sha256,
        "architectures": len(bench),
        "settings": settings.to_json(),
        "protocol": spec,
        "targets": targets,
        "folds": folds,
        "summary": None,
        "finished": False,
    }
    if previous and any(f.get("bags", []) != _bags_json(m, spec).get("bags", [])
                        for f, m in zip(previous["folds"], made)):
        raise RunDirError(f"{out / PROTOCOL}: its bags are not the ones its seed gives")
    make_directory(out)
    _write(out, protocol, bench)

    pending = [i for i, f in enumerate(protocol["folds"]) if not f.get("result")]
    log(f"{bench.space}, {len(bench)} architectures, {spec['folds']} folds x {spec['repeats']} repeat(s): "
        f"{len(protocol['folds']) - len(pending)} folds finished, {len(pending)} to run, "
        f"{fold_workers} at a time, into {out}", quiet)
    if pending:
        # All statistics once, with the search's workers, before folds share the cache.
        try:
            build_cache(context.cache, context.plan.requests(list(bench.archs)),
                        workers=executor if executor is not None else settings.workers,
                        progress=None if quiet else Progress("statistics", every=15))
        except KeyboardInterrupt:
            print(f"interrupted; what was computed is kept: continue with: autoprox evaluate --resume --out "
                  f"{shlex.quote(str(out))}", file=sys.stderr, flush=True)
            raise
    if executor is not None:  # folds are the cluster's tasks; each fold's search computes with one worker
        fold_workers = executor.workers
    workers = 1 if fold_workers > 1 else settings.workers
    by_fold = {i: fold_settings(replace(settings, bench=bench.source), made[i], workers) for i in pending}
    if spec.get("bags"):
        outcomes = bagged_folds(pending, protocol["folds"], by_fold, out, searches, bench.source, stop_after,
                                quiet, fold_workers, executor)
    else:
        total = len(protocol["folds"])
        jobs = [(i, evaluate_fold, (by_fold[i].to_json(), bench.source, made[i].to_json(), str(out),
                                    spec["selection"], spec["baselines"], stop_after, quiet or fold_workers > 1,
                                    searches),
                 f"fold {i + 1}/{total} ({made[i].name}): search on {len(made[i].search)}, "
                 f"test on {len(made[i].test)} architectures") for i in pending]
        outcomes = run_jobs(jobs, fold_workers, quiet, executor, "folds")
    start, done_now = time.perf_counter(), 0
    for index, outcome in outcomes:
        entry = protocol["folds"][index]
        if not outcome["finished"]:
            log(f"{outcome.get('stopped', entry['run'])} stopped before its search finished; continue with: "
                f"autoprox evaluate --resume --out {shlex.quote(str(out))}", quiet)
            if fold_workers == 1:
                break
            continue
        if outcome["result"] is None:  # a fold whose search and bags finished: scored with its bagged ensemble
            scoring = time.perf_counter()
            outcome["result"] = fold_result(outcome["run_dir"], _outer_fold(entry), bench.source,
                                            spec["baselines"], outcome["choose"])
            outcome["seconds"] += time.perf_counter() - scoring
        entry["result"], entry["seconds"] = outcome["result"], round(outcome["seconds"], 1)
        _write(out, protocol, bench)
        done_now += 1
        left = sum(1 for f in protocol["folds"] if not f.get("result"))
        eta = (time.perf_counter() - start) / done_now * left  # wall time per fold, parallelism included
        jcm = outcome["result"]["jcm"]
        log(f"{entry['run']} done in {format_seconds(outcome['seconds'])}: test JCM "
            + ", ".join(f"{m} {format_float(jcm[m])}" for m in jcm)
            + (f"; {left} fold(s) left, about {format_seconds(eta)}" if left else ""), quiet)
    protocol["finished"] = all(f.get("result") for f in protocol["folds"])
    if protocol["finished"]:
        protocol["written"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    _write(out, protocol, bench)
    return RunDirectory(out).protocol()


def _grown_repeats(previous: Mapping, repeats: int | None, out: Path) -> int:
    """The repeats of a resumed protocol: the recorded ones, or ``repeats`` when that is more (the
    protocol grows by the new repeats' folds). Fewer would drop finished folds and are refused; a
    protocol that re-scores another's searches can grow only as far as that one has, since its
    missing folds would have no search to read."""
    recorded = previous["protocol"]["repeats"]
    if repeats is None or repeats == recorded:
        return recorded
    path = out / PROTOCOL
    if repeats < recorded:
        raise RunDirError(f"{path}: it holds {recorded} repeats; --repeats {repeats} would drop finished folds "
                          "(give more repeats to extend it, or leave --repeats out)")
    searches = previous["protocol"].get("searches")
    if searches:
        source = RunDirectory(out / searches).protocol()["protocol"]["repeats"]
        if repeats > source:
            raise RunDirError(f"{path}: it re-scores the searches of {out / searches}, which has "
                              f"{source} repeats; extend that protocol to {repeats} repeats first")
    return repeats


def _reused_searches(source: Path, out: Path, settings: SearchSettings | None, given: dict) \
        -> tuple[SearchSettings, dict]:
    """The settings of the protocol in ``source`` whose searches a new protocol in ``out`` reuses,
    and its record; RunDirError when the given settings or protocol options differ from its."""
    if source.resolve() == out.resolve():
        raise RunDirError(f"--reuse-searches {source}: the new protocol needs its own --out")
    if not RunDirectory(source).has_protocol():
        raise RunDirError(f"--reuse-searches {source}: no {PROTOCOL} there")
    recorded = _unarchived(RunDirectory(source).protocol(), source)
    try:
        settings_json, sha256 = recorded["settings"], recorded["benchmark_sha256"]
        reused_settings = SearchSettings.from_json(settings_json)
    except (KeyError, TypeError, ValueError) as exc:
        raise RunDirError(f"{source / PROTOCOL}: not an evaluation protocol ({exc})") from None
    bench = load_benchmark(locate_benchmark(reused_settings.bench, sha256, near=source))
    if settings is None:
        settings = replace(reused_settings, bench=bench.source)
    else:
        wanted = RunContext.from_settings(settings, bench=bench).settings.to_json()
        differing = differing_settings(settings_json, wanted)
        if load_benchmark(settings.bench).sha256 != sha256:
            differing.append("bench")
        if differing:
            raise RunDirError(f"--reuse-searches {source}: its searches have other settings "
                              f"({', '.join(differing)})")
    for key in ("folds", "repeats", "seed"):
        if given[key] is not None and given[key] != recorded["protocol"].get(key):
            raise RunDirError(f"--reuse-searches {source}: its protocol has {key} "
                              f"{recorded['protocol'].get(key)}, not {given[key]}")
        given[key] = recorded["protocol"].get(key)
    return settings, recorded


def _unarchived(protocol: dict, folder: Path) -> dict:
    """``protocol`` as read; RunDirError when it is the trimmed record of a committed protocol whose
    fold runs are packed in an archive beside it (runs/README.md), with the line that unpacks them."""
    if isinstance(protocol, dict) and "archive" in protocol:
        archive = folder / str(protocol["archive"].get("file", ARCHIVE))
        raise RunDirError(f"{folder}: its fold runs and whole {PROTOCOL} are packed in {archive}; "
                          f"unpack them first: python scripts/runs_archive.py unpack {folder}")
    return protocol


def _bags_json(fold: OuterFold, spec: Mapping) -> dict:
    """``{"bags": [...]}`` (:func:`~autoprox.apps.bagging.fold_bags`) of a fold of a protocol with bags,
    else ``{}`` (a protocol without bags records its folds as before)."""
    return {"bags": fold_bags(fold.name, fold.search, fold.repeat, fold.fold, spec)} if spec.get("bags") else {}


def _write(out: Path, protocol: dict, bench: Benchmark) -> None:
    """Recompute the summary of the finished folds (from their JSON form) and write ``protocol.json``."""
    finished = [f for f in protocol["folds"] if f.get("result")]
    spec = protocol["protocol"]
    methods, weights = [REFERENCE, *spec["baselines"]], protocol["settings"]["weights"]
    protocol["summary"] = json_safe(summarise(
        finished, bench.accuracies, protocol["targets"], weights, methods,
        samples=spec["bootstrap"], seed=spec["seed"], size=len(bench)))
    if spec.get("repeats", 1) > 1:
        # each repeat alone (no bootstrap): how far the outer shuffle moves the figures, and the
        # first repeat's figures stay comparable with a one-repeat protocol on the same folds
        protocol["repeat_summaries"] = [json_safe(summarise(
            [f for f in finished if f["repeat"] == r], bench.accuracies, protocol["targets"], weights, methods,
            samples=0, seed=spec["seed"], size=len(bench))) for r in range(spec["repeats"])]
    RunDirectory(out).write_protocol(protocol)


__all__ = ["DEFAULT_FOLDS", "SELECTIONS", "OuterFold", "check_fold_count", "evaluate_fold",
           "fold_figures", "fold_settings", "outer_folds", "register_selection", "run_protocol", "select_best"]
