"""Search settings: everything a search depends on, as recorded in ``config.json``."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Mapping, Sequence

from autoprox.core.errors import ConfigError, RunDirError
from autoprox.data.cache import StatsPlan
from autoprox.genome.counted import DEFAULT_EVALUATION, EVALUATIONS
from autoprox.genome.tree import DEFAULT_KERNELS, GenomeSpace
from autoprox.search.evolution import EvolutionConfig
from autoprox.search.objectives import Objective, parse_fitness
from autoprox.search.rundir import RunDirectory
from autoprox.primitives import KERNEL_SETS


@dataclass(frozen=True)
class SearchSettings:
    """Everything a search depends on, as given by the user (recorded in ``config.json``)."""

    #: The benchmark file; several (a tuple) for a search over several spaces at once, whose
    #: fitness is the JCM over every (benchmark, target) pair (:mod:`autoprox.search.multispace`).
    bench: str | tuple[str, ...]
    targets: tuple[str, ...] = ()
    weights: Mapping[str, float] = field(default_factory=dict)
    split_seed: int = 0
    search_fraction: float = 0.6
    input: str = "gaussian"
    batch_size: int = 8
    stat_seeds: tuple[int, ...] = (0,)
    per_target_stats: bool = False
    cache_dir: str | None = None
    cache_precision: str = "float16"
    workers: int = 1
    seed_proxies: tuple[str, ...] = ()
    evolution: EvolutionConfig = field(default_factory=EvolutionConfig)
    #: The genome space (GenomeSpace.to_json()); empty: the paper's template, mean, statistics only.
    genome: Mapping = field(default_factory=dict)
    #: Cross-validated fitness: folds of the search split (0: none, the paper's) and how
    #: fold JCMs combine (mean, or worst fold).
    cv_folds: int = 0
    cv_mode: str = "mean"
    #: An explicit search part (benchmark indices; the rest is the test part), used instead of
    #: ``split_seed`` and ``search_fraction`` when set (the outer folds of ``autoprox evaluate``).
    #: ``split_seed`` still seeds the inner folds of ``cv_folds``.
    split_indices: tuple[int, ...] | None = None
    #: What the search maximises (:func:`autoprox.search.objectives.parse_fitness`): ``jcm`` (the paper's),
    #: ``partial:BASE`` or ``combined:BASE[:W]``, the base fitted on the search part only.
    fitness: str = "jcm"
    #: The kernel set genomes are evaluated with (:data:`autoprox.primitives.KERNEL_SETS`): ``torch`` (the
    #: committed runs' numbers bitwise) or ``numpy`` (faster here; scores equal to a few float32 ulps).
    kernels: str = DEFAULT_KERNELS
    #: How genomes are evaluated (:data:`autoprox.genome.counted.EVALUATIONS`): ``exact`` (entry by
    #: entry, the committed runs' numbers bitwise) or ``counted`` (once per distinct stored value,
    #: the exact path where it does not apply; scores equal to float32 rounding).
    evaluation: str = DEFAULT_EVALUATION
    #: With several benchmarks: the weight of each, by space name (default 1 each); a pair's weight in
    #: the JCM is its benchmark's weight times its target's.
    bench_weights: Mapping[str, float] = field(default_factory=dict)

    @property
    def benches(self) -> tuple[str, ...]:
        """The benchmark files, one or several."""
        return (self.bench,) if isinstance(self.bench, str) else tuple(self.bench)

    @property
    def multi_space(self) -> bool:
        """Whether the search runs over several benchmarks at once."""
        return not isinstance(self.bench, str)

    def to_json(self) -> dict:
        data = asdict(self)
        # Absent rather than null when unset, so the configuration of an ordinary search
        # reads exactly as before the field existed.
        if self.split_indices is None:
            del data["split_indices"]
        else:
            data["split_indices"] = list(self.split_indices)
        if self.evolution.patience is None:  # likewise: the paper's setting records no patience
            del data["evolution"]["patience"]
        if not self.evolution.restarts:  # nor restarts
            del data["evolution"]["restarts"]
        if self.fitness == "jcm":  # nor a fitness other than the JCM
            del data["fitness"]
        if self.kernels == DEFAULT_KERNELS:  # nor the kernel set, when torch's
            del data["kernels"]
        if self.evaluation == DEFAULT_EVALUATION:  # nor the evaluation, when exact
            del data["evaluation"]
        if self.multi_space:  # a list only when several: a single-space config reads as before
            data["bench"] = list(self.bench)
        if not self.bench_weights:
            del data["bench_weights"]
        else:
            data["bench_weights"] = dict(self.bench_weights)
        data["genome"] = GenomeSpace.from_json(self.genome).to_json()
        data["targets"] = list(self.targets)
        data["stat_seeds"] = list(self.stat_seeds)
        data["seed_proxies"] = list(self.seed_proxies)
        data["weights"] = dict(self.weights)
        return data

    @classmethod
    def from_json(cls, data: Mapping) -> "SearchSettings":
        """Settings as ``config.json`` records them; ConfigError naming a field of the wrong type."""
        if not isinstance(data, Mapping):
            raise ConfigError("the settings must be an object")
        _check_types(data)
        values = dict(data)
        values["targets"] = tuple(values["targets"])
        values["stat_seeds"] = tuple(values["stat_seeds"])
        values["seed_proxies"] = tuple(values.get("seed_proxies", ()))
        values["evolution"] = EvolutionConfig(**values["evolution"])
        values["genome"] = dict(values.get("genome") or {})
        if isinstance(values["bench"], list):
            values["bench"] = tuple(values["bench"])
        values["bench_weights"] = dict(values.get("bench_weights") or {})
        indices = values.get("split_indices")
        values["split_indices"] = None if indices is None else tuple(int(i) for i in indices)
        return cls(**values)

    @property
    def genome_space(self) -> GenomeSpace:
        return GenomeSpace.from_json(self.genome)

    @property
    def fitness_mode(self) -> Objective:
        """The objective :attr:`fitness` names (:mod:`autoprox.search.objectives`); ConfigError when it is none."""
        return parse_fitness(self.fitness)


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _list_of(check):
    return lambda value: isinstance(value, list) and all(check(v) for v in value)


#: What each recorded setting must be (a missing optional one takes its default).
_FIELD_CHECKS = {
    "bench": lambda v: isinstance(v, str) or (_list_of(lambda b: isinstance(b, str))(v) and len(v) >= 2),
    "bench_weights": lambda v: isinstance(v, Mapping) and all(
        isinstance(k, str) and _is_number(w) for k, w in v.items()),
    "targets": _list_of(lambda v: isinstance(v, str)),
    "weights": lambda v: isinstance(v, Mapping) and all(isinstance(k, str) and _is_number(w) for k, w in v.items()),
    "split_seed": _is_int,
    "search_fraction": _is_number,
    "input": lambda v: isinstance(v, str),
    "batch_size": _is_int,
    "stat_seeds": _list_of(_is_int),
    "per_target_stats": lambda v: isinstance(v, bool),
    "cache_dir": lambda v: v is None or isinstance(v, str),
    "cache_precision": lambda v: isinstance(v, str),
    "workers": _is_int,
    "seed_proxies": _list_of(lambda v: isinstance(v, str)),
    "evolution": lambda v: isinstance(v, Mapping) and all(
        isinstance(k, str) and (isinstance(x, bool) if k == "parsimony" else _is_number(x)) for k, x in v.items()),
    "genome": lambda v: v is None or isinstance(v, Mapping),
    "cv_folds": _is_int,
    "cv_mode": lambda v: isinstance(v, str),
    "split_indices": lambda v: v is None or _list_of(_is_int)(v),
    "fitness": lambda v: isinstance(v, str),
    "kernels": lambda v: isinstance(v, str) and v in KERNEL_SETS,
    "evaluation": lambda v: isinstance(v, str) and v in EVALUATIONS,
}
_REQUIRED = ("bench", "targets", "stat_seeds", "evolution")


def _check_types(data: Mapping) -> None:
    for name in _REQUIRED:
        if name not in data:
            raise ConfigError(f"the settings have no {name!r}")
    for name, value in data.items():
        check = _FIELD_CHECKS.get(name)
        if check is None:
            raise ConfigError(f"unknown setting {name!r}")
        if not check(value):
            raise ConfigError(f"setting {name!r} has a value of the wrong type: {value!r}"[:160])


def stats_plan(settings: SearchSettings, targets: Sequence[str]) -> StatsPlan:
    """The statistics plan of ``settings`` for ``targets`` (with the extra statistics its genome space reads)."""
    return StatsPlan.from_options(settings.input, settings.batch_size, settings.stat_seeds, targets,
                                  settings.per_target_stats, extras=settings.genome_space.extras)


#: Settings that may change when a run resumes, because they do not change what it computes:
#: where the benchmark and the cache are, how many processes compute statistics, and the
#: total of iterations (``--iterations`` on resume extends a run).
SESSION_SETTINGS = ("bench", "cache_dir", "workers")


def compared_settings(settings: SearchSettings) -> dict:
    """What of ``settings`` determines a search's result, as plain JSON: ``to_json()`` less
    :data:`SESSION_SETTINGS` and the total of iterations."""
    data = settings.to_json()
    for name in SESSION_SETTINGS:
        data.pop(name, None)
    data["evolution"] = {k: v for k, v in data["evolution"].items() if k != "iterations"}
    return data


def digested_settings(settings: SearchSettings, bench_sha256: str | Sequence[str]) -> dict:
    """What :func:`settings_digest` hashes: :func:`compared_settings` and the benchmark's content digest(s)."""
    data = compared_settings(settings)
    data["benchmark_sha256"] = bench_sha256 if isinstance(bench_sha256, str) else list(bench_sha256)
    return data


