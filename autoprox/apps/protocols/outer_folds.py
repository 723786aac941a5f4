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
part. Nothing is chosen on a test part. :mod:`autoprox.apps.protocols.summary` turns the
per-fold figures into means, sds and paired differences with intervals. With bags
(:mod:`autoprox.apps.protocols.bagging`) each fold also runs searches on subsamples of its search part,
and its proxy is the rank average of all their best proxies.

``OUT/protocol.json`` records the settings, the folds with their indices and, as each
fold finishes, its figures and the summary; it is written atomically after every fold.
Run again with ``resume=True`` after an interruption: finished folds are kept, an
unfinished fold resumes through ``run_search``'s resume. With ``fold_workers > 1`` folds
run side by side in joblib processes (each fold's search then computes statistics with
one worker); every fold is deterministic, so the figures do not depend on it. The folds are the
cuts of the one protocol runner (:mod:`autoprox.apps.protocols.runner`), which owns the record, its
check on resume and the loop; :mod:`autoprox.apps.protocols.folds` makes and scores them.
"""

from __future__ import annotations

import functools
import os
import shlex
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable, Mapping, Sequence


from autoprox import __version__
from autoprox.apps.protocols.bagging import (
    DEFAULT_BAG_FRACTION,
    bagged_folds,
    check_bagging,
    fold_bags,
)
from autoprox.apps.protocols.jobs import (
    differing_settings,
    log,
    run_jobs,
)
from autoprox.apps.protocols.folds import (
    OuterFold,
    check_fold_count,
    check_fold_labels,
    evaluate_fold,
    fold_figures,
    fold_result,
    fold_settings,
    outer_fold,
    outer_folds,
)
from autoprox.apps.protocols.runner import (
    CutProtocol,
    check_recorded,
    now,
    previous_record,
    recorded_command,
    run_cuts,
    unarchived,
)
from autoprox.apps.protocols.summary import (
    BOOTSTRAP_SAMPLES,
    REFERENCE,
    summarise,
)
from autoprox.apps.selection import SELECTIONS, register_selection, select_best
from autoprox.core.atomic import json_safe, make_directory
from autoprox.core.errors import ConfigError, RunDirError
from autoprox.core.numbers import format_float
from autoprox.core.parallel import Executor
from autoprox.core.progress import Progress, format_seconds
from autoprox.data.benchmark import Benchmark, load_benchmark, locate_benchmark
from autoprox.data.cache import build_cache
from autoprox.proxies.baselines import BASELINES
from autoprox.search.context import RunContext
from autoprox.search.rundir import LOCK, PROTOCOL, RunDirectory, hold_lock
from autoprox.search.settings import SearchSettings

#: Outer folds per repeat unless told otherwise.
DEFAULT_FOLDS = 5

#: Protocol options a record leaves out at their default (``bags`` only when there are some).
_UNRECORDED = {"bags": 0}


# ------------------------------------------------------------------ the whole protocol

def _open_protocol(out: Path, settings: SearchSettings | None, spec: dict, resume: bool):
    """The benchmark, normalised settings and the protocol record to continue (or None for a new one)."""
    path = out / PROTOCOL
    if not resume and settings is None:
        raise ConfigError("settings are needed for a new evaluation protocol")
    previous = previous_record(out, resume, "an evaluation protocol")
    if previous is None:
        return load_benchmark(settings.bench), settings, None
    recorded = SearchSettings.from_json(previous["settings"])
    bench = load_benchmark(locate_benchmark(recorded.bench, previous.get("benchmark_sha256"), near=out))
    if settings is not None:
        given = RunContext.from_settings(settings, bench=bench).settings.to_json()
        differing = differing_settings(previous["settings"], given)
        if load_benchmark(settings.bench).sha256 != bench.sha256:
            differing.append("bench")
        check_recorded(path, {"search settings": differing}, "resume without search options, or use a new --out")
    check_recorded(path, {"protocol options": [
        k for k, v in spec.items() if k != "repeats"  # more repeats grow it: _grown_repeats
        and v is not None and previous["protocol"].get(k, _UNRECORDED.get(k)) != v]})
    return bench, recorded, previous


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
        :data:`~autoprox.apps.protocols.summary.BOOTSTRAP_SAMPLES`).
    stop_after : int, optional
        Each fold's search stops after that iteration as if interrupted (tests).
    reuse_searches : path, optional
        A protocol directory whose finished fold searches are scored again instead of run:
        same settings (None takes its recorded ones), folds, repeats, seed and benchmark, or
        RunDirError. Nothing is written there; ``protocol.json`` records it (``"searches"``,
        relative to ``out``) and only the selection and the scoring are redone.
    bags, bag_fraction : optional
        Bagging (:mod:`autoprox.apps.protocols.bagging`): besides each fold's search, ``bags`` searches on
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
    spec = _protocol_spec(previous, given, out)
    context = RunContext.from_settings(settings, bench=bench, measured_on=None)
    made = outer_folds(len(bench), spec["folds"], spec["repeats"], spec["seed"])
    check_fold_labels(bench, context.targets, made)
    protocol = _protocol_record(out, bench, context, spec, made, previous, quiet)
    if reused is not None and [f.to_json() for f in made] != [
            {k: f.get(k) for k in ("repeat", "fold", "run", "search", "test")} for f in reused["folds"]]:
        raise RunDirError(f"{reuse_searches}: its folds are not the ones this protocol makes")
    make_directory(out)
    cuts = _OuterFolds(out, bench, context, made, fold_workers, stop_after, quiet, executor)
    run_cuts(out, cuts, protocol, lambda message: log(message, quiet))
    return RunDirectory(out).protocol()


def _protocol_spec(previous: Mapping | None, given: Mapping, out: Path) -> dict:
    """The protocol options: the recorded ones (repeats perhaps grown), or the given ones over the defaults."""
    if previous:
        spec = {**previous["protocol"], "repeats": _grown_repeats(previous, given["repeats"], out)}
    else:
        defaults = {"folds": DEFAULT_FOLDS, "repeats": 1, "seed": 0, "selection": "best",
                    "baselines": list(BASELINES), "bootstrap": BOOTSTRAP_SAMPLES, "bags": 0,
                    "bag_fraction": DEFAULT_BAG_FRACTION}
        spec = {k: defaults.get(k) if v is None else v for k, v in given.items()}
        if not spec["bags"]:
            if given["bag_fraction"] is not None:
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
    return spec


def _protocol_record(out: Path, bench: Benchmark, context: RunContext, spec: dict, made: Sequence[OuterFold],
                     previous: Mapping | None, quiet: bool) -> dict:
    """The record to write: ``previous``'s folds (checked against those its seed gives) and any new ones."""
    folds = list(previous["folds"]) if previous else []
    if [f.to_json() for f in made[:len(folds)]] != [{k: f[k] for k in ("repeat", "fold", "run", "search", "test")}
                                                    for f in folds]:
        raise RunDirError(f"{out / PROTOCOL}: its folds are not the ones its seed gives")
    if previous and len(made) > len(folds):
        log(f"extending {out} from {previous['protocol']['repeats']} to {spec['repeats']} repeats: "
            f"{len(made) - len(folds)} new folds", quiet)
    folds += [f.to_json() | _bags_json(f, spec) | {"result": None} for f in made[len(folds):]]
    if previous and any(f.get("bags", []) != _bags_json(m, spec).get("bags", [])
                        for f, m in zip(previous["folds"], made)):
        raise RunDirError(f"{out / PROTOCOL}: its bags are not the ones its seed gives")
    return {
        "autoprox_version": __version__,
        "created": previous["created"] if previous else now(),
        # the command that started it; a resume is recorded beside, not over it (the report shows both)
        **recorded_command(previous, sys.argv),
        "space": bench.space,
        "benchmark_sha256": bench.sha256,
        "architectures": len(bench),
        "settings": context.settings.to_json(),
        "protocol": spec,
        "targets": list(context.targets),
        "folds": folds,
        "summary": None,
        "finished": False,
    }


