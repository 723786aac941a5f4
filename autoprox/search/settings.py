"""Search settings: everything a search depends on, as recorded in ``config.json``.

What a setting is made of, how ``config.json`` records it and how it is checked when read comes from the
option table (:mod:`autoprox.search.options`): each option with a :attr:`~autoprox.search.options.Option.setting`
is a setting, so a new option is recorded, checked, digested and compared on resume without a line here.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from autoprox.core.atomic import load_json
from autoprox.core.errors import ConfigError, RunDirError
from autoprox.genome.space import AGGREGATIONS, GenomeSpace
from autoprox.primitives import PAPER_OPERATORS
from autoprox.search.conversions import is_int, is_number, list_of
from autoprox.search.evolution import EvolutionConfig
from autoprox.search.objectives import Objective, parse_fitness
from autoprox.search.options import (
    OPTIONS,
    SEARCH_EVALUATION,
    bench_of,
    check_cpu_only,
    genome_space_of,
    resolve_evaluation,
    resolve_kernels,
    session_options,
    setting_field,
    setting_option,
    setting_options,
)
from autoprox.search.rundir import CONFIG, RunDirectory


@dataclass(frozen=True)
class SearchSettings:
    """Everything a search depends on, as given by the user (recorded in ``config.json``).

    The fields are the settings of the option table's rows (:attr:`autoprox.search.options.Option.setting`)
    that the engine reads by name, each with its row's default (:func:`~autoprox.search.options.setting_field`),
    and those no option gives (``genome``, ``split_indices``); the settings of any other row are in :attr:`options`.
    """

    #: The benchmark file; several (a tuple) for a search over several spaces at once, whose
    #: fitness is the JCM over every (benchmark, target) pair (:mod:`autoprox.search.multispace`).
    bench: str | tuple[str, ...]
    targets: tuple[str, ...] = setting_field("targets")
    weights: Mapping[str, float] = setting_field("weights")
    split_seed: int = setting_field("split_seed")
    search_fraction: float = setting_field("search_fraction")
    input: str = setting_field("input")
    batch_size: int = setting_field("batch_size")
    stat_seeds: tuple[int, ...] = setting_field("stat_seeds")
    per_target_stats: bool = setting_field("per_target_stats")
    cache_dir: str | None = setting_field("cache_dir")
    cache_precision: str = setting_field("cache_precision")
    workers: int = setting_field("workers")
    seed_proxies: tuple[str, ...] = setting_field("seed_proxies")
    evolution: EvolutionConfig = field(default_factory=EvolutionConfig)
    #: The genome space (GenomeSpace.to_json()); empty: the paper's template, mean, statistics only.
    genome: Mapping = field(default_factory=dict)
    #: Cross-validated fitness: folds of the search split (0: none, the paper's) and how
    #: fold JCMs combine (mean, or worst fold).
    cv_folds: int = setting_field("cv_folds")
    cv_mode: str = setting_field("cv_mode")
    #: An explicit search part (benchmark indices; the rest is the test part), used instead of
    #: ``split_seed`` and ``search_fraction`` when set (the outer folds of ``autoprox evaluate``).
    #: ``split_seed`` still seeds the inner folds of ``cv_folds``.
    split_indices: tuple[int, ...] | None = None
    #: What the search maximises (:func:`autoprox.search.objectives.parse_fitness`): ``jcm`` (the paper's),
    #: ``partial:BASE`` or ``combined:BASE[:W]``, the base fitted on the search part only.
    fitness: str = setting_field("fitness")
    #: The kernel set genomes are evaluated with (:data:`autoprox.primitives.KERNEL_SETS`): ``torch`` (the
    #: committed runs' numbers bitwise) or ``numpy`` (faster here; scores equal to a few float32 ulps).
    kernels: str = setting_field("kernels")
    #: How genomes are evaluated (:data:`autoprox.search.evaluators.EVALUATIONS`): ``exact`` (entry by
    #: entry, the committed runs' numbers bitwise) or ``counted`` (once per distinct stored value,
    #: the exact path where it does not apply; scores equal to float32 rounding).
    evaluation: str = setting_field("evaluation")
    #: With several benchmarks: the weight of each, by space name (default 1 each); a pair's weight in
    #: the JCM is its benchmark's weight times its target's.
    bench_weights: Mapping[str, float] = setting_field("bench_weights")
    #: The settings of the option table's rows that have no field above, by setting name, where they differ
    #: from the option's default (:meth:`option` reads them).
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def benches(self) -> tuple[str, ...]:
        """The benchmark files, one or several."""
        return (self.bench,) if isinstance(self.bench, str) else tuple(self.bench)

    @property
    def multi_space(self) -> bool:
        """Whether the search runs over several benchmarks at once."""
        return not isinstance(self.bench, str)

    def option(self, setting: str) -> Any:
        """The setting of an option table row without a field of its own: the recorded value, else its default."""
        return self.options[setting] if setting in self.options else setting_option(setting).field_default

    def replaced(self, changes: Mapping[str, Any]) -> "SearchSettings":
        """These settings with ``changes`` made, each by its setting name (``workers``, ``evolution.iterations``:
        :attr:`~autoprox.search.options.Option.setting`)."""
        chosen = {name: value for name, value in changes.items() if "." not in name}
        evolution = {name.partition(".")[2]: value for name, value in changes.items() if "." in name}
        if evolution:
            chosen["evolution"] = replace(self.evolution, **evolution)
        return replace(self, **chosen)

    def to_json(self) -> dict:
        """The settings as ``config.json`` records them: a setting added after the first runs only where it differs
        from its default (:attr:`~autoprox.search.options.Option.always_recorded`), so that the configuration of an
        earlier search reads, and digests, exactly as before the setting existed."""
        data = asdict(self)
        data.update(data.pop("options"))
        for option in setting_options():
            head, _, sub = option.setting.partition(".")
            if option.always_recorded or head not in data:
                continue
            recorded = data["evolution"] if sub else data
            if (sub or head) in recorded and recorded[sub or head] == option.field_default:
                del recorded[sub or head]
        if self.split_indices is None:  # likewise: set only for the outer folds of a protocol
            del data["split_indices"]
        data["genome"] = GenomeSpace.from_json(self.genome).to_json()
        return _plain(data)

    def compared(self) -> dict:
        """What of these settings determines a search's result, as plain JSON: :meth:`to_json` less the session
        settings (:func:`~autoprox.search.options.session_options`: where the benchmark and the cache are, the
        workers, the total of iterations), which may change when a run resumes because they do not change what it
        computes."""
        data = self.to_json()
        for option in session_options():
            head, _, sub = option.setting.partition(".")
            (data["evolution"] if sub else data).pop(sub or head, None)
        return data

    def digested(self, bench_sha256: str | Sequence[str]) -> dict:
        """What :meth:`digest` hashes: :meth:`compared` and the benchmark's content digest(s)."""
        data = self.compared()
        data["benchmark_sha256"] = bench_sha256 if isinstance(bench_sha256, str) else list(bench_sha256)
        return data

    def digest(self, bench_sha256: str | Sequence[str]) -> str:
        """SHA-256 of everything in these settings that determines a search's result, and of its benchmark's
        content.

        A checkpoint records it; a resume whose settings give another digest would mix two searches.
        Left out: the session settings (:meth:`compared`). ``bench_sha256``: one digest, or one per benchmark
        of a multi-space search.
        """
        return hashlib.sha256(json.dumps(self.digested(bench_sha256), sort_keys=True, default=str).encode()
                              ).hexdigest()

    @classmethod
    def from_json(cls, data: Mapping) -> "SearchSettings":
        """Settings as ``config.json`` records them; ConfigError naming a field of the wrong type."""
        if not isinstance(data, Mapping):
            raise ConfigError("the settings must be an object")
        _check_types(data)
        values = {name: tuple(value) if isinstance(value, list) else dict(value) if isinstance(value, Mapping)
                  else value for name, value in data.items()}
        values["options"] = {name: values.pop(name) for name in list(values) if name not in _FIELDS}
        values["evolution"] = EvolutionConfig(**values["evolution"])
        values["genome"] = dict(values.get("genome") or {})
        if values.get("split_indices") is not None:
            values["split_indices"] = tuple(int(i) for i in values["split_indices"])
        return cls(**values)

    @property
    def genome_space(self) -> GenomeSpace:
        return GenomeSpace.from_json(self.genome)

    @property
    def fitness_mode(self) -> Objective:
        """The objective :attr:`fitness` names (:mod:`autoprox.search.objectives`); ConfigError when it is none."""
        return parse_fitness(self.fitness)


