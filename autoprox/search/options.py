"""The option table: every option of ``search`` (and of the commands that take its options), once.

Each :class:`Option` holds an option's name, default, help, the command-line group it
shows in, the one conversion that checks a value and brings it to its canonical form, and
where a search records it (:attr:`Option.setting`). Everything else is made from this table:
the command line's argparse options (``autoprox.cli.options``), the parameters of
``autoprox.api.ProxySearch`` (its signature), the fields ``config.json`` records and their
checks, and so the settings digest a resume is checked against
(:mod:`autoprox.search.settings`). A new option is one row here (:func:`register_option` adds
one at run time), plus the code that uses its value.

A conversion accepts what a user types (a string) and what a Python caller passes
(numbers, sequences, mappings), and raises :class:`~autoprox.core.errors.ConfigError`
with one line naming the option.
"""

from __future__ import annotations

import difflib
from dataclasses import Field, dataclass, field
from typing import Any, Callable, Mapping, Sequence

from autoprox.core.errors import BenchmarkError, ConfigError, FormulaError, GenomeError, ProxyError
from autoprox.data.benchmark import BENCH_FILE_NAMES, default_bench_path
from autoprox.data.cache import DEFAULT_STAT_SEEDS
from autoprox.data.entries import PRECISIONS
from autoprox.genome.terminals import TERMINAL_SETS
from autoprox.genome.tree import DEFAULT_KERNELS
from autoprox.genome.space import TEMPLATE, TREE_KINDS, GenomeSpace
from autoprox.networks.statistics import DEVICES, InputSpec
from autoprox.primitives import KERNEL_SETS
from autoprox.proxies.proxy import seed_genome
from autoprox.search.conversions import (
    DEFAULT_AGGREGATION_OPTION,
    Convert,
    aggregation,
    aggregation_help,
    aggregation_names,
    check_operator_list,
    input_text,
    integer,
    integer_list,
    number,
    path_text,
    one_or_several,
    operator_list,
    proxies,
    sequence,
    terminal_list,
    text,
    text_list,
    weights,
)
from autoprox.search.evaluators import DEFAULT_EVALUATION, EVALUATIONS
from autoprox.search.objectives import DEFAULT_FOLD_MODE, FOLD_MODES, fitness_help, parse_fitness

#: The commands that take every search option.
SEARCH_COMMANDS = frozenset({"search", "transfer", "evaluate"})
#: The commands that take the statistics options.
STATS_COMMANDS = SEARCH_COMMANDS | {"rank", "cache build", "vit-search"}


#: Marks an :attr:`Option.setting_default` not given: the setting's default is the option's.
_AS_DEFAULT = object()


