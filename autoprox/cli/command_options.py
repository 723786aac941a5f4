"""The option tables of ``rank``, ``evaluate`` and ``vit-search``: their own options, once, as the search options
are.

Each command's options beyond the search table (:mod:`autoprox.search.options`) are
:class:`~autoprox.search.options.Option` records of the same kind: name, default, help, the
``--help`` group, the conversion that checks a value, choices and metavar. The command line
makes its argparse options from these tables (``autoprox.cli.options.add_command_options``);
``rank`` and ``vit-search`` take the statistics group of the search table too, ``evaluate`` every search option.
"""

from __future__ import annotations

import functools
from typing import Callable

from autoprox.apps.protocols.few_labels import DEFAULT_DRAWS, FEW_LABEL_METHODS
from autoprox.apps.protocols.cross_space import DEFAULT_SEEDS
from autoprox.apps.protocols.summary import BOOTSTRAP_SAMPLES
from autoprox.apps.rank_search import MISSING_POLICIES, RankSearchSettings
from autoprox.apps.ranking import FORMATS
from autoprox.apps.vitsearch import MAX_SAMPLES, VitSearchSettings, paper_budgets_text
from autoprox.apps.selection import selection_help
from autoprox.core.registry import LiveNames
from autoprox.data.benchmark import BENCH_FILE_NAMES
from autoprox.data.proxy_tables import table_space_names
from autoprox.genome.rank_formula import GRAMMAR_WORDS, TRANSFORMS
from autoprox.proxies.proxy import BUILTIN_PROXIES
from autoprox.search.conversions import integer, integer_list, number, path_text, text, text_list
from autoprox.search.objectives import objective_kinds, space_objectives
from autoprox.search.options import MAX_WORKERS, OPTIONS, Option

__all__ = ["COMMAND_OPTIONS", "DEFAULT_SPACE_OBJECTIVE", "EVALUATE_OPTIONS", "MAX_REPEATS", "MAX_RESAMPLES", "RANK_OPTIONS",
           "command_options"]

_RANK = frozenset({"rank"})
_EVALUATE = frozenset({"evaluate"})

#: ``rank``'s own options, in ``--help`` order (then the search table's statistics group).
RANK_OPTIONS: tuple[Option, ...] = (
    Option("proxy", None, lambda: f"a built-in ({', '.join(BUILTIN_PROXIES)}), a recommended proxy (recommended:SPACE/TARGET, "
           "such as recommended:pit/flower_kd or "
           "recommended:any/joint), a genome string, a proxy JSON such as best.json (or the run directory holding it); on a proxy table also a proxy "
           f"column or a rank formula over columns ({', '.join([*TRANSFORMS, *GRAMMAR_WORDS])}: \"lrsum(params, nwot)\", "
           "\"first(r(params), r(flops))\"); 'all' or a comma list prints the ranking table", text(),
           commands=_RANK, required=True),
    Option("bench", None, "benchmark file (.pth released format, .jsonl/.json, .csv; or a proxy table: a CSV whose "
           "first column is id, then accuracy columns, then proxy columns)", text(), commands=_RANK),
    Option("space", None, "use the space's released file as --bench (a table space: its packaged proxy tables)",
           text(), choices=tuple(sorted(set(BENCH_FILE_NAMES) | set(table_space_names()))), commands=_RANK),
    OPTIONS["space_file"],
    Option("split", None, "which architectures (default: for a run's proxy such as RUN/best.json, the run's test "
           "split, which its search never saw; else all)", text(), choices=("all", "search", "test"),
           commands=_RANK),
    Option("split_seed", None, "split seed (default: the proxy run's, else 0)", integer(), commands=_RANK),
    Option("search_fraction", None, "search share (default: the run's, else 0.6)", number(),
           commands=_RANK),
    Option("targets", (), "comma-separated targets (default: all columns)", text_list(), commands=_RANK),
    Option("json", False, "print JSON: target -> {kendall, spearman, pearson, n}", flag=True, commands=_RANK),
    Option("seeds", None, "ranking table: seeds, each one repetition (network initialisation and minibatch); "
           "mean and std over them (default: --stat-seeds)", integer_list(0), commands=_RANK),
    Option("format", None, "ranking table format (default markdown); giving it, --seeds, 'all' or a comma list selects "
           "the table, whose targets default to the KD columns plus imagenet_super", text(),
           choices=FORMATS, commands=_RANK),
)

