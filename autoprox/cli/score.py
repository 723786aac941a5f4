"""``autoprox score``: a proxy's score for every row of a proxy table or every architecture of a benchmark, as
``id,score`` (what a user picks architectures with).

The scores are those ``autoprox rank`` correlates, computed on the same path (a table's columns through the
proxy's recorded transforms and weights; statistics, zoo or architecture proxies on networks), so ranking the
file by ``score`` gives ``rank``'s order. On a benchmark the ``id`` is the architecture's configuration (JSON).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
import warnings
from pathlib import Path

import numpy as np

from autoprox.cli.options import add_command_options, add_stats_options
from autoprox.core.atomic import atomic_write_text, check_output_file, output_write
from autoprox.core.errors import ConfigError, ProxyError, RunDirError

#: The first line of every file ``score`` writes: how a re-run recognises its own output.
HEADER = "id,score\n"


#: ``rank``'s options that mean nothing to ``score``: it scores every row with one proxy and prints no figures.
SCORE_LEAVES_OUT = ("split", "split_seed", "search_fraction", "json", "seeds", "format")
PROXY_HELP = ("one proxy: a built-in, a recommended proxy (recommended:SPACE/TARGET), a genome string, a proxy JSON "
              "such as a run's best.json or a table search's best.json (or the run directory itself); on a proxy table also a proxy column or a "
              "rank formula over columns")
TARGETS_HELP = ("the target whose scores are written, where the proxy scores targets differently (a per-target "
                "ensemble, or statistics with each target's class count, --per-target-stats): the first given (default: "
                "the target a recommended:SPACE/TARGET proxy was chosen for, else the benchmark's first); a proxy "
                "table's scores do not depend on it")


def add_parser(sub) -> None:
    score = sub.add_parser(
        "score", help="write a proxy's score of every row or architecture as id,score",
        description="Score every row of a proxy table (--bench TABLE.csv), or every architecture of a benchmark "
                    "(--space, --bench FILE), with one proxy (a built-in, a rank formula, a run's best.json, a "
                    "table search's best.json) and write OUT as CSV 'id,score' in the table's or benchmark's order "
                    "(higher: predicted better; an empty score: the proxy could not score that row). Rows without a "
                    "label are scored too. A table search's proxy reads each column through its rank among the rows scored "
                    "together: score the candidates you compare in one table.")
    add_command_options(score, "rank", leave_out=SCORE_LEAVES_OUT, overrides={"proxy": PROXY_HELP,
                                                                              "targets": TARGETS_HELP})
    add_stats_options(score)
    score.add_argument("--out", required=True, help="the CSV file to write (id,score)")


def _format(value: float) -> str:
    return repr(float(value)) if np.isfinite(value) else ""


def is_scores_file(head: bytes, tail: bytes = b"") -> bool:
    """Whether a file beginning with ``head`` is one ``score`` wrote (its first line is exactly :data:`HEADER`)."""
    return head.startswith(HEADER.encode())


def check_scores_out(path: str | Path) -> Path:
    """RunDirError (one line, nothing written) unless ``path`` can take a scores file: new, or one ``score`` wrote."""
    return check_output_file(path, "score", is_scores_file, "--out", RunDirError)


def write_scores(path: str | Path, ids, scores: np.ndarray) -> None:
    """``id,score`` for every row, written atomically.

    Parameters
    ----------
    path : str or Path
        The CSV file to write: a new one, or one ``score`` wrote before (another file is refused,
        :func:`check_scores_out`).
    ids : sequence
        The rows' identifiers, in order.
    scores : numpy.ndarray
        The rows' scores; a non-finite score is written as an empty cell.

    Raises
    ------
    RunDirError
        When ``path`` cannot be written; nothing is written then.
    """
    check_scores_out(path)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["id", "score"])
    for ident, value in zip(ids, scores):
        writer.writerow([ident, _format(value)])
    with output_write(path, RunDirError, "; choose another --out"):
        atomic_write_text(path, buffer.getvalue())


def run(args: argparse.Namespace) -> int:
    from autoprox.cli.tables import bench_from_table_run, wants_tables
    from autoprox.cli.options import refuse_proxy_list
    from autoprox.proxies.proxy import resolve_proxy
    from autoprox.proxies.proxy_input import split_proxy_list
    from autoprox.proxies.table_scores import UNMEASURED, unscored_warning

    refuse_proxy_list(args.proxy, "score", "score each in its own run, each to its own --out")
    if split_proxy_list(args.proxy) in ([], ["all"]):
        raise ConfigError(f"--proxy {args.proxy}: score takes one proxy; all names every built-in (compare them with "
                          "autoprox rank --proxy all)")
    check_scores_out(args.out)  # before the scores' seconds are spent
    bench_from_table_run(args)
    if wants_tables(args):
        ids, scores, what = _table_scores(args)
    else:
        ids, scores, what = _benchmark_scores(args, resolve_proxy(args.proxy))
    write_scores(args.out, ids, scores)
    finite = int(np.isfinite(scores).sum())
    unscored = unscored_warning(ids, scores, UNMEASURED if wants_tables(args) else "the proxy failed on them")
    if unscored:
        warnings.warn(unscored, UserWarning, stacklevel=1)
    tie = tie_warning(scores, what)
    if tie:
        warnings.warn(tie, UserWarning, stacklevel=1)
    print(f"{args.out}: {len(ids)} scores of {args.proxy} on {what}"
          + (f" ({len(ids) - finite} left empty: not scored)" if finite < len(ids) else ""))
    return 0


def tie_warning(scores: np.ndarray, what: str) -> str | None:
    """The line ``score`` warns with when every scored row has the same score (the columns or statistics the proxy
    reads do not vary over them, so the file ranks nothing); None otherwise."""
    finite = scores[np.isfinite(scores)]
    if len(finite) < 2 or np.ptp(finite) > 0:
        return None
    return (f"every scored row of {what} has the same score ({_format(finite[0])}): what the proxy reads does not "
            "vary over these rows, so the scores rank nothing")


def _written_target(proxy, targets, given) -> str:
    """The target whose scores are written: the first of ``--targets``, else the one an ensemble was
    chosen for (a ``recommended:SPACE/TARGET`` proxy), else the benchmark's first. (A weighted formula's
    recorded target is its table's, which names no benchmark target.)"""
    chosen = proxy.provenance.get("target") if proxy.kind == "ensemble" else None
    if not given and chosen in targets:
        return chosen
    return targets[0]


