"""Leave-one-space-out evaluation: how well does a search configuration's proxy rank the
architectures of a space whose labels it never used?

For a multi-space configuration (:class:`~autoprox.search.settings.SearchSettings` with
several benchmarks), :func:`run_cross_space` leaves each labelled space out in turn: with
each of ``seeds`` evolution seeds it searches on every architecture of the other spaces
(one space: a plain search; several: a multi-space search, :mod:`autoprox.search.multispace`)
into ``OUT/leave-out-SPACE/seed-S``, takes the run's best proxy (selected on the other
spaces' figures alone), and scores it on *all* the left-out space's architectures.

Beside it, on the same architectures, baselines that use no label of the left-out space:
the parameter count and MACs, every zoo proxy asked for (:data:`autoprox.proxies.zoo.ZOO`),
the published Auto-Prox genomes, and the coarse descriptor and the rank-linear blend chosen
on the other spaces' labels (:mod:`autoprox.proxies.baselines`; every descriptor exists in
both spaces, though depth and width count different things, see
:data:`autoprox.spaces.descriptors.TERMINAL_MEANINGS`). One reference does use the left-out
labels: the blend fitted on that space's own architectures (``blend-own``, in-sample: an
optimistic ceiling for what labels buy).

Spread comes from the search seeds and from a bootstrap over the left-out space's
architectures: each resample scores every method on the same architectures, so the
difference of the seed-averaged proxy against each baseline is paired. ``OUT/protocol.json``
holds the specification, every search's figures and the summary; it is written after
each search, and a resumed protocol keeps finished searches: each (left-out space, seed) search is a
cut of the one protocol runner (:mod:`autoprox.apps.protocols.runner`).
"""

from __future__ import annotations

import math
import shlex
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from autoprox import __version__
from autoprox.apps.protocols.jobs import differing_settings, log, run_jobs
from autoprox.apps.protocols.runner import (
    CutProtocol,
    check_recorded,
    now,
    previous_record,
    recorded_command,
    run_cuts,
)
from autoprox.apps.protocols.summary import BOOTSTRAP_SAMPLES, kendall_batch
from autoprox.core.atomic import json_safe
from autoprox.core.correlation import correlate
from autoprox.core.correlation import jcm as joint_metric
from autoprox.core.errors import ConfigError, RunDirError
from autoprox.data.cache import build_cache
from autoprox.genome.tree import InvalidProxy, parse_genome
from autoprox.proxies.zoo import ZOO
from autoprox.proxies.baselines import baseline_scores, choose_baselines
from autoprox.proxies.proxy import Proxy, resolve_proxy
from autoprox.search.context import RunContext
from autoprox.search.engine import run_search
from autoprox.search.objectives import combined_ranking
from autoprox.search.multispace import MultiRunContext, new_context
from autoprox.search.rundir import PROTOCOL, RunDirectory
from autoprox.search.settings import SearchSettings
from autoprox.spaces.descriptors import descriptor_columns

#: Search seeds per left-out space unless told otherwise.
DEFAULT_SEEDS = 5
#: The searched proxy's name in figures (each seed's under ``seed-S``).
SEARCHED = "searched"
#: Baselines built from a name, scored on the left-out space without any of its labels.
NAMED_BASELINES = ("params", "flops", "autoprox_a", "autoprox_p")
#: Descriptor baselines chosen on the other spaces' labels, then scored on the left-out space.
TRANSFERRED_BASELINES = ("coarse", "blend")
#: The in-space reference: the blend fitted on the left-out space's own labels (all its architectures).
OWN_BLEND = "blend-own"


def direction_name(space: str) -> str:
    """The run directory of one left-out space: ``leave-out-SPACE``."""
    return f"leave-out-{space}"