#: The fields of SearchSettings by name.
_FIELDS = {f.name: f for f in fields(SearchSettings)}


def _plain(value: Any) -> Any:
    """``value`` as JSON reads back: tuples as lists, mappings as dicts."""
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    return value


#: What each recorded setting that is no option's must be (the others: their option's check).
_OWN_CHECKS = {
    "evolution": lambda v: isinstance(v, Mapping) and all(
        isinstance(k, str) and (isinstance(x, bool) if k == "parsimony" else is_number(x)) for k, x in v.items()),
    "genome": lambda v: v is None or isinstance(v, Mapping),
    "split_indices": lambda v: v is None or list_of(is_int)(v),
}
_REQUIRED = ("bench", "targets", "stat_seeds", "evolution")


def _check(name: str, value: Any) -> bool:
    """Whether ``value`` is one the setting ``name`` can record (a missing optional one takes its default)."""
    if name in _OWN_CHECKS:
        return _OWN_CHECKS[name](value)
    spec = _FIELDS.get(name)
    if value is None and spec is not None and spec.default is None:
        return True
    return setting_option(name).is_recorded(value)


def _check_types(data: Mapping) -> None:
    for name in _REQUIRED:
        if name not in data:
            raise ConfigError(f"the settings have no {name!r}")
    known = set(_OWN_CHECKS) | {option.setting for option in setting_options() if "." not in option.setting}
    for name, value in data.items():
        if name not in known:
            raise ConfigError(f"unknown setting {name!r}")
        if not _check(name, value):
            raise ConfigError(f"setting {name!r} has a value of the wrong type: {value!r}"[:160])