_PROTOCOL = "protocol"
#: The most ``--repeats`` (outer-fold repeats, or few-label draws per table and k), ``--seeds`` per left-out space
#: and ``--bags`` per fold: each is a whole search or draw (the committed protocols take at most 10), so a typo's
#: 10,000,000 would run for days.
MAX_REPEATS = 1_000
#: The most ``--bootstrap`` resamples (each a Kendall per baseline; the default takes 1,000).
MAX_RESAMPLES = 1_000_000
_CROSS = "leave one space out (several labelled spaces)"
#: ``evaluate --rank-formulas``' objective when none is given.
DEFAULT_SPACE_OBJECTIVE = RankSearchSettings.objective


def _space_objective_help() -> str:
    """``--objective``'s help: the N-space objectives registered now, each with what it aggregates."""
    described = [f"{name} ({text}{', the default' if name == DEFAULT_SPACE_OBJECTIVE else ''})" if text else name
                 for name, text in space_objectives()]
    return ("with --rank-formulas: how the per-space Kendalls of the training spaces are aggregated: "
            + "; ".join(described))

#: ``evaluate``'s own options, in ``--help`` order (after every search option).
EVALUATE_OPTIONS: tuple[Option, ...] = (
    Option("folds", None, "outer folds per repeat (default 5)", integer(), group=_PROTOCOL, commands=_EVALUATE),
    Option("repeats", None, "repeats with other shuffles (default 1; with --few-labels, draws per table and k, "
           "default 10); with --resume, a larger number extends a finished protocol by the new repeats' folds (or "
           "draws), and none given keeps the recorded number", integer(None, MAX_REPEATS), group=_PROTOCOL,
           commands=_EVALUATE),
    Option("protocol_seed", None, "seed of the outer shuffle; repeat r uses seed + r (default 0)",
           integer(), group=_PROTOCOL, commands=_EVALUATE),
    Option("fold_workers", 1, "folds run side by side in processes (each fold's statistics then use one worker)",
           integer(None, MAX_WORKERS), group=_PROTOCOL, commands=_EVALUATE),
    Option("selection", None, lambda: f"how each fold's proxy is chosen from its search: {selection_help()}",
           text(), group=_PROTOCOL, commands=_EVALUATE),
    Option("reuse_searches", None, "score again the finished fold searches of the protocol in DIR instead of running "
           "searches (same settings, folds and benchmark; search options may be left out); "
           "nothing is written in DIR", text(), group=_PROTOCOL, commands=_EVALUATE, metavar="DIR"),
    Option("bags", None, "bagging: besides each fold's search, B searches on subsamples (without replacement) "
           "of its search part, into OUT/repeat-R/fold-K-bag-b, with evolution seeds seed+1+b; the "
           "fold's proxy is the equal-weight rank average of all their best proxies, written to "
           "OUT/repeat-R/fold-K-bagged.json (--selection must be best). With --reuse-searches only "
           "the bags run (default 0: no bagging)", integer(None, MAX_REPEATS), group=_PROTOCOL, commands=_EVALUATE,
           metavar="B"),
    Option("few_labels", None, "the sample-efficiency protocol over proxy tables (--bench TABLE.csv, --space with a "
           "packaged table space, each given as often as needed): for each of these labelled-row counts (e.g. "
           "20,50,100), --repeats draws (default " + str(DEFAULT_DRAWS) + ") of that many labelled rows, each method of --methods fitted on "
           "them and judged by Kendall on the other labelled rows; OUT/few_labels.json holds everything",
           text_list(), group=_PROTOCOL, commands=_EVALUATE, metavar="K,K,..."),
    Option("methods", None, lambda: "with --few-labels: the methods compared (default all: "
           f"{', '.join(FEW_LABEL_METHODS.names())})", text_list(), group=_PROTOCOL, commands=_EVALUATE, metavar="LIST"),
    Option("leave_space_out", False, "with --space (or --bench) given more than once: leave each space out in turn, "
           "search on every architecture of the others with --seeds seeds, and score the chosen proxy on all the "
           "left-out space's architectures beside the parameter count, MACs, the zoo proxies, the "
           "published Auto-Prox proxies and the descriptor and blend chosen on the other spaces; "
           "OUT/protocol.json holds everything", flag=True, group=_CROSS, commands=_EVALUATE),
    Option("seeds", None, f"search seeds per left-out space (default {DEFAULT_SEEDS})", integer(None, MAX_REPEATS),
           group=_CROSS, commands=_EVALUATE),
    Option("zoo_baselines", None, "the zoo proxies scored as baselines (default all; 'none' for none)",
           text_list(), group=_CROSS, commands=_EVALUATE, metavar="LIST"),
    Option("bootstrap", None, f"bootstrap resamples of the left-out architectures (default {BOOTSTRAP_SAMPLES}; 0: none)",
           integer(None, MAX_RESAMPLES), group=_CROSS, commands=_EVALUATE),
    Option("rank_formulas", False, "with --leave-space-out: search unit-free rank formulas over the spaces' proxy "
           "tables (packaged table spaces: " + ", ".join(table_space_names()) + "; or proxy-table CSVs given with "
           "--bench), N spaces left out in turn, --seeds searches per left-out space, --iterations iterations of "
           "the evolution (default " + str(RankSearchSettings.iterations) + "), each left-out space scored beside params, flops, every proxy column it has and the "
           "log-rank sum of all of them", flag=True, group=_CROSS, commands=_EVALUATE),
    Option("objective", None, _space_objective_help, text(), choices=LiveNames(functools.partial(objective_kinds, "spaces")),
           group=_CROSS, commands=_EVALUATE),
    Option("missing_columns", None, "with --rank-formulas: a training space lacking a column a formula reads "
           f"scores it as no information ({RankSearchSettings.missing}, the default) or is left out of that formula's "
           "objective (skip; at most one training space per formula, two kept at least)", text(), choices=MISSING_POLICIES,
           group=_CROSS, commands=_EVALUATE),
    # last on the command line, in the protocol group (its --help order since it was added)
    Option("bag_fraction", None, "the fraction of a fold's search part each bag searches on (default 0.5)",
           number(), group=_PROTOCOL, commands=_EVALUATE, metavar="F"),
)

