"""Options and helpers shared by several commands."""

from __future__ import annotations

import argparse
from typing import Any, Mapping, Sequence

from autoprox.cli.command_options import command_options
from autoprox.core.errors import BenchmarkError, ConfigError
from autoprox.data.benchmark import BENCH_FILE_NAMES, default_bench_path
from autoprox.data.cache import StatsPlan
from autoprox.proxies.recommended import is_recommended_name, split_recommended_name
from autoprox.search.conversions import Convert, integer, number, text_list
from autoprox.search.options import (
    OPTIONS,
    SEARCH_OPTIONS,
    Option,
    check_cpu_only,
    genome_space_of,
    option_values,
    options_for,
    register_space_files,
    released_bench,
)
from autoprox.search.resume import check_resume
from autoprox.search.settings import settings_from_options

#: The option table's group of the statistics options.
STATS_GROUP = "statistics"


class HelpFormatter(argparse.HelpFormatter):
    """Help that states each option's default once: appended only where the help text does not
    already say it, and never for options whose default means "not given"."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if ("default" in text or not action.option_strings or action.default in (None, False, (), [], {})
                or action.default is argparse.SUPPRESS):
            return text
        default = ",".join(map(str, action.default)) if isinstance(action.default, tuple) else "%(default)s"
        return f"{text} (default {default})" if text else f"default {default}"

    def _split_lines(self, text: str, width: int) -> list[str]:
        """As argparse's, but never inside a hyphenated name (``cv-pick-wide``, ``--cache-dir``)."""
        import re
        import textwrap

        return textwrap.wrap(re.sub(r"\s+", " ", text).strip(), width, break_on_hyphens=False)


#: Namespace attribute listing the options given on the command line (see :func:`record_given_options`).
GIVEN = "given_options"


def _recording(action_class: type) -> type:
    class Recording(action_class):
        def __call__(self, parser, namespace, values, option_string=None):
            super().__call__(parser, namespace, values, option_string)
            setattr(namespace, GIVEN, set(getattr(namespace, GIVEN, None) or ()) | {self.dest})

    Recording.__name__ = f"Recording{action_class.__name__}"
    return Recording


def record_given_options(parser: argparse.ArgumentParser) -> None:
    """Make ``parser`` note in ``args.given_options`` which options were given (not defaulted).

    Call before adding the options. ``--resume`` needs it: an option given with the value
    its default has still has to agree with the run's recorded setting.
    """
    store, store_true = _recording(argparse._StoreAction), _recording(argparse._StoreTrueAction)
    parser.register("action", None, store)
    parser.register("action", "store", store)
    parser.register("action", "store_true", store_true)


#: Namespace attribute listing every ``--space`` and ``--bench`` given, in order: ``("space", NAME)`` or
#: ``("bench", FILE)`` (a search over several benchmarks repeats them).
BENCHES_GIVEN = "benches_given"


class _RepeatableStore(argparse._StoreAction):
    """``--space`` / ``--bench``: the first value given in ``dest`` (what a one-benchmark command reads),
    every value in order in :data:`BENCHES_GIVEN`."""

    def __call__(self, parser, namespace, values, option_string=None):
        given = list(getattr(namespace, BENCHES_GIVEN, None) or ())
        if not any(kind == self.dest for kind, _ in given):
            setattr(namespace, self.dest, values)
        setattr(namespace, BENCHES_GIVEN, given + [(self.dest, values)])


def benches_given(args: argparse.Namespace) -> list[tuple[str, str]]:
    """Every ``--space`` and ``--bench`` given, in order (:data:`BENCHES_GIVEN`)."""
    return list(getattr(args, BENCHES_GIVEN, None) or ())


def given_options(args: argparse.Namespace) -> set[str]:
    return set(getattr(args, GIVEN, None) or ())


def refuse_unread_options(args: argparse.Namespace, reads: frozenset[str], what: str) -> None:
    """Refuse in one line an option given on the command line that ``what`` (e.g. "a proxy-table search") does
    not read: ``reads`` holds the names (``dest``) of the options it reads."""
    extra = sorted(given_options(args) - reads)
    if extra:
        raise ConfigError(f"--{extra[0].replace('_', '-')} does not apply to {what} (it reads "
                          f"{', '.join('--' + o.replace('_', '-') for o in sorted(reads))})")