def settings_from_options(values: Mapping[str, Any], evaluation: str = SEARCH_EVALUATION) -> SearchSettings:
    """The :class:`SearchSettings` of a new search from the options' values
    (:func:`~autoprox.search.options.option_values`); ``evaluation``: the evaluation when none is given, where it
    applies (:func:`~autoprox.search.options.resolve_evaluation`; ``evaluate`` and ``transfer`` keep exact), and the
    kernels that go with it (:func:`~autoprox.search.options.resolve_kernels`)."""
    check_cpu_only(values.get("device", "cpu"), "search")
    bench = bench_of(values)
    if values["bench_weights"] and isinstance(bench, str):
        raise ConfigError("--bench-weights weighs several benchmarks; give --space or --bench more than once")
    evaluation = resolve_evaluation(values, evaluation)
    values = {**values, "bench": bench, "evaluation": evaluation, "kernels": resolve_kernels(values, evaluation)}
    chosen: dict[str, Any] = {"genome": genome_space_of(values).to_json()}
    evolution: dict[str, Any] = {}
    options: dict[str, Any] = {}
    for option in setting_options():
        head, _, sub = option.setting.partition(".")
        value = option.recorded_value(values)
        if sub:
            evolution[sub] = value
        elif head in _FIELDS:
            chosen[head] = value
        elif value != option.default:
            options[head] = value
    return SearchSettings(**chosen, evolution=EvolutionConfig(**evolution), options=options)


