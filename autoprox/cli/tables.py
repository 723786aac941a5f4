"""The command line on proxy tables: ``rank`` of a proxy on a table, and the N-space protocol
(``evaluate --leave-space-out --rank-formulas``)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from autoprox.core.errors import BenchmarkError, ConfigError
from autoprox.core.numbers import format_float
from autoprox.data.proxy_tables import (
    TableSpace,
    is_proxy_table,
    load_table_space,
    read_proxy_table,
    table_space_names,
)

__all__ = ["format_space_protocol", "rank_on_tables", "table_space_from", "wants_tables"]


def _several(value) -> list[str]:
    return [] if not value else [value] if isinstance(value, str) else list(value)


def wants_tables(args: argparse.Namespace) -> bool:
    """Whether the command names proxy tables: a ``--bench`` CSV whose first column is ``id``, or a
    ``--space`` that is a packaged table space and no released benchmark."""
    from autoprox.data.benchmark import BENCH_FILE_NAMES

    if any(is_proxy_table(b) for b in _several(getattr(args, "bench", None))):
        return True
    spaces = _several(getattr(args, "space", None))
    return bool(spaces) and any(s in table_space_names() and s not in BENCH_FILE_NAMES for s in spaces)


def table_space_from(name_or_file: str, targets=None) -> TableSpace:
    """A packaged table space by name, or a proxy-table CSV as a space of one table (judged on
    ``targets``, default every accuracy column)."""
    if name_or_file in table_space_names():
        return load_table_space(name_or_file)
    path = Path(name_or_file)
    if not is_proxy_table(path):
        raise BenchmarkError(f"{name_or_file}: neither a packaged table space ({', '.join(table_space_names())}) nor "
                             "a proxy table (a CSV file whose first column is 'id')")
    table = read_proxy_table(path)
    return TableSpace(table.name, (table,), (tuple(table.check_targets(list(targets) if targets else None)),))


def table_spaces_given(args: argparse.Namespace) -> list[TableSpace]:
    """The spaces a command names: ``--space`` (packaged table spaces, the released ViT spaces among them
    as their packaged proxy tables) and ``--bench`` proxy tables."""
    from autoprox.cli.options import benches_given

    given = benches_given(args) or ([("space", s) for s in _several(getattr(args, "space", None))]
                                    + [("bench", b) for b in _several(getattr(args, "bench", None))])
    known = table_space_names()
    targets = list(getattr(args, "targets", ()) or ())
    spaces = []
    for kind, value in given:
        if kind == "space" and value not in known:
            raise BenchmarkError(f"space {value!r} has no proxy table; packaged table spaces: {', '.join(known)}")
        spaces.append(load_table_space(value) if kind == "space" else table_space_from(value, targets))
    return spaces


def rank_on_tables(args: argparse.Namespace) -> int:
    """``rank --proxy P --bench TABLE.csv`` (or ``--space nb201``): the proxy's correlations on each
    table's targets, from the table's columns alone."""
    from autoprox.proxies.proxy import resolve_proxy, split_proxy_list
    from autoprox.proxies.table_scores import reading_note, table_figures, table_scores

    spaces = table_spaces_given(args)
    if len(spaces) != 1:
        raise ConfigError("rank scores one space: give one --space or one --bench")
    space = spaces[0]
    names = split_proxy_list(args.proxy)
    if names == ["all"]:
        names = list(space.proxy_names)
    results = {}
    for name in names:
        proxy = name if name in space.proxy_names else resolve_proxy(name)
        label = proxy if isinstance(proxy, str) else proxy.name
        if not isinstance(proxy, str) and proxy.note:
            print(f"{label}: {proxy.note}", file=sys.stderr)
        seen = _searched_on(proxy)
        if space.name in seen:
            print(f"in-sample: {label} was chosen with the labels of {', '.join(seen)}, this space's included, so "
                  "these figures are not an estimate on a space it never saw; the N-space protocol's figures, on "
                  "the space each choice did not see, are (docs/results.md)", file=sys.stderr)
        per_table = {}
        for table, default_targets in zip(space.tables, space.targets):
            targets = table.check_targets(list(args.targets) if args.targets else list(default_targets))
            note = reading_note(proxy, table)
            if note:
                print(f"{label}: {note}", file=sys.stderr)
            per_table[table.name] = table_figures(table_scores(proxy, table), table, targets)
        results[label] = per_table
    if args.json:
        from autoprox.core.atomic import json_safe

        print(json.dumps(json_safe(results if len(results) > 1 else next(iter(results.values()))), indent=2))
        return 0
    for label, per_table in results.items():
        rows = sum(len(t) for t in space.tables)
        print(f"proxy {label} on the proxy table{'s' if len(space.tables) > 1 else ''} of {space.name} "
              f"({rows:,} rows; scored from its columns, no network built)")
        print(f"{'table':<24}{'target':<14}{'kendall':>9}{'spearman':>10}{'pearson':>9}{'n':>7}")
        for table_name, figures in per_table.items():
            for target, m in figures.items():
                print(f"{table_name:<24}{target:<14}{format_float(m['kendall']):>9}{format_float(m['spearman']):>10}"
                      f"{format_float(m['pearson']):>9}{m['n']:>7}")
    return 0


def _searched_on(proxy) -> list[str]:
    """The spaces whose labels chose a proxy file's formula (its ``searched_on``), or none."""
    source = getattr(proxy, "provenance", {}).get("file") if not isinstance(proxy, str) else None
    if not source:
        return []
    try:
        seen = json.loads(Path(source).read_text(encoding="utf-8")).get("searched_on")
    except (OSError, ValueError, AttributeError):
        return []
    return [str(s) for s in seen] if isinstance(seen, list) else []