def add_table_option(parser, option: Option, help: str | None = None) -> None:
    """Add one option of the option table (:mod:`autoprox.search.options`) to ``parser``."""
    kwargs: dict[str, Any] = {"help": help or option.help_text, "default": option.default}
    if option.required:
        kwargs["required"] = True
    if option.flag:
        kwargs["action"] = "store_true"
    elif option.several:  # the first value in dest (what one-benchmark commands read), all of them in order
        kwargs["action"] = _recording(_RepeatableStore)
        kwargs["type"] = argparse_type(option.convert, option.name)
    else:
        kwargs["type"] = argparse_type(option.convert, option.name)
        if option.repeat:
            kwargs["action"], kwargs["default"] = "append", list(option.default)
        if option.choices is not None:  # a registry's names as they are now
            kwargs["choices"] = tuple(option.choices)
        if option.metavar:
            kwargs["metavar"] = option.metavar
    parser.add_argument(option.flag_name, dest=option.name, **kwargs)


def argparse_type(convert: Convert, name: str):
    """An argparse ``type`` from a conversion of the option table (:mod:`autoprox.search.conversions`): its
    ConfigError is argparse's usage error."""
    def parse(text: str):
        try:
            return convert(text)
        except ConfigError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = name  # argparse names the type in its "invalid value" message
    return parse


#: A float option: NaN and infinities are refused (``--margin nan`` would let no child ever join).
finite_float = argparse_type(number(), "finite_float")
#: A float option of at least 0 (a time allowed: ``--timeout``).
non_negative_float = argparse_type(number(0), "non_negative_float")
#: A count of at least 1 (``--rank``, ``--classes``).
positive_int = argparse_type(integer(1), "positive_int")
#: A comma list of strings, as a tuple.
str_list = argparse_type(text_list(), "str_list")


def _add_group(parser: argparse.ArgumentParser, options: Sequence[Option], overrides: Mapping[str, str]) -> None:
    groups: dict[str, Any] = {}
    for option in options:
        target = parser if not option.group else groups.setdefault(option.group, parser.add_argument_group(option.group))
        add_table_option(target, option, overrides.get(option.name))


def add_command_options(parser: argparse.ArgumentParser, command: str, leave_out: Sequence[str] = (),
                        overrides: Mapping[str, str] | None = None) -> None:
    """``command``'s own options (:mod:`autoprox.cli.command_options`), in their ``--help`` groups; those named in
    ``leave_out`` are not offered (they keep their defaults), ``overrides`` replaces an option's help."""
    options = command_options(command)
    unknown = set(leave_out) - {o.name for o in options}
    if unknown:
        raise ValueError(f"{command} has no options {sorted(unknown)}")
    parser.set_defaults(**{o.name: o.default for o in options if o.name in leave_out})
    _add_group(parser, [o for o in options if o.name not in leave_out], overrides or {})


def add_stats_options(parser: argparse.ArgumentParser) -> None:
    """The statistics group of the option table."""
    _add_group(parser, [o for o in SEARCH_OPTIONS if o.group == STATS_GROUP], {})


def cpu_only(args: argparse.Namespace, command: str) -> None:
    """Refuse ``--device`` other than cpu where a command does not take it yet."""
    check_cpu_only(getattr(args, "device", "cpu"), command)


def add_space_file_option(parser: argparse.ArgumentParser) -> None:
    add_table_option(parser, OPTIONS["space_file"])


def use_space_files(args: argparse.Namespace) -> list:
    """Register the ``--space-file`` families; returns them (the first is the space of a ViT search)."""
    return register_space_files(vars(args))


def run_folders_as_best(args: argparse.Namespace) -> None:
    """``--proxy RUN``: a run directory stands for its ``best.json``, each part of a comma list alike
    (:func:`~autoprox.search.rundir.run_folder_proxy`, as the Python API reads a run directory); the list is
    written back as :func:`~autoprox.proxies.proxy.split_proxy_list` reads it, so ``params,`` is ``params``."""
    from autoprox.proxies.proxy_input import split_proxy_list
    from autoprox.search.rundir import run_folder_proxy

    text = getattr(args, "proxy", None)
    if not isinstance(text, str) or not text.strip():
        return
    parts = split_proxy_list(text)
    resolved = ",".join(run_folder_proxy(part, "--proxy ") for part in parts)
    if parts and resolved != text:  # also a stray comma or space: 'params,' is the one proxy params
        args.proxy = resolved


def refuse_proxy_list(text: str, command: str, instead: str, option: str | None = "--proxy") -> None:
    """ConfigError for a comma list of proxies where ``command`` takes one (``vit-search --proxy params,flops``,
    ``export params,nwot``), which was read as one genome: 'not a genome' and the genome's list of every token,
    nothing about the comma. Genome strings keep their commas inside their calls. ``instead``: what to do with
    the list; ``option``: the option ``text`` was given with (None: a positional argument)."""
    from autoprox.proxies.proxy_input import split_proxy_list

    parts = split_proxy_list(text)
    if len(parts) > 1:
        given = f"{option} {text}" if option else text
        raise ConfigError(f"{given}: {command} takes one proxy, not a list of {len(parts)}; {instead}")


