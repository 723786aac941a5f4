"""Bagging for the evaluation protocol: searches on subsamples of an outer fold's search part,
their best proxies rank-averaged into one exportable ensemble.

With ``autoprox evaluate --bags B`` each outer fold runs, besides its own search, ``B``
further searches ("bags"). Bag ``b`` has the fold search's settings but two: its search part
(``split_indices``) is :func:`bag_subsample` of the fold's search part, and its evolution
seed is the fold search's ``seed + 1 + b``, so that bags differ in their data and in their
search. Its run directory is ``OUT/repeat-R/fold-K-bag-b`` (:func:`bag_name`), a sibling of
the fold's. The fold's proxy is then :func:`bagged_ensemble`: the equal-weight quantile
average of the best genome of the fold search and of each bag, every member's reference its
raw scores on the fold's *whole* search part, written to ``OUT/repeat-R/fold-K-bagged.json``.

The subsamples are drawn *without* replacement ("subagging", Bühlmann & Yu 2002, *Analyzing
bagging*, Ann. Statist. 30(4)) rather than as bootstrap resamples with replacement: a search
part cannot hold an architecture twice (``split_indices`` refuses duplicates), and if it did,
each duplicated pair would enter Kendall's tau as a tied pair and distort the fitness.
Bühlmann & Yu show that subsamples of half the data (the default fraction) do about as
well as bootstrap resamples.

A bag's own "test" part is every benchmark architecture outside its subsample, which
includes the fold's outer test part: nothing here reads a bag's test figures; only its
``best.json`` genome is used, scored on the fold's search part.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Mapping, Sequence

from autoprox.apps.protocols.jobs import log, run_jobs, search_job
from autoprox.apps.selection import genome_average, usable_scores
from autoprox.core.errors import ConfigError, ProxyError, RunDirError
from autoprox.core.parallel import Executor
from autoprox.core.progress import format_seconds
from autoprox.genome.tree import InvalidProxy, parse_genome
from autoprox.proxies.ensemble import EnsembleProxy
from autoprox.proxies.proxy import Proxy
from autoprox.search.context import RunContext
from autoprox.search.rundir import RunDirectory, read_json
from autoprox.search.settings import SearchSettings

#: The fraction of a fold's search part each bag searches on, unless told otherwise.
DEFAULT_BAG_FRACTION = 0.5
#: The name of a fold's bagged ensemble (its ``proxy`` in ``protocol.json``).
BAGGED = "bagged"
#: Fewest architectures a bag may search on (Kendall's tau needs two).
MIN_BAG_SIZE = 2


def check_bagging(bags: int, fraction: float | None) -> None:
    """Refuse a negative bag count, or a fraction outside (0, 1] (ConfigError)."""
    if isinstance(bags, bool) or not isinstance(bags, int) or bags < 0:
        raise ConfigError(f"--bags must be a whole number >= 0, got {bags!r}")
    if fraction is not None and not (isinstance(fraction, (int, float)) and 0 < fraction <= 1):
        raise ConfigError(f"--bag-fraction must be in (0, 1], got {fraction!r}")


def bag_size(search_size: int, fraction: float) -> int:
    """Architectures in a bag of a search part of ``search_size``: ``fraction`` of it, rounded half up;
    ConfigError when that is under :data:`MIN_BAG_SIZE`."""
    size = min(search_size, math.floor(fraction * search_size + 0.5))
    if size < MIN_BAG_SIZE:
        raise ConfigError(f"--bag-fraction {fraction} of a search part of {search_size} architectures leaves "
                          f"{size}; a bag needs at least {MIN_BAG_SIZE}")
    return size


def bag_subsample(search: Sequence[int], fraction: float, protocol_seed: int, repeat: int, fold: int,
                  bag: int) -> tuple[int, ...]:
    """The benchmark indices bag ``bag`` of outer fold ``(repeat, fold)`` searches on, sorted.

    :func:`bag_size` of them drawn without replacement from ``search`` (the fold's search part)
    by ``random.Random(f"autoprox-bag/{protocol_seed}/{repeat}/{fold}/{bag}").sample(sorted(search), size)``.
    A string seed is hashed by SHA-512 (``random.seed``, version 2), so the draw is the same on
    every machine and Python run, differs for every protocol seed, repeat, fold and bag, and is
    independent of the outer shuffle (``random.Random(protocol_seed + repeat)``).
    """
    pool = sorted(int(i) for i in search)
    size = bag_size(len(pool), fraction)
    draw = random.Random(f"autoprox-bag/{protocol_seed}/{repeat}/{fold}/{bag}").sample(pool, size)
    return tuple(sorted(draw))


def bag_name(fold_name: str, bag: int) -> str:
    """The run directory of bag ``bag`` relative to the protocol's: ``repeat-R/fold-K-bag-b``."""
    return f"{fold_name}-bag-{bag}"


def bagged_file(fold_name: str) -> str:
    """The fold's bagged ensemble file relative to the protocol's: ``repeat-R/fold-K-bagged.json``."""
    return f"{fold_name}-bagged.json"


def bag_settings(fold_settings: SearchSettings, subsample: Sequence[int], bag: int) -> SearchSettings:
    """Bag ``bag``'s search: ``fold_settings`` with ``subsample`` as its search part and evolution seed
    ``fold_settings.evolution.seed + 1 + bag``."""
    evolution = replace(fold_settings.evolution, seed=fold_settings.evolution.seed + 1 + bag)
    return replace(fold_settings, split_indices=tuple(subsample), evolution=evolution)


def bagged_ensemble(fold_run: Path, member_runs: Sequence[Path], bench: str | Path | None = None,
                    labels: Sequence[str] | None = None) -> EnsembleProxy:
    """The fold's bagged proxy: equal-weight quantile average of the ``best.json`` genomes of
    ``fold_run`` and each of ``member_runs`` (the bags).

    Every member's reference is its raw scores on ``fold_run``'s whole search part (the outer
    fold's search part); nothing of its test part, nor any bag's test figures, is read. A
    genome that is not finite or is constant on that part is left out (named in the
    provenance's ``left_out``); ProxyError when none is left. Joint when every target shares
    one statistics class count, else the same members for each target at its class count.
    ``labels``: how the provenance names the runs (default their paths).
    """
    runs = [Path(fold_run), *map(Path, member_runs)]
    labels = [str(r) for r in runs] if labels is None else list(labels)
    context = RunContext.open(fold_run, bench=bench)
    chosen, left_out = [], []
    for label, run in zip(labels, runs):
        genome = RunDirectory(run).best(missing_ok=False)["genome"]
        try:
            scores = context.score(Proxy(genome, parse_genome(genome)), "search", workers=1)
        except InvalidProxy as exc:
            left_out.append({"run": label, "genome": genome, "why": str(exc)})
            continue
        if not usable_scores(scores):
            left_out.append({"run": label, "genome": genome, "why": "not finite or constant on the search part"})
            continue
        chosen.append((label, genome, scores))
    if not chosen:
        raise ProxyError(f"{fold_run}: no bagged member is finite and not constant on the fold's search part")
    provenance = {"run": labels[0], "selection": BAGGED, "reference": "the fold's search part",
                  "members": [{"run": label, "genome": genome} for label, genome, _ in chosen],
                  **({"left_out": left_out} if left_out else {})}
    return genome_average(BAGGED, context, [(genome, scores) for _, genome, scores in chosen], provenance)


def fold_bags(fold_name: str, search: Sequence[int], repeat: int, fold: int, spec: Mapping) -> list[dict]:
    """The bags of an outer fold as ``protocol.json`` records them (``[{"bag", "run", "search"}]``),
    from the protocol spec's ``bags``, ``bag_fraction`` and ``seed``; empty without bags."""
    return [{"bag": b, "run": bag_name(fold_name, b),
             "search": list(bag_subsample(search, spec["bag_fraction"], spec["seed"], repeat, fold, b))}
            for b in range(spec.get("bags", 0))]


def save_bagged(fold_run: Path, out: Path, fold_name: str, bag_runs: Sequence[str],
                bench: str | Path | None = None) -> EnsembleProxy:
    """The fold's :func:`bagged_ensemble` (the bags in ``out / bag_runs``), written atomically to
    ``out /`` :func:`bagged_file` ``(fold_name)``; one left there by an earlier start must be this
    one, or RunDirError. The provenance names runs as the protocol does (``repeat-R/fold-K...``)."""
    ensemble = bagged_ensemble(fold_run, [out / run for run in bag_runs], bench, [fold_name, *bag_runs])
    path = out / bagged_file(fold_name)
    if path.exists() and read_json(path) != json.loads(json.dumps(ensemble.to_json())):
        raise RunDirError(f"{path} holds another ensemble than this fold's bags give; use a new --out")
    ensemble.save(path)
    return ensemble


def bagged_folds(pending: Sequence[int], folds: Sequence[Mapping], by_fold: Mapping[int, SearchSettings], out: Path,
                 searches: str | None, bench_path: str, stop_after: int | None, quiet: bool, fold_workers: int,
                 executor: Executor | None = None):
    """Run the searches of the ``pending`` folds of a protocol with bags (``folds``: its records with their
    ``bags``; ``by_fold``: each fold search's settings) and yield ``(fold index, outcome)``.

    Every search, a fold's or a bag's, is one job of :func:`~autoprox.apps.protocols.jobs.run_jobs`
    (``fold_workers`` side by side, or on ``executor``); an unfinished one resumes, a finished one is
    taken as it is, and the fold searches of ``searches`` (a reused protocol) are only read. As soon
    as a fold's search and all its bags have finished, the outcome is ``{"finished": True, "result":
    None, "run_dir": its search, "choose": run_dir -> its bagged ensemble (saved), "seconds": its
    searches'}`` for the caller to score; a search that stops unfinished gives ``{"finished": False,
    "stopped": its run name}``. Progress lines say which search finished and what its fold waits for.
    """
    jobs, waiting, seconds = [], {}, {}
    for i in pending:
        entry, settings = folds[i], by_fold[i]
        fold_run = Path(searches or out) / entry["run"]
        jobs.append(((i, None), search_job, (settings.to_json(), bench_path, str(fold_run), stop_after,
                                             quiet or fold_workers > 1, searches is not None),
                     f"{entry['run']}: {'reading the finished search on' if searches else 'search on'} "
                     f"{len(entry['search'])} architectures"))
        for bag in entry["bags"]:
            jobs.append(((i, bag["bag"]), search_job,
                         (bag_settings(settings, bag["search"], bag["bag"]).to_json(), bench_path,
                          str(out / bag["run"]), stop_after, quiet or fold_workers > 1, False),
                         f"{bag['run']}: search on {len(bag['search'])} of the fold's {len(entry['search'])} "
                         "architectures"))
        waiting[i], seconds[i] = {None, *(bag["bag"] for bag in entry["bags"])}, 0.0
    for (i, bag), outcome in run_jobs(jobs, fold_workers, quiet, executor, "searches (folds and bags)"):
        entry = folds[i]
        name = entry["run"] if bag is None else entry["bags"][bag]["run"]
        if not outcome["finished"]:
            yield i, {"finished": False, "result": None, "stopped": name, "seconds": outcome["seconds"]}
            continue
        waiting[i].discard(bag)
        seconds[i] += outcome["seconds"]
        log(f"{name} finished in {format_seconds(outcome['seconds'])}; {entry['run']} "
            + (f"waits for {len(waiting[i])} more search(es)" if waiting[i] else "is scored"), quiet)
        if not waiting[i]:
            choose = partial(save_bagged, out=out, fold_name=entry["run"],
                             bag_runs=[b["run"] for b in entry["bags"]], bench=bench_path)
            yield i, {"finished": True, "result": None, "run_dir": Path(searches or out) / entry["run"],
                      "choose": choose, "seconds": seconds[i]}


__all__ = ["BAGGED", "DEFAULT_BAG_FRACTION", "MIN_BAG_SIZE", "bag_name", "bag_settings", "bag_size",
           "bag_subsample", "bagged_ensemble", "bagged_file", "bagged_folds", "check_bagging", "fold_bags",
           "save_bagged"]