def training_settings(settings: SearchSettings, context: MultiRunContext, left_out: str, seed: int) -> SearchSettings:
    """The search of one (left-out space, seed): every architecture of the other spaces, evolution seed ``seed``."""
    others = [p for p in context.parts if p.bench.space != left_out]
    benches = tuple(p.settings.bench for p in others)
    weights = {s: w for s, w in settings.bench_weights.items() if s != left_out}
    evolution = replace(settings.evolution, seed=seed)
    return replace(settings, bench=benches[0] if len(benches) == 1 else benches,
                   bench_weights=weights if len(benches) > 1 else {}, search_fraction=1.0,
                   split_indices=None, evolution=evolution)


def _search(settings: SearchSettings, run_dir: Path, stop_after: int | None, quiet: bool,
            hint: str | None = None) -> dict:
    """Run, resume, or take as finished the search of ``settings`` in ``run_dir``; its ``best.json``. ``hint``: how
    to go on after an interruption (the protocol's resume command), said once."""
    run = RunDirectory(run_dir)
    if run.exists():
        recorded = run.config().get("settings", {})
        wanted = new_context(settings).settings.to_json()
        def without_iterations(data: Mapping) -> dict:
            return {k: ({**v, "iterations": None} if k == "evolution" else v) for k, v in data.items()
                    if k not in ("workers", "bench")}

        differing = sorted(k for k in set(recorded) | set(wanted)
                           if without_iterations(recorded).get(k) != without_iterations(wanted).get(k))
        if differing:
            raise RunDirError(f"{run_dir} holds a search with other settings ({', '.join(differing)}); "
                              "use a new --out")
        total = settings.evolution.iterations
        best = run.best()
        if best is not None and best.get("finished") and recorded["evolution"]["iterations"] >= total:
            return best  # finished (a search already past a smaller new total is kept as it ran)
        return run_search(None, run_dir, resume=True, stop_after=stop_after, quiet=quiet, resume_command=hint,
                          session={"iterations": total} if recorded["evolution"]["iterations"] != total else None)
    return run_search(settings, run_dir, stop_after=stop_after, quiet=quiet, resume_command=hint)


def search_job(settings_json: Mapping, run_dir: str, stop_after: int | None, quiet: bool,
               hint: str | None = None) -> dict:
    """One search of the protocol, run, resumed or taken as finished (plain arguments: it runs in a joblib
    process as well as inline): whether it finished, its best genome and search JCM, the iterations it ran,
    its seconds."""
    started = time.perf_counter()
    best = _search(SearchSettings.from_json(settings_json), Path(run_dir), stop_after, quiet, hint)
    return {"finished": bool(best.get("finished")), "genome": best["genome"],
            "search_jcm": best["search"].get("jcm"), "iteration": best.get("iteration"),
            "seconds": round(time.perf_counter() - started, 1)}


def left_out_context(settings: SearchSettings, part: RunContext) -> RunContext:
    """The left-out space as a context whose every architecture is scored (no test part)."""
    return RunContext.from_settings(replace(settings, bench=part.settings.bench, bench_weights={},
                                            targets=part.targets, search_fraction=1.0, split_indices=None),
                                    bench=part.bench, measured_on="all")


def proxy_scores(proxy: Proxy, context: RunContext, workers: int = 1) -> dict[str, list[float]] | str:
    """Scores per target of ``proxy`` on every architecture of ``context``, or the reason it is invalid there."""
    try:
        scores = context.score(proxy, "all", workers=workers)
    except InvalidProxy as exc:
        return str(exc)
    return {t: np.asarray(scores[context.plan.target_classes[t]], dtype=np.float64).tolist() for t in context.targets}