def check_image_input(args: argparse.Namespace) -> None:
    """``--input images:DIR`` names a folder of images, checked before the command writes anything: a search,
    protocol, transfer study or ViT search that found no images there would otherwise leave its folder behind,
    and the corrected command would be refused as one continuing another run."""
    from autoprox.networks.statistics import InputSpec

    text = getattr(args, "input", None)
    if isinstance(text, str) and text.startswith("images:"):
        InputSpec.parse(text).check_images()


def bench_path(args: argparse.Namespace) -> str:
    use_space_files(args)
    if args.bench:
        return args.bench
    if getattr(args, "space", None):
        return released_bench(args.space)
    proxy = getattr(args, "proxy", None)
    if isinstance(proxy, str) and is_recommended_name(proxy) and "," not in proxy:
        space = split_recommended_name(proxy)[0]  # a recommended proxy names its space
        if space in BENCH_FILE_NAMES:
            return str(default_bench_path(space))
    raise BenchmarkError("give --bench FILE (or --space to use the released file for that space)")


def add_search_options(search: argparse.ArgumentParser, command: str = "search", out_help: str | None = None,
                       resume_help: str | None = None) -> None:
    """The option table's options of ``command``: ``search``, ``transfer`` and ``evaluate`` take every search option
    (``out_help`` and ``resume_help``: what ``--out`` and ``--resume`` mean for a command other than ``search``)."""
    record_given_options(search)
    overrides = {name: text for name, text in (("out", out_help), ("resume", resume_help)) if text}
    _add_group(search, options_for(command), overrides)


def table_values(args: argparse.Namespace, command: str = "search") -> dict[str, Any]:
    """The option table's values of ``command`` in ``args`` (what ``ProxySearch`` takes as parameters);
    ``--space`` and ``--bench`` given several times give a tuple of every value."""
    given = {o.name: getattr(args, o.name) for o in options_for(command) if hasattr(args, o.name)}
    for name in ("space", "bench"):
        values = [value for kind, value in benches_given(args) if kind == name]
        if len(values) > 1:
            given[name] = tuple(values)
    return option_values(given, command)


def add_spread_option(parser, help: str | None = None) -> None:
    """``--spread-terminals`` of the option table: the spread statistics S1g..S4g (extra cache entries)."""
    add_table_option(parser, OPTIONS["spread_terminals"], help)


def plan_from_args(args: argparse.Namespace, targets: Sequence[str]) -> StatsPlan:
    """The statistics plan the statistics options ask for (with ``--spread-terminals``, its extra entries too)."""
    extras = ("spread",) if getattr(args, "spread_terminals", False) else ()
    return StatsPlan.from_options(args.input, args.batch_size, args.stat_seeds, targets, args.per_target_stats,
                                  getattr(args, "device", "cpu"), extras)


def _explicit_search_part(run_split: dict, size: int) -> list[int] | None:
    """A run's recorded search part when its seed and fraction do not give it (an evaluation fold's
    explicit split) and it indexes a benchmark of ``size`` architectures; else None."""
    from autoprox.data.benchmark import split_benchmark

    search, test = run_split.get("search"), run_split.get("test")
    if not isinstance(search, list) or not isinstance(test, list) or len(search) + len(test) != size or not test:
        return None
    seeded = split_benchmark(size, run_split.get("seed", 0), run_split.get("search_fraction", 0.6))
    return None if sorted(search) == list(seeded.search) else sorted(search)


def usable_targets(bench, candidates: Sequence[str], indices: Sequence[int], part: str) -> tuple[str, ...]:
    """The ``candidates`` that can rank the architectures at ``indices``; each one left out is named in a
    warning, and BenchmarkError says why when none is left."""
    import warnings

    kept, problems = [], []
    for target in candidates:
        problem = bench.measured_problem(target, indices, part)
        if problem:
            problems.append(problem)
            warnings.warn(f"{problem}; left out", stacklevel=2)
        else:
            kept.append(target)
    if not kept:
        raise BenchmarkError(f"no target can rank the architectures of {part}: {problems[0] if problems else 'none given'}")
    return tuple(kept)