@dataclass(frozen=True)
class Option:
    """One option: ``--name-with-dashes`` on the command line, ``name`` in Python.

    Attributes
    ----------
    name : str
        The Python name (argparse's ``dest``).
    default : object
        The value when the option is not given (``None``: "not given", resolved later).
    help : str or callable
        What it does, as ``--help`` shows it; a function of no arguments for a help that lists a registry's
        names, read when the command line is built (:attr:`help_text`).
    convert : callable, optional
        Checks a value (a string from the command line or a Python value) and returns it in
        canonical form; raises ConfigError. None for a flag.
    group : str
        The ``--help`` group (``""``: the command's own options).
    choices : sequence, optional
        The values allowed, shown by ``--help``: a tuple, or a registry's live names
        (:class:`~autoprox.core.registry.LiveNames`), read when a value is checked or the command line built.
    flag : bool
        A switch (``store_true``).
    repeat : bool
        May be given several times (``append``).
    session : bool
        Says where or how a run is computed, not what: may change when a run resumes. The rows with a
        :attr:`setting` among them are the session settings (:func:`session_options`), the one list the
        settings' digest leaves out, a resume compares and applies, and the engine takes.
    commands : frozenset of str
        The commands that take it.
    metavar : str, optional
        The placeholder ``--help`` shows.
    several : bool
        One value, or several when given more than once (``--space A --space B``): a string, or a
        tuple of them.
    required : bool
        The command line needs it (``rank --proxy``).
    setting : str, optional
        Where a search records the value in its settings (``config.json``): a field of
        :class:`~autoprox.search.settings.SearchSettings` (``targets``), a field of its evolution
        (``evolution.seed``), or any other name, which the settings then hold among their
        :attr:`~autoprox.search.settings.SearchSettings.options`. None: the option is no
        setting of its own (a session option, or one of those the benchmark or the genome space is
        made of).
    always_recorded : bool
        ``config.json`` records the setting even at its default (the settings of the first
        runs). Any later setting is recorded only where it differs from its default, so that the
        configurations and settings digests of earlier runs stay as they were.
    record : callable, optional
        The recorded value of the option's value, given every option's value (``seed_proxies``:
        the genome each stands for); default: the value itself.
    setting_default : object
        The setting's value where nothing sets it, when that is not :attr:`default`: the default of the setting's
        field of :class:`~autoprox.search.settings.SearchSettings` or of its evolution (those fields read it here:
        :func:`setting_field`), and the value a ``config.json`` without it stands for. Given only where the
        option's default is None, "resolved from the other options": ``iterations`` (200; on resume, the run's
        total), ``kernels`` and ``evaluation`` (torch's exact evaluation, what the runs before them used).
    resume_recorded : bool
        A session setting whose new value a resume records in ``config.json`` (the new total of iterations);
        the other session settings apply to the resumed session only.
    """

    name: str
    default: Any
    help: str | Callable[[], str]
    convert: Convert | None = None
    group: str = ""
    choices: Sequence | None = None
    flag: bool = False
    repeat: bool = False
    session: bool = False
    commands: frozenset = SEARCH_COMMANDS
    metavar: str | None = None
    several: bool = False
    required: bool = False
    setting: str | None = None
    always_recorded: bool = False
    record: Callable[[Any, Mapping[str, Any]], Any] | None = None
    setting_default: Any = _AS_DEFAULT
    resume_recorded: bool = False

    @property
    def field_default(self) -> Any:
        """The setting's default (:attr:`setting_default`, else :attr:`default`)."""
        return self.default if self.setting_default is _AS_DEFAULT else self.setting_default

    @property
    def flag_name(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def help_text(self) -> str:
        """The help as ``--help`` shows it now (a registry's names as registered when it is read)."""
        return self.help() if callable(self.help) else self.help

    def value(self, given: Any) -> Any:
        """``given`` checked and in canonical form (the default when it is None, or the default itself: the empty
        sequence, a tuple or a list alike, or mapping of an option whose default it is, as ``get_params`` gives it
        back)."""
        if given is None or self._is_empty_default(given):
            return self.default
        try:
            if self.flag:
                if not isinstance(given, bool):
                    raise ConfigError(f"expected True or False, got {given!r}"[:200])
                return given
            if self.repeat:
                items = [given] if isinstance(given, str) else list(sequence(given))
                return tuple(self.convert(item) if self.convert else item for item in items)
            value = self.convert(given) if self.convert else given
            if self.choices is not None and value not in self.choices:
                raise ConfigError(f"expected one of {', '.join(map(str, self.choices))}; got {value!r}"[:300])
            return value
        except ConfigError as exc:
            raise ConfigError(f"{self.name}: {exc}") from None

    def _is_empty_default(self, given: Any) -> bool:
        """Whether ``given`` is empty and the default is empty of its kind (a sequence, a mapping): ``targets=[]``
        is ``targets=()``, as any list option takes a list or a tuple alike."""
        if given or (self.default != () and self.default != {}):
            return False
        return isinstance(given, (tuple, list)) if isinstance(self.default, tuple) else isinstance(given, dict)

    def recorded_value(self, values: Mapping[str, Any]) -> Any:
        """The setting ``config.json`` records for this option, from every option's value (:func:`option_values`)."""
        value = values[self.name]
        return self.record(value, values) if self.record is not None else value

    def is_recorded(self, value: Any) -> bool:
        """Whether ``value``, read from ``config.json``, is one this option's setting can have: of the JSON type
        its conversion gives (:func:`recorded_as`), and one of its choices when it has them."""
        if self.flag:
            return isinstance(value, bool)
        check = getattr(self.convert, "recorded", None)
        if check is None or not check(value):
            return False
        return self.choices is None or value in self.choices


def _several(value: Any) -> list[str]:
    return [] if value is None else [value] if isinstance(value, str) else list(value)


def check_space(space: str) -> None:
    """ConfigError unless ``space`` is registered (after the ``space_file`` families are)."""
    from autoprox.data.proxy_tables import table_space_files, table_space_names
    from autoprox.spaces.registry import REGISTRY

    if space in REGISTRY.names():
        return
    if space in table_space_names():  # rank and evaluate read it by name; a search reads a table file
        path, targets = table_space_files(space)[0]
        raise ConfigError(f"{space!r} is a packaged proxy table, with no networks to compute statistics on: search its "
                          f"columns with autoprox search --bench {path} --targets {targets[0]} --out RUN")
    tables = [name for name in table_space_names() if name not in REGISTRY.names()]
    raise ConfigError(f"unknown space {space!r}; known: {', '.join(REGISTRY.names())}"
                      + (f" (and the proxy tables {', '.join(tables)}, searched through --bench)" if tables else ""))


def released_bench(space: str) -> str:
    """The released, packaged benchmark file of ``space``; BenchmarkError when it has none."""
    if space not in BENCH_FILE_NAMES:
        raise BenchmarkError(f"space {space!r} has no released benchmark file (only "
                             f"{', '.join(BENCH_FILE_NAMES)} have); give --bench FILE")
    return str(default_bench_path(space))


def check_cpu_only(device: str, command: str) -> None:
    """ConfigError unless ``device`` is the CPU, where ``command`` does not run on an accelerator (a device not
    here is named as such, rather than advised to build statistics on)."""
    if device != "cpu":
        from autoprox.networks.statistics import resolve_device

        resolve_device(device)
        raise ConfigError(f"{command} runs on the CPU only; build the statistics first with "
                          f"autoprox cache build --device {device}")


def _recorded_seeds(names: Sequence[str], values: Mapping[str, Any]) -> tuple[str, ...]:
    return seed_genomes(names, kind=values.get("genome") or OPTIONS["genome"].default)


def _recorded_iterations(iterations: int | None, values: Mapping[str, Any]) -> int:
    return OPTIONS["iterations"].field_default if iterations is None else iterations


def _recorded_fitness(name: str, values: Mapping[str, Any]) -> str:
    return parse_fitness(name).name


#: The paper's total of iterations: the default of ``--iterations``.
_ITERATIONS = 200
#: The most iterations a search takes: as many as a ViT search samples architectures at most
#: (``autoprox.apps.vitsearch.MAX_SAMPLES``), far above any use (the paper's 200); a typo's 10,000,000 would run
#: for days.
MAX_ITERATIONS = 1_000_000
#: The most genomes in a population: far above any use (the paper's 20); the initial population alone is evaluated
#: genome by genome, so a typo's 1,000,000,000 would run for years before its first iteration.
MAX_POPULATION = 100_000
#: The most local processes (``--workers``, ``evaluate --fold-workers``): above it a number is a typo (joblib
#: refuses over 1,000,000 with a traceback, and each process holds a Python and its imports).
MAX_WORKERS = 1_024
#: The most images per minibatch (``--batch-size``): the paper's is 8; the minibatch and every block's activations
#: on it are held at once, so 10^8 fails deep inside torch after the networks are built.
MAX_BATCH_SIZE = 1_024
_STATS = "statistics"
#: The minibatch a search uses unless told: InputSpec's defaults, stated there once.
_DEFAULT_MINIBATCH = InputSpec()
_GENOME = "genome space and selection (beyond the paper; defaults are the paper's)"

#: Every option of ``search``; ``transfer`` and ``evaluate`` take them all, and the
#: statistics group is taken by ``rank``, ``cache build`` and ``vit-search`` too.
SEARCH_OPTIONS: list[Option] = [
    Option("space", None, f"search space; picks its released benchmark file ({', '.join(BENCH_FILE_NAMES)}); "
           "repeated (or with --bench), one search over every space at once", one_or_several(), several=True),
    Option("space_file", (), "a declarative ViT family (JSON or TOML, docs/spaces.md) to register, so that a "
           "benchmark of it can be read or its architectures sampled; may be repeated", text(),
           repeat=True, metavar="FILE"),
    Option("bench", None, "benchmark file (default: the space's released file, found without flags); may be "
           "repeated: a search over several benchmarks, fitness the JCM over every (benchmark, target) pair",
           one_or_several(), session=True, several=True, setting="bench", always_recorded=True),
    Option("out", None, "run directory (default runs/<space>-seed<seed>)", path_text(), session=True),
    Option("resume", False, "continue the run in --out where it stopped, with its recorded settings; --iterations "
           "(a new total), --workers, --cache-dir, --scheduler and --bench (the same file elsewhere) are honoured, "
           "any other option must agree with the run", flag=True, session=True),
    Option("targets", (), "comma-separated targets (default: the KD columns plus imagenet_super; a proxy-table "
           "search: one, default the table's first accuracy column)", text_list(),
           setting="targets", always_recorded=True),
    Option("weights", {}, "JCM weights, e.g. c100_kd=2,flower_kd=1 (default equal)", weights(),
           setting="weights", always_recorded=True),
    Option("bench_weights", {}, "with several benchmarks: the weight of each by space, e.g. autoformer=1,pit=1 "
           "(default equal); a pair weighs its benchmark's weight times its target's", weights(),
           setting="bench_weights"),
    Option("split_seed", 0, "seed of the search/test split", integer(), setting="split_seed", always_recorded=True),
    Option("search_fraction", 0.6, "share of architectures searched on",
           number(0.0, 1.0, low_open=True), setting="search_fraction", always_recorded=True),
    Option("seed", 0, "seed of the evolution", integer(), setting="evolution.seed", always_recorded=True),
    Option("population", 20, "genomes in the population", integer(2, MAX_POPULATION),
           setting="evolution.population_size", always_recorded=True),
    Option("iterations", None, f"iterations (default {_ITERATIONS}; with --resume, a new total)",
           integer(0, MAX_ITERATIONS), session=True, setting="evolution.iterations", always_recorded=True,
           record=_recorded_iterations, setting_default=_ITERATIONS, resume_recorded=True),
    Option("sample_ratio", 0.5, "share of the population sampled per iteration",
           number(0.0, 1.0, low_open=True), setting="evolution.sample_ratio", always_recorded=True),
    Option("top_k", 3, "parent drawn among the sample's top k", integer(1),
           setting="evolution.top_k", always_recorded=True),
    Option("margin", 0.001, "a child joins if JCM(child) - JCM(parent) >= margin", number(),
           setting="evolution.margin", always_recorded=True),
    Option("retry_cap", 20, "mutations tried per iteration", integer(1),
           setting="evolution.retry_cap", always_recorded=True),
    Option("gene_probability", 0.5, "chance each gene is redrawn",
           number(0.0, 1.0, low_open=True), setting="evolution.gene_probability", always_recorded=True),
    Option("patience", None, "stop after this many iterations without a better best proxy (default: off, the "
           "paper's)", integer(1), setting="evolution.patience"),
    Option("seed_proxies", (), "comma list of autoprox_a, autoprox_p, genome strings or proxy JSON files put into "
           "the initial population (hand-crafted zoo proxies cannot be: they are refused with the reason)",
           proxies(), setting="seed_proxies", always_recorded=True, record=_recorded_seeds),
    Option("quiet", False, "no progress output", flag=True, session=True),
    Option("report", False, "write report.html (autoprox report) into the run directory at the end, and while it "
           "runs at checkpoints at most every 30 seconds", flag=True, session=True, commands=frozenset({"search"})),
    Option("kernels", None, "kernels genomes are evaluated with: numpy (the default with counted evaluation: "
           "NumPy's tanh, exp, log and mish, faster on torch's CPU builds; scores equal to a few float32 ulps, "
           "relative 1e-6 or less, the same proxy on the default search) or torch (the default with exact "
           "evaluation; bitwise the committed runs; docs/manual.md)", text(), choices=tuple(KERNEL_SETS),
           setting="kernels", setting_default=DEFAULT_KERNELS),
    Option("evaluation", None, "how genomes are evaluated: counted (search's default where it applies: once per "
           "distinct stored float16 value for all blocks at once, the exact path for what it does not cover; scores "
           "equal to float32 rounding, the same proxy as exact on the default search, twice as fast) or exact (entry "
           "by entry, bitwise the committed runs; the default of evaluate and transfer, and with --scheduler or "
           "--cache-precision float32; docs/manual.md)", text(), choices=EVALUATIONS, setting="evaluation",
           setting_default=DEFAULT_EVALUATION),
    Option("genome", TEMPLATE, "the paper's template trees, or free-form typed trees", text(),
           group=_GENOME, choices=TREE_KINDS),
    Option("aggregation", DEFAULT_AGGREGATION_OPTION, aggregation_help, aggregation, group=_GENOME),
    Option("operators", None, "comma list of the unary and binary operations genomes are built from (default: the "
           "paper's 24 + 4); a primitive of your own (autoprox.primitives.register_primitive) takes part only when named here",
           operator_list, group=_GENOME),
    Option("terminals", None, lambda: "comma list of the terminal sets genomes read (default: stats, the paper's "
           "eight statistics): " + "; ".join(f"{name}, {text}" for name, text in TERMINAL_SETS.describe()),
           terminal_list, group=_GENOME),
    Option("arch_terminals", False, "let genomes use architecture-level scalars (parameter count, MACs, depth, "
           "width, heads, MLP ratio and their logarithms): adds arch to --terminals", flag=True, group=_GENOME),
    Option("spread_terminals", False, "let genomes use the spread over the batch's samples (S1g, S2g, S3g: "
           "per-sample weight gradients; S4, S4g: the MLP hidden activation and its gradient), computed into extra "
           "cache entries (docs/method.md): adds spread to --terminals", flag=True, group=_GENOME),
    Option("cv_folds", 0, "cross-validated fitness over K folds of the search split (default 0: none)",
           integer(0), group=_GENOME, setting="cv_folds", always_recorded=True),
    Option("cv_mode", DEFAULT_FOLD_MODE, "combine fold JCMs by their mean or take the worst fold", text(),
           group=_GENOME, choices=FOLD_MODES, setting="cv_mode", always_recorded=True),
    Option("parsimony", False, "at equal JCM the smaller proxy ranks higher", flag=True, group=_GENOME,
           setting="evolution.parsimony", always_recorded=True),
    Option("fitness", "jcm", fitness_help, text(), group=_GENOME, setting="fitness", record=_recorded_fitness),
    Option("restarts", 0, "after a stall (needs --patience), start again from a new random population, up to N "
           "times; the best proxy of every population counts (default 0: never, the paper's)",
           integer(0), group=_GENOME, setting="evolution.restarts"),
    # statistics
    Option("input", _DEFAULT_MINIBATCH.kind, f"minibatch: gaussian, ones, or images:DIR (a folder of real images) "
           f"(default {_DEFAULT_MINIBATCH.kind})", input_text(), group=_STATS, commands=STATS_COMMANDS,
           setting="input", always_recorded=True),
    Option("batch_size", _DEFAULT_MINIBATCH.batch_size, f"images per minibatch (default {_DEFAULT_MINIBATCH.batch_size})",
           integer(1, MAX_BATCH_SIZE), group=_STATS, commands=STATS_COMMANDS, setting="batch_size",
           always_recorded=True),
    Option("stat_seeds", DEFAULT_STAT_SEEDS, "initialisation seeds, comma separated; scores are averaged over them "
           f"(default {','.join(map(str, DEFAULT_STAT_SEEDS))})", integer_list(0), group=_STATS,
           commands=STATS_COMMANDS, setting="stat_seeds", always_recorded=True),
    Option("per_target_stats", False, "one statistics set per target, with that dataset's class count (default: "
           "one 100-class set)", flag=True, group=_STATS, commands=STATS_COMMANDS,
           setting="per_target_stats", always_recorded=True),
    Option("cache_dir", None, "statistics cache (default $AUTOPROX_CACHE or ~/.cache/autoprox)", path_text(),
           group=_STATS, commands=STATS_COMMANDS, session=True, setting="cache_dir", always_recorded=True),
    Option("cache_precision", "float16", "how statistics are stored (default float16 with a power-of-two scale)",
           text(), group=_STATS, choices=tuple(PRECISIONS), commands=STATS_COMMANDS,
           setting="cache_precision", always_recorded=True),
    Option("workers", 2, "parallel processes for statistics; a search also scores architectures in this many "
           "threads (default 2; the results do not depend on it)", integer(1, MAX_WORKERS), group=_STATS,
           commands=STATS_COMMANDS, session=True, setting="workers", always_recorded=True),
    Option("scheduler", None, "run the parallel steps on a Dask cluster: local:N starts N worker processes here, "
           "HOST:PORT is a running 'dask scheduler' (needs the dask extra; default: --workers local processes)",
           text(), group=_STATS, commands=STATS_COMMANDS, session=True, metavar="local:N|HOST:PORT"),
    Option("device", "cpu", "where networks run for statistics and zoo proxies (default cpu; an accelerator's "
           "statistics are cached apart: see BENCHMARKS.md for its tolerance)", text(), group=_STATS,
           choices=tuple(DEVICES), commands=STATS_COMMANDS),
]

#: The table by name.
OPTIONS: dict[str, Option] = {option.name: option for option in SEARCH_OPTIONS}


def register_option(option: Option) -> None:
    """Add a row to the table (after the others): the command line, ``ProxySearch`` and the settings of a
    search made from then on take it. ConfigError when its name is taken."""
    if option.name in OPTIONS:
        raise ConfigError(f"option {option.name!r} exists already")
    SEARCH_OPTIONS.append(option)
    OPTIONS[option.name] = option


def unregister_option(name: str) -> None:
    """Remove the row :func:`register_option` added."""
    SEARCH_OPTIONS.remove(OPTIONS.pop(name))


def options_for(command: str) -> list[Option]:
    """The options of the table that ``command`` takes, in table order."""
    return [option for option in SEARCH_OPTIONS if command in option.commands]


def setting_options() -> list[Option]:
    """The options a search records in its settings (:attr:`Option.setting`), in table order."""
    return [option for option in SEARCH_OPTIONS if option.setting is not None]


def setting_option(setting: str) -> Option:
    """The row whose :attr:`Option.setting` is ``setting``; ConfigError when there is none."""
    for option in setting_options():
        if option.setting == setting:
            return option
    raise ConfigError(f"unknown setting {setting!r}")


def setting_field(setting: str) -> Field:
    """The dataclass field of the setting ``setting`` (``targets``, ``evolution.seed``), with its row's default
    (:attr:`Option.field_default`; a mapping copied for each record): how
    :class:`~autoprox.search.settings.SearchSettings` and :class:`~autoprox.search.evolution.EvolutionConfig` take
    their defaults from the table, so that each setting has one default."""
    default = setting_option(setting).field_default
    if isinstance(default, (dict, list)):
        return field(default_factory=lambda: type(default)(default))
    return field(default=default)


def session_options() -> list[Option]:
    """The session settings: the rows a resume may change that a search records (:attr:`Option.session` with an
    :attr:`Option.setting`), in table order: where the benchmark is, the total of iterations, the statistics cache
    and the workers. The settings' digest leaves them out, a resume neither compares nor refuses them, and the
    engine applies them to the resumed session."""
    return [option for option in SEARCH_OPTIONS if option.session and option.setting is not None]


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
        files.append(released_bench(space))
    files += _several(values.get("bench"))
    if not files:
        raise BenchmarkError("give --space autoformer|pit or --bench FILE")
    return files[0] if len(files) == 1 else tuple(files)


def genome_space_of(values: Mapping[str, Any]) -> GenomeSpace:
    """The genome space the options ask for; ``arch_terminals`` and ``spread_terminals`` add their sets to
    ``terminals`` (default the paper's)."""
    operators = values.get("operators")
    if operators is not None:
        check_operator_list(operators)
    return GenomeSpace(values["genome"], aggregation_names(values["aggregation"]), values.get("terminals"),
                       None if operators is None else tuple(operators),
                       arch_terminals=bool(values.get("arch_terminals")),
                       spread_terminals=bool(values.get("spread_terminals")))


def seed_genomes(names: Sequence[str], kind: str = TEMPLATE) -> tuple[str, ...]:
    """Each seed proxy as the genome string it stands for (``autoprox_a``, a proxy file, a genome), one a
    search of genome ``kind`` can start from (:func:`~autoprox.proxies.proxy.seed_genome`)."""
    genomes = []
    for name in names:
        try:
            genomes.append(seed_genome(name, kind=kind))
        except (ProxyError, GenomeError, FormulaError) as exc:  # the same class, naming the option
            raise type(exc)(f"seed_proxies: {exc}" if name in str(exc) else f"seed_proxies {name!r}: {exc}") from None
    return tuple(genomes)


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


#: The kernels counted evaluation uses when none are given: it is equal to float32 rounding, not bitwise, in any
#: case, and NumPy's element-wise kernels cut the default search's evolution by about a quarter (issue 32).
COUNTED_KERNELS = "numpy"


def resolve_kernels(values: Mapping[str, Any], evaluation: str) -> str:
    """The kernel set the options ask for: the one given, else :data:`COUNTED_KERNELS` under counted evaluation
    and torch's (bitwise the committed runs) under exact evaluation."""
    if values.get("kernels") is not None:
        return values["kernels"]
    return COUNTED_KERNELS if evaluation == "counted" else DEFAULT_KERNELS


__all__ = ["COUNTED_KERNELS", "MAX_BATCH_SIZE", "MAX_ITERATIONS", "MAX_WORKERS", "OPTIONS", "Option", "SEARCH_COMMANDS", "SEARCH_EVALUATION", "SEARCH_OPTIONS",
           "STATS_COMMANDS", "bench_of", "check_cpu_only", "genome_space_of", "option_values", "options_for",
           "register_option", "register_space_files", "released_bench", "resolve_evaluation", "resolve_kernels",
           "seed_genomes", "session_options", "setting_field", "setting_option", "setting_options",
           "unregister_option"]