def run_space_protocol_command(args: argparse.Namespace) -> int:
    """``evaluate --leave-space-out --rank-formulas``: the N-space protocol over proxy tables."""
    from autoprox.apps.rank_search import RankSearchSettings
    from autoprox.apps.space_protocol import run_space_protocol
    from autoprox.search.rundir import PROTOCOL

    spaces = table_spaces_given(args)
    seeds = tuple(range(args.seeds if args.seeds is not None else 5))
    settings = RankSearchSettings(objective=args.objective or "worst", missing=args.missing_columns or "neutral",
                                  **({"iterations": args.iterations} if args.iterations is not None else {}))
    out = Path(args.out or "runs/space-protocol-" + "+".join(s.name for s in spaces))
    protocol = run_space_protocol(spaces, out, seeds=seeds, settings=settings,
                                  samples=args.bootstrap if args.bootstrap is not None else 1000,
                                  say=(lambda text: None) if args.quiet else (lambda text: print(text, file=sys.stderr)))
    print(format_space_protocol(protocol), end="")
    print(f"written to {out / PROTOCOL}")
    return 0


def format_space_protocol(protocol: dict) -> str:
    """Per left-out space: the searched formulas (mean +- sd over seeds), the label-free baselines and the
    choices made on the training spaces, and the paired intervals against params, flops and lrsum-all."""
    lines = []
    for space, d in protocol["directions"].items():
        lines.append(f"left out {space} (searched on {', '.join(d['training'])})")
        lines.append(f"  searched (mean of {len(d['searched'])} seeds)  {format_float(d['searched_mean'])} "
                     f"+- {d['searched_sd']:.3f}")
        for name in ("params", "flops", "lrsum-all", "best-single", "greedy-lrsum"):
            if name in d["figures"]:
                extra = f"  ({d['chosen_on_training'][name]})" if name in d["chosen_on_training"] else ""
                lines.append(f"  {name:<30}{format_float(d['figures'][name])}{extra}")
        for name, p in d["paired"].items():
            lines.append(f"  searched - {name:<19}{format_float(p['difference'])} [{format_float(p['low'])}, "
                         f"{format_float(p['high'])}], {p['seeds_ahead']}/{len(d['searched'])} seeds ahead")
    summary = protocol.get("summary", {})
    if summary:
        lines.append("mean over left-out spaces (spaces that have it):")
        for name, row in sorted(summary.items(), key=lambda item: -item[1]["mean"]):
            lines.append(f"  {name:<30}{format_float(row['mean'])}  ({row['spaces']} spaces)")
    return "\n".join(lines) + "\n"
