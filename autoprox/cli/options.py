"""Options and helpers shared by several commands."""

from __future__ import annotations

import argparse
import math
from typing import Any, Sequence

from autoprox.core.errors import BenchmarkError, ConfigError
from autoprox.data.benchmark import BENCH_FILE_NAMES, default_bench_path
from autoprox.data.cache import PRECISIONS, StatsPlan
from autoprox.genome.counted import DEFAULT_EVALUATION, EVALUATIONS
from autoprox.genome.tree import DEFAULT_KERNELS
from autoprox.networks.statistics import DEVICES
from autoprox.proxies.proxy import seed_genome, split_proxy_list
from autoprox.proxies.recommended import is_recommended_name, split_recommended_name
from autoprox.search.evolution import EvolutionConfig
from autoprox.search.fitness import parse_fitness
from autoprox.spaces.registry import REGISTRY
from primitives import KERNEL_SETS


def int_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def finite_float(text: str) -> float:
    """A float option: NaN and infinities are refused (``--margin nan`` would let no child ever join)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


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


def given_options(args: argparse.Namespace) -> set[str]:
    return set(getattr(args, GIVEN, None) or ())


def str_list(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def proxy_list(text: str) -> tuple[str, ...]:
    """Comma list of proxies, split at top-level commas only (genome strings hold commas)."""
    return tuple(split_proxy_list(text))


def weights_option(text: str) -> dict[str, float]:
    weights = {}
    for part in str_list(text):
        name, _, value = part.partition("=")
        try:
            weights[name] = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"weights look like c100_kd=1,flower_kd=0.5; got {part!r}") from None
        if not math.isfinite(weights[name]) or weights[name] < 0:
            raise argparse.ArgumentTypeError(f"a weight must be a finite number, at least 0; got {part!r}")
    return weights


def add_stats_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("statistics")
    group.add_argument("--input", default="gaussian",
                       help="minibatch: gaussian (default), ones, or images:DIR (a folder of real images)")
    group.add_argument("--batch-size", type=int, default=8, help="images per minibatch (default 8)")
    group.add_argument("--stat-seeds", type=int_list, default=(0,),
                       help="initialisation seeds, comma separated; scores are averaged over them (default 0)")
    group.add_argument("--per-target-stats", action="store_true",
                       help="one statistics set per target, with that dataset's class count (default: one 100-class set)")
    group.add_argument("--cache-dir", default=None, help="statistics cache (default $AUTOPROX_CACHE or ~/.cache/autoprox)")
    group.add_argument("--cache-precision", choices=PRECISIONS, default="float16",
                       help="how statistics are stored (default float16 with a power-of-two scale)")
    group.add_argument("--workers", type=int, default=2,
                       help="parallel processes for statistics; a search also scores architectures in this "
                            "many threads (default 2; the results do not depend on it)")
    group.add_argument("--scheduler", default=None, metavar="local:N|HOST:PORT",
                       help="run the parallel steps on a Dask cluster: local:N starts N worker processes here, "
                            "HOST:PORT is a running 'dask scheduler' (needs the dask extra; default: --workers "
                            "local processes)")
    group.add_argument("--device", choices=DEVICES, default="cpu",
                       help="where networks run for statistics and zoo proxies (default cpu; an accelerator's "
                            "statistics are cached apart: see BENCHMARKS.md for its tolerance)")


def cpu_only(args: argparse.Namespace, command: str) -> None:
    """Refuse ``--device`` other than cpu where a command does not take it yet."""
    if getattr(args, "device", "cpu") != "cpu":
        from autoprox.networks.statistics import resolve_device

        resolve_device(args.device)  # no such device here: say so, rather than advise cache build on it
        raise ConfigError(f"{command} runs on the CPU only; build the statistics first with "
                          f"autoprox cache build --device {args.device}")


def space_choices() -> list[str]:
    """Every registered space (built-in, plug-ins): the choices of ``--space``."""
    return REGISTRY.names()


def add_space_file_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--space-file", metavar="FILE", action="append", default=[],
                        help="a declarative ViT family (JSON or TOML, docs/spaces.md) to register, so that a "
                             "benchmark of it can be read or its architectures sampled; may be repeated")


def use_space_files(args: argparse.Namespace) -> list:
    """Register the ``--space-file`` families; returns them (the first is the space of a ViT search)."""
    return [REGISTRY.register_file(path) for path in getattr(args, "space_file", None) or []]


def bench_path(args: argparse.Namespace) -> str:
    use_space_files(args)
    if args.bench:
        return args.bench
    if getattr(args, "space", None):
        if args.space not in BENCH_FILE_NAMES:
            raise BenchmarkError(f"space {args.space!r} has no released benchmark file (only "
                                 f"{', '.join(BENCH_FILE_NAMES)} have); give --bench FILE")
        return str(default_bench_path(args.space))
    proxy = getattr(args, "proxy", None)
    if isinstance(proxy, str) and is_recommended_name(proxy) and "," not in proxy:
        space = split_recommended_name(proxy)[0]  # a recommended proxy names its space
        if space in BENCH_FILE_NAMES:
            return str(default_bench_path(space))
    raise BenchmarkError("give --bench FILE (or --space to use the released file for that space)")


def add_search_options(search: argparse.ArgumentParser, out_help: str, resume_help: str) -> None:
    """Options of ``search``, shared by ``transfer`` (which runs one search per held-out target)."""
    record_given_options(search)
    search.add_argument("--space", choices=space_choices(),
                        help=f"search space; picks its released benchmark file ({', '.join(BENCH_FILE_NAMES)})")
    add_space_file_option(search)
    search.add_argument("--bench", help="benchmark file (default: the space's released file, found without flags)")
    search.add_argument("--out", help=out_help)
    search.add_argument("--resume", action="store_true", help=resume_help)
    search.add_argument("--targets", type=str_list, default=(),
                        help="comma-separated targets (default: the KD columns plus imagenet_super)")
    search.add_argument("--weights", type=weights_option, default={}, help="JCM weights, e.g. c100_kd=2,flower_kd=1 (default equal)")
    search.add_argument("--split-seed", type=int, default=0, help="seed of the search/test split")
    search.add_argument("--search-fraction", type=finite_float, default=0.6, help="share of architectures searched on")
    search.add_argument("--seed", type=int, default=0, help="seed of the evolution")
    defaults = EvolutionConfig()
    search.add_argument("--population", type=int, default=defaults.population_size, help="genomes in the population")
    search.add_argument("--iterations", type=int, default=None,
                        help=f"iterations (default {defaults.iterations}; with --resume, a new total)")
    search.add_argument("--sample-ratio", type=finite_float, default=defaults.sample_ratio,
                        help="share of the population sampled per iteration")
    search.add_argument("--top-k", type=int, default=defaults.top_k, help="parent drawn among the sample's top k")
    search.add_argument("--margin", type=finite_float, default=defaults.margin,
                        help="a child joins if JCM(child) - JCM(parent) >= margin")
    search.add_argument("--retry-cap", type=int, default=defaults.retry_cap, help="mutations tried per iteration")
    search.add_argument("--gene-probability", type=finite_float, default=defaults.gene_probability,
                        help="chance each gene is redrawn")
    search.add_argument("--patience", type=int, default=None,
                        help="stop after this many iterations without a better best proxy (default: off, the paper's)")
    search.add_argument("--seed-proxies", type=proxy_list, default=(),
                        help="comma list of autoprox_a, autoprox_p, genome strings or proxy JSON files put into the "
                             "initial population (hand-crafted zoo proxies cannot be: they are refused with the reason)")
    search.add_argument("--quiet", action="store_true", help="no progress output")
    search.add_argument("--kernels", choices=tuple(KERNEL_SETS), default=DEFAULT_KERNELS,
                        help="kernels genomes are evaluated with: torch (default, bitwise the committed runs) or "
                             "numpy (NumPy's tanh, exp and log, faster on this torch build; scores equal to a few "
                             "float32 ulps, relative 1e-6 or less; docs/manual.md)")
    search.add_argument("--evaluation", choices=EVALUATIONS, default=DEFAULT_EVALUATION,
                        help="how genomes are evaluated: exact (default, entry by entry, bitwise the committed runs) "
                             "or counted (once per distinct stored float16 value for all blocks at once, the exact "
                             "path for what it does not cover; scores equal to float32 rounding; docs/manual.md)")
    genome = search.add_argument_group("genome space and selection (beyond the paper; defaults are the paper's)")
    genome.add_argument("--genome", choices=("template", "free"), default="template",
                        help="the paper's template trees, or free-form typed trees")
    genome.add_argument("--aggregation", default="mean",
                        help="over blocks: mean (the paper), sum, wmean (depth-weighted mean), std, "
                             "a comma list, or gene (all four, chosen by evolution)")
    genome.add_argument("--arch-terminals", action="store_true",
                        help="let genomes use architecture-level scalars (parameter count, MACs, depth, width, "
                             "heads, MLP ratio and their logarithms)")
    add_spread_option(genome)
    genome.add_argument("--cv-folds", type=int, default=0,
                        help="cross-validated fitness over K folds of the search split (default 0: none)")
    genome.add_argument("--cv-mode", choices=("mean", "worst"), default="mean",
                        help="combine fold JCMs by their mean or take the worst fold")
    genome.add_argument("--parsimony", action="store_true", help="at equal JCM the smaller proxy ranks higher")
    genome.add_argument("--fitness", default="jcm",
                        help="what the search maximises: jcm (the paper's), partial:BASE (per target, partial Kendall "
                             "given BASE), or combined:BASE[:W] (per target, Kendall of W*rank(proxy)+(1-W)*rank(BASE), "
                             "W default 0.5); BASE is params, coarse or blend, fitted on the search part only; "
                             "each combined over targets with the JCM weights")
    genome.add_argument("--restarts", type=int, default=0,
                        help="after a stall (needs --patience), start again from a new random population, up to "
                             "N times; the best proxy of every population counts (default 0: never, the paper's)")
    add_stats_options(search)


def add_spread_option(parser, help: str | None = None) -> None:
    """``--spread-terminals``: the spread statistics S1g..S4g (extra cache entries) as genome inputs."""
    parser.add_argument("--spread-terminals", action="store_true", help=help or (
        "let genomes use the spread over the batch's samples (S1g, S2g, S3g: per-sample weight gradients; S4, "
        "S4g: the MLP hidden activation and its gradient), computed into extra cache entries (docs/method.md)"))


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
    from autoprox.genome.tree import AGGREGATIONS, GenomeSpace

    names = list(AGGREGATIONS) if args.aggregation == "gene" else [
        a if a.startswith("block_") else f"block_{a}" for a in str_list(args.aggregation)]
    return GenomeSpace(args.genome, tuple(names), args.arch_terminals, getattr(args, "spread_terminals", False))


def search_settings(args: argparse.Namespace):
    """SearchSettings of a new search (or transfer study) from the command line."""
    from autoprox.search.settings import SearchSettings

    if not args.space and not args.bench:
        raise BenchmarkError("give --space autoformer|pit or --bench FILE")
    cpu_only(args, "search")
    evolution = EvolutionConfig(
        population_size=args.population,
        iterations=args.iterations if args.iterations is not None else EvolutionConfig().iterations,
        sample_ratio=args.sample_ratio,
        top_k=args.top_k, margin=args.margin, retry_cap=args.retry_cap,
        gene_probability=args.gene_probability, seed=args.seed, parsimony=args.parsimony,
        patience=args.patience, restarts=args.restarts,
    )
    space = genome_space(args)
    seed_genomes = tuple(seed_genome(p, free=args.genome == "free") for p in args.seed_proxies)
    return SearchSettings(
        bench=bench_path(args), targets=tuple(args.targets), weights=args.weights, split_seed=args.split_seed,
        search_fraction=args.search_fraction, input=args.input, batch_size=args.batch_size,
        stat_seeds=tuple(args.stat_seeds), per_target_stats=args.per_target_stats, cache_dir=args.cache_dir,
        cache_precision=args.cache_precision, workers=args.workers, seed_proxies=seed_genomes,
        evolution=evolution, genome=space.to_json(), cv_folds=args.cv_folds, cv_mode=args.cv_mode,
        fitness=parse_fitness(args.fitness).name, kernels=args.kernels, evaluation=args.evaluation,
    )


def _given_and_recorded(dest: str, args: argparse.Namespace, settings, space: str) -> tuple[Any, Any]:
    """An option's value as given and the run's recorded setting it stands for."""
    evolution, genomes = settings.evolution, settings.genome_space
    evolution_fields = {"seed": "seed", "population": "population_size", "sample_ratio": "sample_ratio",
                        "top_k": "top_k", "margin": "margin", "retry_cap": "retry_cap",
                        "gene_probability": "gene_probability", "parsimony": "parsimony", "iterations": "iterations",
                        "patience": "patience", "restarts": "restarts"}
    if dest in evolution_fields:
        return getattr(args, dest), getattr(evolution, evolution_fields[dest])
    if dest == "space":
        return args.space, space
    if dest == "bench":
        return args.bench, settings.bench
    if dest == "seed_proxies":
        return (tuple(seed_genome(p, free=settings.genome_space.kind == "free") for p in args.seed_proxies),
                tuple(settings.seed_proxies))
    if dest == "genome":
        return args.genome, genomes.kind
    if dest == "aggregation":
        return genome_space(args).aggregations, genomes.aggregations
    if dest == "arch_terminals":
        return args.arch_terminals, genomes.arch_terminals
    if dest == "fitness":
        return parse_fitness(args.fitness).name, settings.fitness
    if dest == "spread_terminals":
        return args.spread_terminals, genomes.spread_terminals
    given, recorded = getattr(args, dest), getattr(settings, dest)
    if isinstance(recorded, (tuple, list)):
        return tuple(given), tuple(recorded)
    if isinstance(recorded, dict) or hasattr(recorded, "items"):
        return dict(given), dict(recorded)
    return given, recorded


def _show(value: Any) -> str:
    if isinstance(value, (tuple, list)):
        return ",".join(map(str, value)) or "none"
    if isinstance(value, dict):
        return ",".join(f"{k}={v:g}" for k, v in value.items()) or "none"
    return str(value)


def check_resume_options(args: argparse.Namespace, settings, space: str, run: str,
                         honoured: frozenset[str]) -> None:
    """ConfigError naming every option given to a ``--resume`` that differs from the run's recorded setting.

    ``honoured`` options are the caller's to apply; an option given with the run's own
    value is accepted. ``settings``: the run's recorded :class:`SearchSettings`.
    """
    conflicts = []
    for dest in sorted(given_options(args) - honoured):
        given, recorded = _given_and_recorded(dest, args, settings, space)
        if given != recorded:
            conflicts.append(f"--{dest.replace('_', '-')} {_show(given)} (the run has {_show(recorded)})")
    if conflicts:
        raise ConfigError(f"--resume continues {run} with the settings it recorded, and these options differ: "
                          f"{'; '.join(conflicts)}; leave them out, or start a new run with another --out")


def fmt(value) -> str:
    return "   nan" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:+.3f}"


def executor_from_args(args: argparse.Namespace):
    """Where the command's parallel steps run: ``--scheduler``, else ``--workers`` local processes.
    Use it as a context manager: a local Dask cluster it started is closed after."""
    from autoprox.core.parallel import make_executor

    return make_executor(getattr(args, "scheduler", None), args.workers)