_VIT = frozenset({"vit-search"})


def _vit_search_options() -> tuple[Option, ...]:
    from autoprox.spaces.registry import REGISTRY

    on_bench = "with --on-bench: "
    return (
        # no choices: a space registered by --space-file is known only once the files are read
        Option("space", None, f"search space (sampling mode): {', '.join(REGISTRY.names())}, or one a --space-file "
               "defines", text(), commands=_VIT, metavar="NAME"),
        OPTIONS["space_file"],
        Option("proxy", None, "params, flops, a zoo proxy, autoprox_a/p, a recommended: name, a genome string or a "
               "proxy JSON; with --on-bench also 'all' or a comma list (default: recommended:SPACE/joint for a space "
               "with a labelled benchmark, a per-target ensemble scored for --target, its first target when left out; "
               "else recommended:any/joint, "
               "the parameter count with fallbacks, what the N-space protocol ranks best on spaces it never saw)", text(), commands=_VIT),
        Option("samples", VitSearchSettings.samples,
               f"distinct architectures to sample (default {VitSearchSettings.samples})", integer(1), commands=_VIT),
        Option("params", None, "parameter budget MIN:MAX in millions (default: the paper's, "
               f"{paper_budgets_text()}; the whole space's range for the others)", text(), commands=_VIT),
        Option("classes", VitSearchSettings.classes, f"classes of the head (default {VitSearchSettings.classes})",
               integer(1), commands=_VIT),
        Option("top", VitSearchSettings.top, f"how many of the best to write (default {VitSearchSettings.top})",
               integer(1, MAX_SAMPLES), commands=_VIT),
        Option("seed", VitSearchSettings.seed, f"sampling seed (default {VitSearchSettings.seed})", integer(),
               commands=_VIT),
        Option("out", None, "output directory (default runs/vit-<space>-<proxy>-seed<seed>)", path_text(), commands=_VIT),
        Option("no_keep_statistics", False, "do not store sampled architectures' statistics in the cache (400 "
               "AutoFormer ones take ~11 GB)", flag=True, commands=_VIT),
        Option("on_bench", None, "choose among this benchmark's architectures instead of sampling", text(),
               commands=_VIT, metavar="FILE"),
        Option("split", "all", on_bench + "choose among all architectures or the test split only (default all)",
               text(), choices=("all", "test"), commands=_VIT),
        Option("split_seed", 0, "with --on-bench --split test: the split seed", integer(), commands=_VIT),
        Option("targets", (), on_bench + "targets to report (default all)", text_list(), commands=_VIT),
        Option("json", False, on_bench + "print JSON instead of the table", flag=True, commands=_VIT),
        Option("target", None, "for a per-target ensemble file: the target whose members score (a joint ensemble "
               "needs none; the default proxy's first target when both are left out)", text(), commands=_VIT),
    )


#: Each command's own table (``vit-search``'s is made when asked: its ``--space`` help names the spaces
#: registered then).
COMMAND_OPTIONS: dict[str, tuple[Option, ...] | Callable[[], tuple[Option, ...]]] = {
    "rank": RANK_OPTIONS, "evaluate": EVALUATE_OPTIONS, "vit-search": _vit_search_options}


def command_options(command: str) -> tuple[Option, ...]:
    """``command``'s own options (:data:`COMMAND_OPTIONS`; none for a command without a table)."""
    table = COMMAND_OPTIONS.get(command, ())
    return table() if callable(table) else table