def evaluation_context(args: argparse.Namespace, proxy_split: dict | None = None, all_targets: bool = False,
                       part: str = "all", bench=None):
    """The :class:`~autoprox.search.context.RunContext` of ``rank``: the benchmark, targets, split and statistics
    the options ask for. The split defaults to the proxy's run's (``proxy_split``), else seed 0 and 0.6.

    Targets given with ``--targets`` must each rank the architectures of ``part``; default targets that
    cannot (no measured value, one constant value) are left out with a warning.
    """
    from autoprox.data.benchmark import load_benchmark
    from autoprox.search.context import RunContext, settings_split
    from autoprox.search.settings import SearchSettings

    run_split = proxy_split or {}
    cpu_only(args, "rank --proxy")
    bench = bench if bench is not None else load_benchmark(bench_path(args))
    split_seed = args.split_seed if args.split_seed is not None else run_split.get("seed", 0)
    fraction = args.search_fraction if args.search_fraction is not None else run_split.get("search_fraction", 0.6)
    explicit = _explicit_search_part(run_split, len(bench)) if args.split_seed is None \
        and args.search_fraction is None else None
    if args.targets:
        targets = tuple(args.targets)
    else:
        if explicit:
            chosen = set(explicit)
            indices = {"search": explicit, "test": [i for i in range(len(bench)) if i not in chosen],
                       "all": list(range(len(bench)))}[part]
        else:
            indices = settings_split(SearchSettings(bench="", split_seed=split_seed, search_fraction=fraction),
                                     len(bench)).indices(part, len(bench))
        if not indices:
            raise ConfigError(f"{PART_NAMES[part]} is empty: the run searched on every architecture; "
                              "use --split search or --split all")
        targets = usable_targets(bench, bench.targets if all_targets else bench.default_targets(), indices,
                                 PART_NAMES[part])
    settings = SearchSettings(
        bench=bench_path(args), targets=targets, split_indices=tuple(explicit) if explicit else None,
        split_seed=split_seed, search_fraction=fraction,
        input=args.input, batch_size=args.batch_size, stat_seeds=tuple(args.stat_seeds),
        per_target_stats=args.per_target_stats, cache_dir=args.cache_dir, cache_precision=args.cache_precision,
        workers=args.workers)
    return RunContext.from_settings(settings, bench=bench, measured_on=part)


#: How messages name the parts of a benchmark.
PART_NAMES = {"search": "the search split", "test": "the test split", "all": "all architectures"}


def genome_space(args: argparse.Namespace):
    return genome_space_of(table_values(args))


def search_settings(args: argparse.Namespace, evaluation: str = "counted"):
    """SearchSettings of a new search (or transfer study, protocol) from the command line; ``evaluation``: the
    evaluation where none is given and it applies (``evaluate`` and ``transfer`` keep exact)."""
    refuse_proxy_tables(args)
    return settings_from_options(table_values(args), evaluation)


def refuse_proxy_tables(args: argparse.Namespace) -> None:
    """Refuse in one line a proxy table given where ``args.command`` needs ViT benchmarks (a search over several
    benchmarks, ``transfer``, ``evaluate``'s outer folds), before the ViT-benchmark parse says it lacks ``arch``."""
    from autoprox.data.proxy_tables import is_proxy_table

    given = benches_given(args)
    table = next((value for kind, value in given if kind == "bench" and is_proxy_table(value)), None)
    if table is None:
        return
    command = getattr(args, "command", "search")
    if command == "search":
        raise BenchmarkError(f"{table} is a proxy table: a table search takes one --bench and no --space "
                             f"(autoprox search --bench {table} --targets T --out RUN)")
    if command == "evaluate":
        raise BenchmarkError(f"{table} is a proxy table: evaluate's outer folds take ViT benchmarks; proxy tables "
                             "take --few-labels or --leave-space-out --rank-formulas")
    raise BenchmarkError(f"{table} is a proxy table: {command} takes ViT benchmarks, not proxy tables")


def check_resume_options(args: argparse.Namespace, settings, space: str, run: str,
                         honoured: frozenset[str]) -> None:
    """ConfigError naming every option given to a ``--resume`` that differs from the run's recorded setting.

    Session options of the table (where the benchmark and cache are, workers, scheduler, the new
    total of iterations) and ``honoured`` ones are the caller's to apply; an option given with the
    run's own value is accepted. ``settings``: the run's recorded :class:`SearchSettings`.
    """
    values = table_values(args)
    check_resume({name: values[name] for name in given_options(args) if name in values}, settings, space, run,
                 honoured)


def executor_from_args(args: argparse.Namespace):
    """Where the command's parallel steps run: ``--scheduler``, else ``--workers`` local processes.
    Use it as a context manager: a local Dask cluster it started is closed after."""
    from autoprox.core.parallel import make_executor

    return make_executor(getattr(args, "scheduler", None), args.workers)