def settings_digest(settings: SearchSettings, bench_sha256: str | Sequence[str]) -> str:
    """SHA-256 of everything in ``settings`` that determines a search's result, and of its benchmark's content.

    A checkpoint records it; a resume whose settings give another digest would mix two searches.
    Left out: :data:`SESSION_SETTINGS` and the total of iterations. ``bench_sha256``: one digest, or
    one per benchmark of a multi-space search.
    """
    data = digested_settings(settings, bench_sha256)
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def settings_differences(mine: Mapping, theirs: Mapping, label: str = "") -> list[str]:
    """The settings that differ between two :func:`compared_settings` (or :func:`digested_settings`), each as
    ``name MINE (LABEL THEIRS)`` with nested settings dotted (``evolution.seed``), in name order."""
    def flat(data: Mapping, prefix: str = "") -> dict:
        out = {}
        for key, value in data.items():
            if isinstance(value, Mapping) and value and key in ("evolution", "genome"):
                out.update(flat(value, f"{prefix}{key}."))
            else:
                out[f"{prefix}{key}"] = value
        return out

    def shown(value) -> str:
        if value is _ABSENT:
            return "not set"
        if isinstance(value, (list, tuple)):
            return ",".join(map(str, value)) or "none"
        if isinstance(value, Mapping):
            return ",".join(f"{k}={v}" for k, v in value.items()) or "none"
        return str(value)

    a, b = (flat(json.loads(json.dumps(d, sort_keys=True, default=str))) for d in (mine, theirs))
    return [f"{name} {shown(a.get(name, _ABSENT))} ({label}{shown(b.get(name, _ABSENT))})"
            for name in sorted(set(a) | set(b)) if a.get(name, _ABSENT) != b.get(name, _ABSENT)]


_ABSENT = object()


def recorded_settings(run_path) -> tuple[SearchSettings, str]:
    """The settings and the space ``config.json`` of the run in ``run_path`` records; RunDirError naming
    the file when it is not a run or its settings cannot be read."""
    run = RunDirectory(run_path)
    config = run.config()
    try:
        return SearchSettings.from_json(config["settings"]), str(config.get("space", ""))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise RunDirError(f"{run.file('config.json')}: not a run configuration this autoprox can read "
                          f"({type(exc).__name__}: {exc})") from None