def other_spaces_labels(context: MultiRunContext, left_out: str, targets: Sequence[str]
                        ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The descriptor columns and accuracies of every space but ``left_out``, all their architectures
    joined: what a baseline (or a fitness base) is chosen on without the left-out space's labels."""
    others = [p for p in context.parts if p.bench.space != left_out]
    train_columns = [descriptor_columns(p.bench.archs) for p in others]
    columns = {k: np.concatenate([c[k] for c in train_columns]) for k in train_columns[0]}
    accuracies = {t: np.concatenate([np.asarray(p.bench.accuracies[t], dtype=np.float64) for p in others])
                  for t in targets}
    return columns, accuracies


def baseline_table(settings: SearchSettings, context: MultiRunContext, left_out: str, zoo: Sequence[str],
                   workers: int = 1) -> tuple[dict, dict, dict]:
    """``(scores, choices, invalid)`` of every baseline on the left-out space: scores per method and target,
    the descriptor choices made on the other spaces (and the own-label blend's), the reasons of those
    that cannot score there."""
    part = next(p for p in context.parts if p.bench.space == left_out)
    target = left_out_context(settings, part)
    scores, invalid = {}, {}
    for name in (*NAMED_BASELINES[:2], *zoo, *NAMED_BASELINES[2:]):
        result = proxy_scores(resolve_proxy(name), target, workers)
        if isinstance(result, str):
            invalid[name] = result
        else:
            scores[name] = result
    # The descriptor baselines: chosen on the other spaces' labels (all their architectures together).
    columns, accuracies = other_spaces_labels(context, left_out, target.targets)
    choices = choose_baselines(columns, accuracies, range(len(columns["params"])), target.targets,
                               TRANSFERRED_BASELINES)
    own_columns = descriptor_columns(part.bench.archs)
    own = choose_baselines(own_columns, part.bench.accuracies, range(len(part.bench)), target.targets, ["blend"])
    choices[OWN_BLEND] = own["blend"]
    for name, per_target in choices.items():
        kind = "blend" if name == OWN_BLEND else name
        scores[name] = {t: baseline_scores(kind, per_target[t], own_columns).tolist() for t in target.targets}
    return scores, choices, invalid


def anchored_scores(settings: SearchSettings, context: MultiRunContext, left_out: str,
                    genome_scores: Mapping[str, Sequence[float]]) -> tuple[dict[str, list[float]], dict]:
    """The searched proxy as its fitness ranked it: with ``--fitness combined:BASE:W``, per target
    ``W * rank(genome) + (1 - W) * rank(BASE)`` on the left-out space, ranks scaled to [0, 1] within its
    architectures (:func:`autoprox.search.objectives.combined_ranking`, as the fitness ranks), BASE chosen
    on the other spaces' labels and scored on the left-out space's descriptors (none of its labels). Any other fitness:
    the genome's scores as they are. Returns the scores and what was combined (empty when nothing)."""
    mode = settings.fitness_mode
    if mode.kind != "combined":
        return {t: list(v) for t, v in genome_scores.items()}, {}
    part = next(p for p in context.parts if p.bench.space == left_out)
    targets = list(genome_scores)
    columns, accuracies = other_spaces_labels(context, left_out, targets)
    choices = choose_baselines(columns, accuracies, range(len(columns["params"])), targets, [mode.base])[mode.base]
    own_columns = descriptor_columns(part.bench.archs)
    combined = {}
    for t in targets:
        base = baseline_scores(mode.base, choices[t], own_columns)
        genome = np.asarray(genome_scores[t], dtype=np.float64)
        combined[t] = combined_ranking(genome, base, mode.weight).tolist()
    return combined, {"base": mode.base, "weight": mode.weight, "choices": choices}


def method_figures(scores: Mapping[str, Sequence[float]], accuracies: Mapping[str, np.ndarray],
                   weights: Mapping[str, float]) -> dict:
    """Kendall per target and the JCM of one method's scores on the left-out space."""
    kendall = {t: correlate(scores[t], accuracies[t])["kendall"] for t in scores}
    return {"kendall": kendall, "jcm": _jcm(kendall, weights)}


def _jcm(kendalls: Mapping[str, float], weights: Mapping[str, float]) -> float:
    values = list(kendalls.values())
    return math.nan if any(v is None or math.isnan(v) for v in values) else joint_metric(kendalls, weights)


def bootstrap_jcms(scores: Mapping[str, Mapping[str, Sequence[float]]], accuracies: Mapping[str, np.ndarray],
                   weights: Mapping[str, float], samples: int, seed: int) -> dict[str, np.ndarray]:
    """Each method's JCM on ``samples`` bootstrap resamples of the architectures, the same resamples for all
    (so differences are paired)."""
    targets = list(accuracies)
    size = len(next(iter(accuracies.values())))
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, size, (samples, size))
    total = sum(weights.get(t, 1.0) for t in targets)
    out = {}
    for name, per_target in scores.items():
        jcm = np.zeros(samples)
        for t in targets:
            x = np.asarray(per_target[t], dtype=np.float64)
            y = np.asarray(accuracies[t], dtype=np.float64)
            taus = np.concatenate([kendall_batch(x[chunk], y[chunk]) for chunk in np.array_split(
                picks, max(1, samples // 100))]) if samples else np.zeros(0)
            jcm += weights.get(t, 1.0) * taus
        out[name] = jcm / total
    return out


def _interval(values: np.ndarray) -> dict:
    finite = values[np.isfinite(values)]
    if not len(finite):
        return {"low": None, "high": None, "ahead": None, "samples": 0}
    low, high = np.percentile(finite, [2.5, 97.5])
    return {"low": float(low), "high": float(high), "ahead": float(np.mean(finite > 0)), "samples": len(finite)}


def summarise_direction(direction: Mapping, accuracies: Mapping[str, np.ndarray], weights: Mapping[str, float],
                        samples: int, seed: int) -> dict:
    """The figures of one left-out space: each method's Kendall and JCM, the searched proxy's mean and sd over
    seeds, and its paired difference against each baseline (observed, per seed, bootstrap interval)."""
    seeds = [s for s in direction["searches"] if s.get("scores")]
    baselines = (direction.get("baselines") or {}).get("scores") or {}
    methods = {f"seed-{s['seed']}": s["scores"] for s in seeds} | baselines
    figures = {name: method_figures(s, accuracies, weights) for name, s in methods.items()}
    seed_jcms = [figures[f"seed-{s['seed']}"]["jcm"] for s in seeds]
    summary = {"seeds": len(seeds), "figures": figures}
    if not seeds:
        return summary
    summary[SEARCHED] = {"jcm_mean": float(np.mean(seed_jcms)), "jcm_sd": float(np.std(seed_jcms, ddof=1))
                         if len(seed_jcms) > 1 else 0.0, "jcm_min": float(np.min(seed_jcms)),
                         "jcm_max": float(np.max(seed_jcms)),
                         "kendall_mean": {t: float(np.mean([figures[f"seed-{s['seed']}"]["kendall"][t]
                                                            for s in seeds])) for t in accuracies}}
    boot = bootstrap_jcms(methods, accuracies, weights, samples, seed)
    searched_boot = np.mean([boot[f"seed-{s['seed']}"] for s in seeds], axis=0) if samples else np.zeros(0)
    differences = {}
    for name in baselines:
        base = figures[name]["jcm"]
        per_seed = [j - base for j in seed_jcms]
        differences[name] = {"jcm": base, "difference": float(np.mean(per_seed)),
                             "per_seed_min": float(np.min(per_seed)), "per_seed_max": float(np.max(per_seed)),
                             "seeds_ahead": int(sum(d > 0 for d in per_seed)),
                             "interval": _interval(searched_boot - boot[name]) if samples else None}
    summary["differences"] = differences
    return summary


def run_cross_space(settings: SearchSettings | None, out: str | Path, seeds: int | None = None,
                    zoo: Sequence[str] | None = None, bootstrap: int | None = None, resume: bool = False,
                    stop_after: int | None = None, quiet: bool = False, search_workers: int = 1,
                    iterations: int | None = None) -> dict:
    """Run (or resume) the leave-one-space-out protocol of ``settings`` into ``out``; return ``protocol.json``.

    Parameters
    ----------
    settings : SearchSettings or None
        A multi-space configuration (two benchmarks or more); its ``split_seed`` and
        ``search_fraction`` are unused (each search takes every architecture of its spaces),
        its evolution seed is the first search seed. On resume, None takes the recorded one.
    seeds : int, optional
        Search seeds per left-out space (default 5): seeds ``seed .. seed + seeds - 1``.
    zoo : sequence of str, optional
        The zoo proxies scored as baselines (default every one of :data:`ZOO`); on resume it may
        change until the baselines are scored (after every search).
    bootstrap : int, optional
        Resamples of the left-out architectures (default 1000; 0: none).
    stop_after : int, optional
        Each search stops after that iteration as if interrupted (tests).
    search_workers : int
        Searches run side by side in processes (the figures do not depend on it).
    iterations : int, optional
        On resume, a new total of iterations for every search (recorded in ``protocol.json``
        and in the ``config.json`` of each search it continues; a finished search is extended to
        a larger total, one that ran more iterations is kept as it ran).
    """
    out = Path(out)
    previous = previous_record(out, resume, "a protocol")
    settings, spec = _recorded_spec(out, previous, settings, seeds, zoo, bootstrap, iterations)
    if spec["seeds"] < 1:
        raise ConfigError(f"--seeds must be at least 1, got {spec['seeds']}")
    for name in spec["zoo"]:
        ZOO.lookup(name)
    context = MultiRunContext.from_settings(settings, measured_on="all")
    settings = context.settings
    first_seed = settings.evolution.seed
    directions = previous["directions"] if previous else [
        {"left_out": p.bench.space, "trained_on": [q.bench.space for q in context.parts if q is not p],
         "run": direction_name(p.bench.space), "baselines": None,
         "searches": [{"seed": first_seed + s, "run": f"{direction_name(p.bench.space)}/seed-{first_seed + s}",
                       "scores": None} for s in range(spec["seeds"])]} for p in context.parts]
    protocol = {"autoprox_version": __version__,
                "created": previous["created"] if previous else now(),
                # the command that started it; a resume is recorded beside, not over it
                **recorded_command(previous, sys.argv),
                "spaces": list(context.spaces), "benchmark_sha256": list(context.bench.sha256),
                "settings": settings.to_json(), "protocol": spec, "targets": list(context.parts[0].targets),
                "directions": directions, "summary": None, "finished": False}
    out.mkdir(parents=True, exist_ok=True)
    run_cuts(out, _LeaveSpaceOut(out, context, stop_after, quiet, search_workers), protocol,
             lambda message: log(message, quiet))
    if not protocol["finished"]:
        log(f"stopped before a search finished; continue with: autoprox evaluate --leave-space-out --resume "
            f"--out {out}", quiet)
    return RunDirectory(out).protocol()


def _recorded_spec(out: Path, previous: Mapping | None, settings: SearchSettings | None, seeds: int | None,
                   zoo: Sequence[str] | None, bootstrap: int | None, iterations: int | None
                   ) -> tuple[SearchSettings, dict]:
    """The settings and protocol options of a new protocol, or of ``previous`` checked against those given."""
    if previous is None:
        if settings is None or not settings.multi_space:
            raise ConfigError("--leave-space-out needs at least two labelled spaces: give --space (or --bench) "
                              "more than once")
        return settings, {"mode": "leave-space-out", "seeds": DEFAULT_SEEDS if seeds is None else int(seeds),
                          "zoo": list(ZOO) if zoo is None else list(zoo),
                          "bootstrap": BOOTSTRAP_SAMPLES if bootstrap is None else int(bootstrap),
                          "selection": "best"}
    path = out / PROTOCOL
    recorded = SearchSettings.from_json(previous["settings"])
    if settings is not None and iterations is None \
            and settings.to_json() | {"workers": 0} != recorded.to_json() | {"workers": 0}:
        given = MultiRunContext.from_settings(settings, measured_on="all").settings.to_json()
        check_recorded(path, {"search settings": differing_settings(previous["settings"], given)},
                       "resume without search options")
    if iterations is not None and iterations != recorded.evolution.iterations:
        # a new total of iterations for every search (as ``search --resume --iterations``); recorded
        recorded = replace(recorded, evolution=replace(recorded.evolution, iterations=int(iterations)))
    spec = dict(previous["protocol"])
    if zoo is not None and list(zoo) != spec["zoo"]:
        # the zoo baselines are scored after every search: until then the list may change
        if any(d.get("baselines") is not None for d in previous["directions"]):
            check_recorded(path, {"protocol options": ["zoo"]}, f"its baselines are scored with zoo "
                           f"{','.join(spec['zoo']) or 'none'}; resume without --zoo-baselines")
        spec["zoo"] = list(zoo)
    check_recorded(path, {"protocol options": [key for key, value in (("seeds", seeds), ("bootstrap", bootstrap))
                                               if value is not None and value != spec[key]]})
    return recorded, spec


class _LeaveSpaceOut(CutProtocol):
    """The leave-one-space-out protocol as cuts: a cut is one (left-out space, seed) search, named by its
    run (``leave-out-SPACE/seed-S``); searches run side by side, and once all are done each left-out
    space's baselines are scored on it."""

    stop_at_unfinished = False

    def __init__(self, out: Path, context: MultiRunContext, stop_after: int | None, quiet: bool,
                 search_workers: int) -> None:
        self.out, self.context, self.settings = out, context, context.settings
        self.stop_after, self.quiet, self.search_workers = stop_after, quiet, search_workers
        self.targets: dict[str, RunContext] = {}
        self.resume_command = f"autoprox evaluate --leave-space-out --resume --out {shlex.quote(str(out))}"

    def _searches(self, record: Mapping) -> dict[str, tuple[dict, dict]]:
        return {search["run"]: (direction, search) for direction in record["directions"]
                for search in direction["searches"]}

    def cuts(self, record: Mapping) -> list[str]:
        return list(self._searches(record))

    def done(self, record: Mapping, cut: str) -> bool:
        return bool(self._searches(record)[cut][1].get("scores"))

    def run(self, record: dict, pending: list[str]):
        if pending or not self.done_with_baselines(record):  # a finished protocol reads no statistics
            for part in self.context.parts:  # every statistics entry once, before the searches read the cache
                build_cache(part.cache, part.plan.requests(list(part.bench.archs)), workers=self.settings.workers)
        # Every search first (the baselines' zoo passes are the slow part, and cached); side by side in
        # ``search_workers`` processes, each search deterministic, so the figures do not depend on it.
        searches, jobs = self._searches(record), []
        for cut in pending:
            direction, search = searches[cut]
            run_settings = training_settings(self.settings, self.context, direction["left_out"], search["seed"])
            jobs.append((cut, search_job, (run_settings.to_json(), str(self.out / cut), self.stop_after,
                                           self.quiet or self.search_workers > 1, self.resume_command),
                         f"leave out {direction['left_out']}, seed {search['seed']}: search on "
                         f"{', '.join(direction['trained_on'])} into {self.out / cut}"))
        yield from run_jobs(jobs, self.search_workers, self.quiet, what="searches")

    def keep(self, record: dict, cut: str, outcome: dict) -> bool:
        if not outcome["finished"]:
            return False
        direction, search = self._searches(record)[cut]
        settings, left_out = self.settings, direction["left_out"]
        part = next(p for p in self.context.parts if p.bench.space == left_out)
        target = self.targets.setdefault(left_out, left_out_context(settings, part))
        result = proxy_scores(Proxy(outcome["genome"], parse_genome(outcome["genome"])), target, settings.workers)
        search.update({"genome": outcome["genome"], "search_jcm": outcome["search_jcm"],
                       "iteration": outcome["iteration"], "seconds": outcome["seconds"]})
        if isinstance(result, str):
            search["invalid"] = result
            search["scores"] = {t: [math.nan] * len(part.bench) for t in target.targets}
        else:
            search["scores"], anchor = anchored_scores(settings, self.context, left_out, result)
            if anchor:  # the genome alone beside the proxy its fitness ranked
                search["anchor"], search["genome_scores"] = anchor, result
        jcm = method_figures(search["scores"], target.accuracies("all"), settings.weights)["jcm"]
        log(f"leave out {part.bench.space}, seed {search['seed']}: JCM {jcm:+.3f} on {part.bench.space} "
            f"(searched {outcome['search_jcm']:+.3f} on {', '.join(direction['trained_on'])}) "
            f"in {outcome['seconds']:.0f} s", self.quiet)
        return True

    def baselines(self, record: dict, write) -> None:
        zoo = record["protocol"]["zoo"]
        for direction in record["directions"]:
            if direction["baselines"] is None:
                log(f"leave out {direction['left_out']}: scoring {len(zoo) + len(NAMED_BASELINES)} baselines "
                    "on all its architectures", self.quiet)
                scores, choices, invalid = baseline_table(self.settings, self.context, direction["left_out"], zoo,
                                                          self.settings.workers)
                direction["baselines"] = {"scores": scores, "choices": choices, "invalid": invalid}
                write()

    def done_with_baselines(self, record: Mapping) -> bool:
        return all(d["baselines"] is not None for d in record["directions"])

    def close(self, record: dict, finished: bool) -> None:
        super().close(record, finished and self.done_with_baselines(record))

    def summarise(self, record: dict) -> None:
        """The summary of what is finished, and the record made JSON-safe, as it is written."""
        spec = record["protocol"]
        weights = record["settings"].get("weights") or {}
        summary = {}
        for direction in record["directions"]:
            part = next(p for p in self.context.parts if p.bench.space == direction["left_out"])
            accuracies = {t: np.asarray(part.bench.accuracies[t], dtype=np.float64) for t in record["targets"]}
            summary[direction["left_out"]] = summarise_direction(direction, accuracies, weights, spec["bootstrap"],
                                                                 record["settings"]["evolution"]["seed"])
        record["summary"] = json_safe(summary)

    def written(self, record: dict) -> dict:
        return json_safe(record)


def _num(value) -> str:
    return "   n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:+.3f}"


def format_cross_space(protocol: Mapping) -> str:
    """The text ``autoprox evaluate --leave-space-out`` prints: per left-out space, the searched proxy's JCM
    (mean, sd, range over seeds) and each baseline's, with the paired difference and its bootstrap interval."""
    lines = []
    for space, summary in (protocol.get("summary") or {}).items():
        trained = next(d["trained_on"] for d in protocol["directions"] if d["left_out"] == space)
        searched = summary.get(SEARCHED)
        lines.append(f"left out {space} (searched on {', '.join(trained)}; {summary['seeds']} seed(s)), "
                     f"JCM over {', '.join(protocol['targets'])} on all its architectures")
        if searched:
            lines.append(f"  searched proxy: {_num(searched['jcm_mean'])} +- {searched['jcm_sd']:.3f} over seeds "
                         f"(min {_num(searched['jcm_min'])}, max {_num(searched['jcm_max'])})")
        lines.append(f"  {'baseline':<14}{'JCM':>8}{'proxy - it':>12}{'95% interval':>20}{'seeds ahead':>13}")
        for name, diff in (summary.get("differences") or {}).items():
            interval = diff.get("interval") or {}
            cell = f"[{_num(interval.get('low'))}, {_num(interval.get('high'))}]" if interval else "n/a"
            lines.append(f"  {name:<14}{_num(diff['jcm']):>8}{_num(diff['difference']):>12}{cell:>20}"
                         f"{diff['seeds_ahead']:>8}/{summary['seeds']}")
    return "\n".join(lines) + "\n"


__all__ = ["DEFAULT_SEEDS", "OWN_BLEND", "SEARCHED", "baseline_table", "bootstrap_jcms",
           "format_cross_space", "left_out_context", "run_cross_space", "summarise_direction",
           "training_settings"]