def _table_scores(args: argparse.Namespace):
    from autoprox.cli.tables import table_proxy, table_spaces_given
    from autoprox.proxies.table_scores import reading_note, table_scores

    spaces = table_spaces_given(args, labels=False)  # scoring needs no labels: unlabelled candidates are read
    if len(spaces) != 1 or len(spaces[0].tables) != 1:
        raise ConfigError("score writes the scores of one table: give one --bench TABLE.csv (a packaged space of "
                          "several tables: give one of its files)")
    table = spaces[0].tables[0]
    proxy = table_proxy(args.proxy, list(table.proxies), table.source or table.name, (table,))
    note = reading_note(proxy, table)
    if note:
        print(note, file=sys.stderr)
    return list(table.ids), table_scores(proxy, table), f"{table.source or table.name} ({len(table):,} rows)"


def _benchmark_scores(args: argparse.Namespace, proxy):
    from autoprox.cli.options import bench_path, evaluation_context, executor_from_args
    from autoprox.cli.rank import networks_note, run_bench
    from autoprox.core.progress import Progress
    from autoprox.data.benchmark import load_benchmark
    from autoprox.genome.tree import InvalidProxy
    from autoprox.spaces.architectures import arch_to_config

    args.bench = run_bench(args, proxy) or args.bench
    bench = load_benchmark(bench_path(args))
    note = networks_note(proxy)
    if note:
        print(note, file=sys.stderr)
    context = evaluation_context(args, None, all_targets=True, part="all", bench=bench)
    progress = Progress("statistics" if proxy.needs_statistics else proxy.name, every=15) \
        if proxy.kind != "architecture" else None
    plan = proxy.scoring_plan(context.plan)
    try:
        with executor_from_args(args) as executor:
            keyed, context = context.target_scores(proxy, "all", args.targets, workers=executor, progress=progress)
    except InvalidProxy as exc:
        raise ProxyError(f"proxy {proxy.name} is invalid on this benchmark: {exc}") from None
    target = _written_target(proxy, context.targets, args.targets)
    scores = keyed[target]
    differ = bool(proxy.targets) and len(context.targets) > 1
    classes = {plan.target_classes.get(t) for t in context.targets} - {None}
    if differ or len(classes) > 1:
        print(f"scores for {target} (its {plan.target_classes.get(target, 100)}-class statistics); "
              "--targets picks another target", file=sys.stderr)
    ids = [json.dumps(arch_to_config(arch), sort_keys=True) for arch in context.archs("all")]
    return ids, np.asarray(scores, dtype=np.float64), f"{Path(bench.source).name} ({len(ids)} architectures)"
