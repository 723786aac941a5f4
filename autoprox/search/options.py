"""The option table: every option of ``search`` (and of the commands that take its options), once.

Each :class:`Option` holds an option's name, default, help, the command-line group it
shows in, and the one conversion that checks a value and brings it to its canonical form.
The command line (``autoprox.cli.options``) makes its argparse options from this table,
and the Python API (``autoprox.api.ProxySearch``) takes exactly these names as
parameters, with the same defaults; both turn the values into
:class:`~autoprox.search.settings.SearchSettings` through :func:`settings_from_options`.
So a value the command line refuses is refused by the API with the same one-line error,
and the other way round.

A conversion accepts what a user types (a string) and what a Python caller passes
(numbers, sequences, mappings), and raises :class:`~autoprox.core.errors.ConfigError`
with one line naming the option.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from autoprox.core.errors import BenchmarkError, ConfigError, GenomeError
from autoprox.data.benchmark import BENCH_FILE_NAMES, default_bench_path
from autoprox.data.cache import PRECISIONS
from autoprox.genome.counted import DEFAULT_EVALUATION, EVALUATIONS
from autoprox.genome.terminals import PAPER_TERMINALS, TERMINAL_SETS, check_terminals
from autoprox.genome.tree import AGGREGATIONS, DEFAULT_KERNELS, GenomeSpace
from autoprox.networks.statistics import DEVICES
from autoprox.search.evolution import EvolutionConfig
from autoprox.search.fitness import parse_fitness
from autoprox.search.settings import SearchSettings
from autoprox.primitives import KERNEL_SETS

Convert = Callable[[Any], Any]

#: The commands that take every search option.
SEARCH_COMMANDS = frozenset({"search", "transfer", "evaluate"})
#: The commands that take the statistics options.
STATS_COMMANDS = SEARCH_COMMANDS | {"rank", "cache build", "vit-search"}


@dataclass(frozen=True)
class Option:
    """One option: ``--name-with-dashes`` on the command line, ``name`` in Python.

    Attributes
    ----------
    name : str
        The Python name (argparse's ``dest``).
    default : object
        The value when the option is not given (``None``: "not given", resolved later).
    help : str
        What it does, as ``--help`` shows it.
    convert : callable, optional
        Checks a value (a string from the command line or a Python value) and returns it in
        canonical form; raises ConfigError. None for a flag.
    group : str
        The ``--help`` group (``""``: the command's own options).
    choices : tuple, optional
        The values allowed, shown by ``--help``.
    flag : bool
        A switch (``store_true``).
    repeat : bool
        May be given several times (``append``).
    session : bool
        Says where or how a run is computed, not what: may change when a run resumes.
    commands : frozenset of str
        The commands that take it.
    metavar : str, optional
        The placeholder ``--help`` shows.
    several : bool
        One value, or several when given more than once (``--space A --space B``): a string, or a
        tuple of them.
    required : bool
        The command line needs it (``rank --proxy``).
    """

    name: str
    default: Any
    help: str
    convert: Convert | None = None
    group: str = ""
    choices: tuple | None = None
    flag: bool = False
    repeat: bool = False
    session: bool = False
    commands: frozenset = SEARCH_COMMANDS
    metavar: str | None = None
    several: bool = False
    required: bool = False

    @property
    def flag_name(self) -> str:
        return "--" + self.name.replace("_", "-")

    def value(self, given: Any) -> Any:
        """``given`` checked and in canonical form (the default when it is None)."""
        if given is None:
            return self.default
        try:
            if self.flag:
                if not isinstance(given, bool):
                    raise ConfigError(f"expected True or False, got {given!r}"[:200])
                return given
            if self.repeat:
                items = [given] if isinstance(given, str) else list(_sequence(self.name, given))
                return tuple(self.convert(item) if self.convert else item for item in items)
            value = self.convert(given) if self.convert else given
            if self.choices is not None and value not in self.choices:
                raise ConfigError(f"expected one of {', '.join(map(str, self.choices))}; got {value!r}"[:300])
            return value
        except ConfigError as exc:
            raise ConfigError(f"{self.name}: {exc}") from None


# --- conversions -----------------------------------------------------------------------
def _sequence(name: str, value: Any) -> Iterable:
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise ConfigError(f"expected a list, got {value!r}"[:200])
    return value


def integer(name: str, minimum: int | None = None) -> Convert:
    def convert(value: Any) -> int:
        if isinstance(value, str):
            try:
                value = int(value.strip())
            except ValueError:
                raise ConfigError(f"expected an integer, got {value!r}"[:200]) from None
        if not isinstance(value, int) or isinstance(value, bool):
            raise ConfigError(f"expected an integer, got {value!r}"[:200])
        if minimum is not None and value < minimum:
            raise ConfigError(f"expected at least {minimum}, got {value}")
        return value
    return convert


def number(name: str, low: float | None = None, high: float | None = None, low_open: bool = False) -> Convert:
    """A finite number in ``[low, high]`` (``(low, high]`` with ``low_open``): NaN and infinities are refused."""
    def convert(value: Any) -> float:
        given = value
        if isinstance(value, str):
            try:
                value = float(value.strip())
            except ValueError:
                raise ConfigError(f"expected a number, got {value!r}"[:200]) from None
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            raise ConfigError(f"expected a finite number, got {given!r}"[:200])
        below = low is not None and (value <= low if low_open else value < low)
        if below or (high is not None and value > high):
            interval = f"{'(' if low_open else '['}{low if low is not None else '-inf'}, {high if high is not None else 'inf'}]"
            raise ConfigError(f"expected a number in {interval}, got {value}")
        return float(value)
    return convert


def text(name: str) -> Convert:
    def convert(value: Any) -> str:
        if not isinstance(value, str):
            raise ConfigError(f"expected a string, got {value!r}"[:200])
        return value
    return convert


def text_list(name: str) -> Convert:
    """A comma list (``"a,b"``) or a sequence of strings, as a tuple."""
    def convert(value: Any) -> tuple[str, ...]:
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        items = tuple(_sequence(name, value))
        if not all(isinstance(item, str) for item in items):
            raise ConfigError(f"expected strings, got {value!r}"[:200])
        return items
    return convert


def one_or_several(name: str) -> Convert:
    """One string, or several (a sequence of two or more) as a tuple; one in a sequence is that string."""
    def convert(value: Any) -> str | tuple[str, ...]:
        if isinstance(value, (str, Path)):
            return str(value)
        items = tuple(str(item) if isinstance(item, Path) else text(name)(item) for item in _sequence(name, value))
        if not items:
            raise ConfigError("expected at least one value")
        return items[0] if len(items) == 1 else items
    return convert


def _several(value: Any) -> list[str]:
    return [] if value is None else [value] if isinstance(value, str) else list(value)


def integer_list(name: str) -> Convert:
    def convert(value: Any) -> tuple[int, ...]:
        parts = [p for p in value.split(",") if p.strip()] if isinstance(value, str) else list(_sequence(name, value))
        return tuple(integer(name)(part) for part in parts)
    return convert


def weights(name: str) -> Convert:
    """``c100_kd=2,flower_kd=1`` or a mapping of target to a finite weight of at least 0."""
    def convert(value: Any) -> dict[str, float]:
        if isinstance(value, str):
            pairs = []
            for part in (p.strip() for p in value.split(",") if p.strip()):
                key, sep, weight = part.partition("=")
                if not sep or not key:
                    raise ConfigError(f"weights look like c100_kd=1,flower_kd=0.5; got {part!r}"[:200])
                pairs.append((key.strip(), weight))
        elif isinstance(value, Mapping):
            pairs = list(value.items())
        else:
            raise ConfigError(f"expected a mapping of target to weight, got {value!r}"[:200])
        try:
            return {str(key): number(str(key), 0.0)(weight) for key, weight in pairs}
        except ConfigError as exc:
            raise ConfigError(f"a weight must be a finite number, at least 0 ({exc})") from None
    return convert


def proxies(name: str) -> Convert:
    """A comma list of proxies split at top-level commas only (genome strings hold commas), or a sequence."""
    def convert(value: Any) -> tuple[str, ...]:
        from autoprox.proxies.proxy import split_proxy_list

        if isinstance(value, str):
            return tuple(split_proxy_list(value))
        return text_list(name)(value)
    return convert


def aggregation(value: Any) -> str:
    """Over blocks: one name, a comma list, ``gene``, or a sequence of names, as one comma string."""
    if not isinstance(value, str):
        value = ",".join(text_list("aggregation")(value))
    names = aggregation_names(value)
    if not names:
        raise ConfigError("aggregation needs at least one name")
    return value


def aggregation_names(value: str) -> tuple[str, ...]:
    """The aggregations an ``aggregation`` value stands for, with their ``block_`` prefix."""
    parts = [p.strip() for p in value.split(",") if p.strip()]
    if parts == ["gene"]:
        return tuple(AGGREGATIONS)
    return tuple(p if p.startswith("block_") else f"block_{p}" for p in parts)


def operator_list(value: Any) -> tuple[str, ...]:
    """A comma list or sequence of registered operation names; ``paper`` stands for the paper's 28."""
    from autoprox.primitives import PAPER_OPERATORS

    names = text_list("operators")(value)
    expanded: list[str] = []
    for name in names:
        expanded += list(PAPER_OPERATORS) if name == "paper" else [name]
    if not expanded:
        raise ConfigError("expected at least one operation")
    return tuple(expanded)


def terminal_list(value: Any) -> tuple[str, ...]:
    """A comma list or sequence of terminal-set names (:data:`autoprox.genome.terminals.TERMINAL_SETS`),
    checked and in registration order."""
    try:
        return check_terminals(text_list("terminals")(value))
    except GenomeError as exc:
        raise ConfigError(str(exc)) from None


def fitness(value: Any) -> str:
    return parse_fitness(text("fitness")(value)).name


def check_space(space: str) -> None:
    """ConfigError unless ``space`` is registered (after the ``space_file`` families are)."""
    from autoprox.spaces.registry import REGISTRY

    if space not in REGISTRY.names():
        raise ConfigError(f"unknown space {space!r}; known: {', '.join(REGISTRY.names())}")


_EVOLUTION = EvolutionConfig()
_STATS = "statistics"
_GENOME = "genome space and selection (beyond the paper; defaults are the paper's)"

#: Every option of ``search``; ``transfer`` and ``evaluate`` take them all, and the
#: statistics group is taken by ``rank``, ``cache build`` and ``vit-search`` too.
SEARCH_OPTIONS: tuple[Option, ...] = (
    Option("space", None, f"search space; picks its released benchmark file ({', '.join(BENCH_FILE_NAMES)}); "
           "repeated (or with --bench), one search over every space at once", one_or_several("space"), several=True),
    Option("space_file", (), "a declarative ViT family (JSON or TOML, docs/spaces.md) to register, so that a "
           "benchmark of it can be read or its architectures sampled; may be repeated", text("space_file"),
           repeat=True, metavar="FILE"),
    Option("bench", None, "benchmark file (default: the space's released file, found without flags); may be "
           "repeated: a search over several benchmarks, fitness the JCM over every (benchmark, target) pair",
           one_or_several("bench"), session=True, several=True),
    Option("out", None, "run directory (default runs/<space>-seed<seed>)", text("out"), session=True),
    Option("resume", False, "continue the run in --out where it stopped, with its recorded settings; --iterations "
           "(a new total), --workers, --cache-dir, --scheduler and --bench (the same file elsewhere) are honoured, "
           "any other option must agree with the run", flag=True, session=True),
    Option("targets", (), "comma-separated targets (default: the KD columns plus imagenet_super)", text_list("targets")),
    Option("weights", {}, "JCM weights, e.g. c100_kd=2,flower_kd=1 (default equal)", weights("weights")),
    Option("bench_weights", {}, "with several benchmarks: the weight of each by space, e.g. autoformer=1,pit=1 "
           "(default equal); a pair weighs its benchmark's weight times its target's", weights("bench_weights")),
    Option("split_seed", 0, "seed of the search/test split", integer("split_seed")),
    Option("search_fraction", 0.6, "share of architectures searched on",
           number("search_fraction", 0.0, 1.0, low_open=True)),
    Option("seed", 0, "seed of the evolution", integer("seed")),
    Option("population", _EVOLUTION.population_size, "genomes in the population", integer("population", 2)),
    Option("iterations", None, f"iterations (default {_EVOLUTION.iterations}; with --resume, a new total)",
           integer("iterations", 0), session=True),
    Option("sample_ratio", _EVOLUTION.sample_ratio, "share of the population sampled per iteration",
           number("sample_ratio", 0.0, 1.0, low_open=True)),
    Option("top_k", _EVOLUTION.top_k, "parent drawn among the sample's top k", integer("top_k", 1)),
    Option("margin", _EVOLUTION.margin, "a child joins if JCM(child) - JCM(parent) >= margin", number("margin")),
    Option("retry_cap", _EVOLUTION.retry_cap, "mutations tried per iteration", integer("retry_cap", 1)),
    Option("gene_probability", _EVOLUTION.gene_probability, "chance each gene is redrawn",
           number("gene_probability", 0.0, 1.0, low_open=True)),
    Option("patience", None, "stop after this many iterations without a better best proxy (default: off, the "
           "paper's)", integer("patience", 1)),
    Option("seed_proxies", (), "comma list of autoprox_a, autoprox_p, genome strings or proxy JSON files put into "
           "the initial population (hand-crafted zoo proxies cannot be: they are refused with the reason)",
           proxies("seed_proxies")),
    Option("quiet", False, "no progress output", flag=True, session=True),
    Option("report", False, "write report.html (autoprox report) into the run directory at the end, and while it "
           "runs at checkpoints at most every 30 seconds", flag=True, session=True, commands=frozenset({"search"})),
    Option("kernels", DEFAULT_KERNELS, "kernels genomes are evaluated with: torch (default, bitwise the committed "
           "runs) or numpy (NumPy's tanh, exp and log, faster on this torch build; scores equal to a few float32 "
           "ulps, relative 1e-6 or less; docs/manual.md)", text("kernels"), choices=tuple(KERNEL_SETS)),
    Option("evaluation", None, "how genomes are evaluated: counted (search's default where it applies: once per "
           "distinct stored float16 value for all blocks at once, the exact path for what it does not cover; scores "
           "equal to float32 rounding, the same proxy as exact on the default search, twice as fast) or exact (entry "
           "by entry, bitwise the committed runs; the default of evaluate and transfer, and with --scheduler or "
           "--cache-precision float32; docs/manual.md)", text("evaluation"), choices=tuple(EVALUATIONS)),
    Option("genome", "template", "the paper's template trees, or free-form typed trees", text("genome"),
           group=_GENOME, choices=("template", "free")),
    Option("aggregation", "mean", "over blocks: mean (the paper), sum, wmean (depth-weighted mean), std, a comma "
           "list, or gene (all four, chosen by evolution)", aggregation, group=_GENOME),
    Option("operators", None, "comma list of the unary and binary operations genomes are built from (default: the "
           "paper's 24 + 4); a primitive of your own (autoprox.primitives.register_primitive) takes part only when named here",
           operator_list, group=_GENOME),
    Option("terminals", None, "comma list of the terminal sets genomes read (default: stats, the paper's eight "
           "statistics): " + "; ".join(f"{name}, {text}" for name, text in TERMINAL_SETS.describe()),
           terminal_list, group=_GENOME),
    Option("arch_terminals", False, "let genomes use architecture-level scalars (parameter count, MACs, depth, "
           "width, heads, MLP ratio and their logarithms): adds arch to --terminals", flag=True, group=_GENOME),
    Option("spread_terminals", False, "let genomes use the spread over the batch's samples (S1g, S2g, S3g: "
           "per-sample weight gradients; S4, S4g: the MLP hidden activation and its gradient), computed into extra "
           "cache entries (docs/method.md): adds spread to --terminals", flag=True, group=_GENOME),
    Option("cv_folds", 0, "cross-validated fitness over K folds of the search split (default 0: none)",
           integer("cv_folds", 0), group=_GENOME),
    Option("cv_mode", "mean", "combine fold JCMs by their mean or take the worst fold", text("cv_mode"),
           group=_GENOME, choices=("mean", "worst")),
    Option("parsimony", False, "at equal JCM the smaller proxy ranks higher", flag=True, group=_GENOME),
    Option("fitness", "jcm", "what the search maximises: jcm (the paper's), partial:BASE (per target, partial "
           "Kendall given BASE), or combined:BASE[:W] (per target, Kendall of W*rank(proxy)+(1-W)*rank(BASE), W "
           "default 0.5); BASE is params, coarse or blend, fitted on the search part only; each combined over "
           "targets with the JCM weights", text("fitness"), group=_GENOME),
    Option("restarts", 0, "after a stall (needs --patience), start again from a new random population, up to N "
           "times; the best proxy of every population counts (default 0: never, the paper's)",
           integer("restarts", 0), group=_GENOME),
    # statistics
    Option("input", "gaussian", "minibatch: gaussian (default), ones, or images:DIR (a folder of real images)",
           text("input"), group=_STATS, commands=STATS_COMMANDS),
    Option("batch_size", 8, "images per minibatch (default 8)", integer("batch_size", 1), group=_STATS,
           commands=STATS_COMMANDS),
    Option("stat_seeds", (0,), "initialisation seeds, comma separated; scores are averaged over them (default 0)",
           integer_list("stat_seeds"), group=_STATS, commands=STATS_COMMANDS),
    Option("per_target_stats", False, "one statistics set per target, with that dataset's class count (default: "
           "one 100-class set)", flag=True, group=_STATS, commands=STATS_COMMANDS),
    Option("cache_dir", None, "statistics cache (default $AUTOPROX_CACHE or ~/.cache/autoprox)", text("cache_dir"),
           group=_STATS, commands=STATS_COMMANDS, session=True),
    Option("cache_precision", "float16", "how statistics are stored (default float16 with a power-of-two scale)",
           text("cache_precision"), group=_STATS, choices=tuple(PRECISIONS), commands=STATS_COMMANDS),
    Option("workers", 2, "parallel processes for statistics; a search also scores architectures in this many "
           "threads (default 2; the results do not depend on it)", integer("workers", 1), group=_STATS,
           commands=STATS_COMMANDS, session=True),
    Option("scheduler", None, "run the parallel steps on a Dask cluster: local:N starts N worker processes here, "
           "HOST:PORT is a running 'dask scheduler' (needs the dask extra; default: --workers local processes)",
           text("scheduler"), group=_STATS, commands=STATS_COMMANDS, session=True, metavar="local:N|HOST:PORT"),
    Option("device", "cpu", "where networks run for statistics and zoo proxies (default cpu; an accelerator's "
           "statistics are cached apart: see BENCHMARKS.md for its tolerance)", text("device"), group=_STATS,
           choices=tuple(DEVICES), commands=STATS_COMMANDS),
)

#: The table by name.
OPTIONS: dict[str, Option] = {option.name: option for option in SEARCH_OPTIONS}


def options_for(command: str) -> list[Option]:
    """The options of the table that ``command`` takes, in table order."""
    return [option for option in SEARCH_OPTIONS if command in option.commands]


def option_values(given: Mapping[str, Any], command: str = "search") -> dict[str, Any]:
    """Every option of ``command``: the ``given`` ones checked and canonical, the others their defaults.

    ConfigError names an unknown name (with the closest known one) or a bad value.
    """
    known = {option.name: option for option in options_for(command)}
    unknown = [name for name in given if name not in known]
    if unknown:
        close = difflib.get_close_matches(unknown[0], list(known), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(f"unknown option {unknown[0]!r}{hint}; the options are those of "
                          f"'autoprox {command} --help' with '_' for '-'")
    return {name: option.value(given.get(name)) for name, option in known.items()}


def register_space_files(values: Mapping[str, Any]) -> list:
    """Register the ``space_file`` families; returns them (the first is the space of a ViT search)."""
    from autoprox.spaces.registry import REGISTRY

    return [REGISTRY.register_file(path) for path in values.get("space_file") or ()]


def bench_of(values: Mapping[str, Any]) -> str | tuple[str, ...]:
    """The benchmark file the options name (``bench``, else the space's released, packaged file), or the
    files of several (the spaces' first, then the benchmarks given): a search over all of them."""
    register_space_files(values)
    files = []
    for space in _several(values.get("space")):
        check_space(space)
        if space not in BENCH_FILE_NAMES:
            raise BenchmarkError(f"space {space!r} has no released benchmark file (only "
                                 f"{', '.join(BENCH_FILE_NAMES)} have); give --bench FILE")
        files.append(str(default_bench_path(space)))
    files += _several(values.get("bench"))
    if not files:
        raise BenchmarkError("give --space autoformer|pit or --bench FILE")
    return files[0] if len(files) == 1 else tuple(files)


def genome_space_of(values: Mapping[str, Any]) -> GenomeSpace:
    """The genome space the options ask for; ``arch_terminals`` and ``spread_terminals`` add their sets to
    ``terminals`` (default the paper's)."""
    operators = values.get("operators")
    return GenomeSpace(values["genome"], aggregation_names(values["aggregation"]), values.get("terminals"),
                       None if operators is None else tuple(operators),
                       arch_terminals=bool(values.get("arch_terminals")),
                       spread_terminals=bool(values.get("spread_terminals")))


def evolution_of(values: Mapping[str, Any]) -> EvolutionConfig:
    iterations = values["iterations"] if values["iterations"] is not None else _EVOLUTION.iterations
    return EvolutionConfig(population_size=values["population"], iterations=iterations,
                           sample_ratio=values["sample_ratio"], top_k=values["top_k"], margin=values["margin"],
                           retry_cap=values["retry_cap"], gene_probability=values["gene_probability"],
                           seed=values["seed"], parsimony=values["parsimony"], patience=values["patience"],
                           restarts=values["restarts"])


def seed_genomes(names: Sequence[str], free: bool = False) -> tuple[str, ...]:
    """Each seed proxy as the genome string it stands for (``autoprox_a``, a proxy file, a genome);
    ``free``: a search of free trees, which any tree may seed."""
    from autoprox.proxies.proxy import seed_genome

    return tuple(seed_genome(name, free=free) for name in names)


#: The evaluation a new ``search`` (and ``ProxySearch``) uses when none is given, where it applies.
SEARCH_EVALUATION = "counted"


def resolve_evaluation(values: Mapping[str, Any], default: str = SEARCH_EVALUATION) -> str:
    """The evaluation the options ask for: the one given, else ``default`` where it applies (counted evaluation
    counts float16 values in this process: not with ``--cache-precision float32`` or ``--scheduler``), else
    exact."""
    if values.get("evaluation") is not None:
        return values["evaluation"]
    if default == "counted" and values.get("cache_precision", "float16") == "float16" and not values.get("scheduler"):
        return "counted"
    return DEFAULT_EVALUATION


def settings_from_options(values: Mapping[str, Any], evaluation: str = SEARCH_EVALUATION) -> SearchSettings:
    """The :class:`SearchSettings` of a new search from the options' values (:func:`option_values`);
    ``evaluation``: the evaluation when none is given, where it applies (:func:`resolve_evaluation`; ``evaluate``
    and ``transfer`` keep exact)."""
    if values.get("device", "cpu") != "cpu":
        from autoprox.networks.statistics import resolve_device

        resolve_device(values["device"])  # no such device here: say so, rather than advise cache build on it
        raise ConfigError(f"search runs on the CPU only; build the statistics first with "
                          f"autoprox cache build --device {values['device']}")
    bench = bench_of(values)
    if values["bench_weights"] and isinstance(bench, str):
        raise ConfigError("--bench-weights weighs several benchmarks; give --space or --bench more than once")
    return SearchSettings(
        bench=bench, bench_weights=dict(values["bench_weights"]), targets=tuple(values["targets"]),
        weights=dict(values["weights"]),
        split_seed=values["split_seed"], search_fraction=values["search_fraction"], input=values["input"],
        batch_size=values["batch_size"], stat_seeds=tuple(values["stat_seeds"]),
        per_target_stats=values["per_target_stats"], cache_dir=values["cache_dir"],
        cache_precision=values["cache_precision"], workers=values["workers"],
        seed_proxies=seed_genomes(values["seed_proxies"], free=values["genome"] == "free"),
        evolution=evolution_of(values),
        genome=genome_space_of(values).to_json(), cv_folds=values["cv_folds"], cv_mode=values["cv_mode"],
        fitness=parse_fitness(values["fitness"]).name, kernels=values["kernels"],
        evaluation=resolve_evaluation(values, evaluation))


def options_from_settings(settings: SearchSettings, space: str | None = None) -> dict[str, Any]:
    """The option values that give ``settings`` (a run's recorded ones): the inverse of
    :func:`settings_from_options`, with ``space`` the run's recorded space."""
    evolution, genomes = settings.evolution, settings.genome_space
    all_aggregations = tuple(AGGREGATIONS)
    aggregation_value = "gene" if genomes.aggregations == all_aggregations and len(all_aggregations) > 1 else \
        ",".join(name.removeprefix("block_") for name in genomes.aggregations)
    values = {option.name: option.default for option in SEARCH_OPTIONS}
    values.update(
        space=None if settings.multi_space else space or None, bench=settings.bench,
        bench_weights=dict(settings.bench_weights), targets=tuple(settings.targets), weights=dict(settings.weights),
        split_seed=settings.split_seed, search_fraction=settings.search_fraction, seed=evolution.seed,
        population=evolution.population_size, iterations=evolution.iterations,
        sample_ratio=evolution.sample_ratio, top_k=evolution.top_k, margin=evolution.margin,
        retry_cap=evolution.retry_cap, gene_probability=evolution.gene_probability, patience=evolution.patience,
        seed_proxies=tuple(settings.seed_proxies), kernels=settings.kernels, evaluation=settings.evaluation,
        genome=genomes.kind, aggregation=aggregation_value, operators=genomes.operators, terminals=genomes.terminals,
        arch_terminals=genomes.arch_terminals, spread_terminals=genomes.spread_terminals, cv_folds=settings.cv_folds, cv_mode=settings.cv_mode,
        parsimony=evolution.parsimony, fitness=settings.fitness, restarts=evolution.restarts,
        input=settings.input, batch_size=settings.batch_size, stat_seeds=tuple(settings.stat_seeds),
        per_target_stats=settings.per_target_stats, cache_dir=settings.cache_dir,
        cache_precision=settings.cache_precision, workers=settings.workers)
    return values


def _comparable(name: str, value: Any, free: bool = False) -> Any:
    """A value as it is compared with a run's recorded one (``free``: the run searches free trees)."""
    if name == "seed_proxies":
        return seed_genomes(value, free=free)
    if name == "aggregation":
        return aggregation_names(value)
    if name == "fitness":
        return parse_fitness(value).name
    if isinstance(value, list):
        return tuple(value)
    return value


def resume_conflicts(given: Mapping[str, Any], settings: SearchSettings, space: str | None,
                     honoured: Iterable[str] = ()) -> list[str]:
    """For a resume: each given option, other than session options and ``honoured`` ones, whose value
    differs from the run's recorded setting, as ``--name VALUE (the run has VALUE)``."""
    recorded = options_from_settings(settings, space)
    skip = set(honoured) | {option.name for option in SEARCH_OPTIONS if option.session} | {"space_file"}
    if settings.multi_space:  # which spaces: the benchmarks' digests, checked on resume, say it
        skip.add("space")
    conflicts = []
    chosen = [name for name in _TERMINAL_OPTIONS if name in given and name not in skip]
    if chosen:  # --terminals and the flags that add to it are compared as the one set they make
        mine = _terminal_sets(given)
        theirs = settings.genome_space.terminals
        if mine != theirs:
            shown = " ".join(f"{OPTIONS[name].flag_name}" + ("" if OPTIONS[name].flag else f" {_show(given[name])}")
                             for name in chosen)
            conflicts.append(f"{shown} (the run has --terminals {_show(theirs)})")
        skip |= set(_TERMINAL_OPTIONS)
    for name in sorted(set(given) - skip):
        if name not in recorded:
            continue
        free = settings.genome_space.kind == "free"
        mine, theirs = _comparable(name, given[name], free), _comparable(name, recorded[name], free)
        if mine != theirs:
            conflicts.append(f"{OPTIONS[name].flag_name} {_show(mine)} (the run has {_show(theirs)})")
    return conflicts


#: The options that choose the terminal sets together.
_TERMINAL_OPTIONS = ("terminals", "arch_terminals", "spread_terminals")


def _terminal_sets(given: Mapping[str, Any]) -> tuple[str, ...]:
    """The terminal sets ``terminals`` and the flags ``arch_terminals``, ``spread_terminals`` make together."""
    chosen = list(given.get("terminals") or PAPER_TERMINALS)
    chosen += [name for name, flag in (("arch", "arch_terminals"), ("spread", "spread_terminals")) if given.get(flag)]
    return check_terminals(chosen)


def _show(value: Any) -> str:
    if isinstance(value, (tuple, list)):
        return ",".join(map(str, value)) or "none"
    if isinstance(value, dict):
        return ",".join(f"{k}={v:g}" for k, v in value.items()) or "none"
    return str(value)


__all__ = ["OPTIONS", "Option", "SEARCH_COMMANDS", "SEARCH_OPTIONS", "STATS_COMMANDS", "aggregation_names",
           "bench_of", "evolution_of", "genome_space_of", "option_values", "options_for", "options_from_settings",
           "register_space_files", "resolve_evaluation", "resume_conflicts", "seed_genomes", "settings_from_options"]