class _OuterFolds(CutProtocol):
    """The in-space protocol as cuts: a cut is an outer fold (``repeat-R/fold-K``), its search run on the
    other folds (with its bags, if any), its proxy and baselines scored on the fold."""

    def __init__(self, out: Path, bench: Benchmark, context: RunContext, made: Sequence[OuterFold],
                 fold_workers: int, stop_after: int | None, quiet: bool, executor: Executor | None) -> None:
        self.out, self.bench, self.context, self.made = out, bench, context, list(made)
        self.stop_after, self.quiet, self.executor = stop_after, quiet, executor
        # on a cluster, folds are its tasks; each fold's search then computes with one worker
        self.asked_workers = fold_workers
        self.fold_workers = executor.workers if executor is not None else fold_workers
        self.stop_at_unfinished = self.fold_workers == 1
        self.started, self.done_now = time.perf_counter(), 0
        self.resume_command = f"autoprox evaluate --resume --out {shlex.quote(str(out))}"

    def cuts(self, record: Mapping) -> list[str]:
        return [fold["run"] for fold in record["folds"]]

    def done(self, record: Mapping, cut: str) -> bool:
        return bool(record["folds"][self.cuts(record).index(cut)].get("result"))

    def run(self, record: dict, pending: list[str]):
        spec, settings, bench, made = record["protocol"], self.context.settings, self.bench, self.made
        indices = [self.cuts(record).index(cut) for cut in pending]
        finished = len(made) - len(pending)
        log(f"{bench.space}, {len(bench)} architectures, {spec['folds']} folds x {spec['repeats']} repeat(s): "
            f"{finished} fold{'' if finished == 1 else 's'} finished, {len(pending)} to run, "
            f"{self.asked_workers} at a time, "
            f"into {self.out}", self.quiet)
        if pending:
            # All statistics once, with the search's workers, before folds share the cache.
            build_cache(self.context.cache, self.context.plan.requests(list(bench.archs)),  # a signal: run_cuts'
                        workers=self.executor if self.executor is not None else settings.workers,  # hint
                        progress=None if self.quiet else Progress("statistics", every=15))
        workers = 1 if self.fold_workers > 1 else settings.workers
        by_fold = {i: fold_settings(replace(settings, bench=bench.source), made[i], workers) for i in indices}
        searches = str(self.out / spec["searches"]) if spec.get("searches") else None
        if spec.get("bags"):
            outcomes = bagged_folds(indices, record["folds"], by_fold, self.out, searches, bench.source,
                                    self.stop_after, self.quiet, self.fold_workers, self.executor)
        else:
            jobs = [(i, evaluate_fold, (by_fold[i].to_json(), bench.source, made[i].to_json(), str(self.out),
                                        spec["selection"], spec["baselines"], self.stop_after,
                                        self.quiet or self.fold_workers > 1, searches),
                     f"fold {i + 1}/{len(made)} ({made[i].name}): search on {len(made[i].search)}, "
                     f"test on {len(made[i].test)} architectures") for i in indices]
            outcomes = run_jobs(jobs, self.fold_workers, self.quiet, self.executor, "folds")
        for index, outcome in outcomes:
            yield made[index].name, outcome

    def keep(self, record: dict, cut: str, outcome: dict) -> bool:
        entry = record["folds"][self.cuts(record).index(cut)]
        if not outcome["finished"]:
            log(f"{outcome.get('stopped', entry['run'])} stopped before its search finished; continue with: "
                f"autoprox evaluate --resume --out {shlex.quote(str(self.out))}", self.quiet)
            return False
        if outcome["result"] is None:  # a fold whose search and bags finished: scored with its bagged ensemble
            scoring = time.perf_counter()
            outcome["result"] = fold_result(outcome["run_dir"], outer_fold(entry), self.bench.source,
                                            record["protocol"]["baselines"], outcome["choose"])
            outcome["seconds"] += time.perf_counter() - scoring
        entry["result"], entry["seconds"] = outcome["result"], round(outcome["seconds"], 1)
        self.done_now += 1
        left = sum(1 for f in record["folds"] if not f.get("result"))
        eta = (time.perf_counter() - self.started) / self.done_now * left  # wall time per fold, parallelism included
        jcm = outcome["result"]["jcm"]
        log(f"{entry['run']} done in {format_seconds(outcome['seconds'])}: test JCM "
            + ", ".join(f"{m} {format_float(jcm[m])}" for m in jcm)
            + (f"; {left} fold(s) left, about {format_seconds(eta)}" if left else ""), self.quiet)
        return True

    def summarise(self, record: dict) -> None:
        """The summary of the finished folds (from their JSON form); with repeats, each repeat's alone too."""
        _summarise(record, self.bench)


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
    recorded = unarchived(RunDirectory(source).protocol(), source)
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


def _bags_json(fold: OuterFold, spec: Mapping) -> dict:
    """``{"bags": [...]}`` (:func:`~autoprox.apps.protocols.bagging.fold_bags`) of a fold of a protocol with bags,
    else ``{}`` (a protocol without bags records its folds as before)."""
    return {"bags": fold_bags(fold.name, fold.search, fold.repeat, fold.fold, spec)} if spec.get("bags") else {}


def _summarise(protocol: dict, bench: Benchmark) -> None:
    """Recompute the summary of the finished folds (from their JSON form), in place."""
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


__all__ = ["DEFAULT_FOLDS", "SELECTIONS", "OuterFold", "check_fold_count", "evaluate_fold",
           "fold_figures", "fold_settings", "outer_folds", "register_selection", "run_protocol", "select_best"]