def options_from_settings(settings: SearchSettings, space: str | None = None) -> dict[str, Any]:
    """The option values that give ``settings`` (a run's recorded ones): the inverse of
    :func:`settings_from_options` (the one way back from settings to options), with ``space`` the run's recorded
    space. The genome space gives back the options it is made of (:func:`~autoprox.search.options.genome_space_of`)."""
    values = {option.name: option.default for option in OPTIONS.values()}
    for option in setting_options():
        head, _, sub = option.setting.partition(".")
        value = getattr(settings.evolution, sub) if sub else getattr(settings, head) if head in _FIELDS \
            else settings.option(head)
        values[option.name] = tuple(value) if isinstance(value, list) else \
            dict(value) if isinstance(value, Mapping) else value
    genome = settings.genome_space
    every = tuple(AGGREGATIONS)
    values.update(genome=genome.kind, operators=genome.operators, terminals=genome.terminals,
                  aggregation="gene" if genome.aggregations == every and len(every) > 1 else
                  ",".join(name.removeprefix("block_") for name in genome.aggregations),
                  arch_terminals=genome.arch_terminals, spread_terminals=genome.spread_terminals)
    values["space"] = None if settings.multi_space else space or None
    return values


def settings_differences(mine: Mapping, theirs: Mapping, label: str = "") -> list[str]:
    """The settings that differ between two :meth:`SearchSettings.compared` (or ``digested``), each as
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


#: The ``config.json`` field, beside ``settings``, listing the operations the search's genomes are built from.
OPERATORS_FIELD = "operators"


def refuse_unregistered_operators(folder) -> None:
    """RunDirError when the run in ``folder`` was searched with an operator of one's own (``config.json``'s
    ``operators``) that this process has not registered: its genomes cannot be read, and reading them said
    ``evaluation record 4 is malformed: unknown token ...`` (show, report) or listed every genome token (export,
    rank). Nothing for a run of registered operators, or a folder that holds no run."""
    from autoprox.primitives import PRIMITIVES

    path = Path(folder) / CONFIG
    try:
        if not path.is_file():
            return
        names = load_json(path.read_text(encoding="utf-8")).get(OPERATORS_FIELD)
    except (OSError, ValueError, AttributeError):
        return  # the run's own reading names what is wrong with it
    missing = [name for name in names if isinstance(name, str) and name not in PRIMITIVES] \
        if isinstance(names, list) else []
    if missing:
        raise RunDirError(f"{folder} was searched with the operator {missing[0]!r} of your own, which is not "
                          "registered in this process: register it in Python first (autoprox.primitives."
                          "register_primitive), then read the run there "
                          f"(autoprox.ProxySearch.from_run({str(folder)!r}), or autoprox.cli.main.main([...]) with "
                          "this command's arguments)")


def settings_of_config(config: Mapping) -> SearchSettings:
    """The settings a run's ``config.json`` records.

    Its :data:`OPERATORS_FIELD` is the operator set the genomes were drawn from; a run made before it was
    recorded has none, and used the paper's (:data:`autoprox.primitives.PAPER_OPERATORS`). Where the settings
    leave the operators to the default and the field names others than the paper's, the field's are the run's.
    The settings themselves, and so their digest, never record the default: searches with the paper's set are
    recorded and compared as they were before the field.
    """
    settings = SearchSettings.from_json(config["settings"])
    recorded = config.get(OPERATORS_FIELD)
    if recorded is None or settings.genome.get("operators") is not None:
        return settings
    if not isinstance(recorded, list) or not all(isinstance(name, str) for name in recorded):
        raise ValueError(f"{OPERATORS_FIELD!r} must be a list of operation names")
    if tuple(recorded) == PAPER_OPERATORS:
        return settings
    return replace(settings, genome={**settings.genome, "operators": list(recorded)})


def recorded_settings(run_path) -> tuple[SearchSettings, str]:
    """The settings and the space ``config.json`` of the run in ``run_path`` records; RunDirError naming
    the file when it is not a run or its settings cannot be read."""
    run = RunDirectory(run_path)
    config = run.config()
    try:
        return settings_of_config(config), str(config.get("space", ""))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise RunDirError(f"{run.file('config.json')}: not a run configuration this autoprox can read "
                          f"({type(exc).__name__}: {exc})") from None
