"""The command line on proxy tables: ``rank`` of a proxy on a table, and the N-space protocol
(``evaluate --leave-space-out --rank-formulas``)."""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

from autoprox.core.errors import BenchmarkError, ConfigError, ProxyError
from autoprox.core.numbers import format_float
from autoprox.data.proxy_tables import (
    TableSpace,
    first_line,
    is_proxy_table,
    load_table_space,
    read_proxy_table,
    table_space_names,
)

__all__ = ["bench_from_table_run", "check_rankable", "check_table_rank_options", "format_space_protocol",
           "format_table_ranking", "not_a_table", "rank_on_tables", "table_proxy", "table_space_from", "wants_tables"]


def _several(value) -> list[str]:
    return [] if not value else [value] if isinstance(value, str) else list(value)


def table_proxy(name: str, columns, where: str, tables=()):
    """A proxy given on a table: one of its ``columns`` by name, else what
    :func:`~autoprox.proxies.proxy.resolve_proxy` reads; a bare name that is neither is refused naming the table's
    proxy columns and the closest of them (a built-in the table lacks cannot be scored on it anyway), or saying that
    it is an accuracy column of one of ``tables`` (:meth:`~autoprox.data.proxy_tables.ProxyTable.misplaced`)."""
    import difflib

    from autoprox.proxies.proxy import resolve_proxy
    from autoprox.proxies.proxy_input import BARE_WORD, formula_problem

    if name in columns:
        return name
    try:
        return resolve_proxy(name)
    except ProxyError:
        # a path (resolve_proxy names one that is missing), a formula or a genome: its own error
        if not BARE_WORD.fullmatch(name):
            problem = formula_problem(name, operators=True)  # a table scores no genome: any formula word counts
            if problem is not None:
                raise ProxyError(f"unknown proxy {name!r}: not a rank formula: {problem}") from None
            raise
        misplaced = next((m for m in (t.misplaced(name, "proxy") for t in tables) if m), None)
        if misplaced:
            raise ProxyError(f"unknown proxy {name!r}: {misplaced}") from None
        close = difflib.get_close_matches(name, list(columns), n=1)
        raise ProxyError(f"unknown proxy {name!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
                         + f": not a proxy column of {where} ({', '.join(columns)}), a rank formula over them or a "
                         "proxy file") from None


def bench_from_table_run(args: argparse.Namespace) -> None:
    """Without --bench and --space, a table search's proxy (its run directory or ``best.json``) is scored on the
    table the search read, as a ViT run's proxy is on its benchmark: ``args.bench`` is set to it, and said so on
    stderr. ConfigError when that table is no longer where the run recorded it; nothing for any other proxy."""
    from autoprox.search.table_run import table_run_config

    names = _several(getattr(args, "proxy", None))
    if getattr(args, "bench", None) or getattr(args, "space", None) or len(names) != 1:
        return
    path = Path(names[0])
    folder = path if path.is_dir() else path.parent
    config = table_run_config(folder) if path.exists() else None
    if config is None:
        return
    recorded = config.get("table", {}).get("path") if isinstance(config.get("table"), dict) else None
    if not isinstance(recorded, str) or not Path(recorded).is_file():
        raise ConfigError(f"{folder} was searched on the table {recorded}, which is no longer there: give the "
                          "table to score with --bench TABLE.csv")
    print(f"table: {recorded}, the one {folder} was searched on{_changed_since(recorded, config['table'])} (--bench "
          "TABLE.csv scores another)", file=sys.stderr)
    args.bench = recorded


def _changed_since(path: str, recorded: dict) -> str:
    """``", changed since (...)"`` when the table at ``path`` is no longer the bytes the search read (rows added or
    edited: scored as they are now, so the line does not say it is the table searched), else ``""``."""
    from autoprox.data.benchmark import file_sha256

    then = recorded.get("sha256")
    try:
        now = file_sha256(path)
    except OSError:
        return ""
    if not isinstance(then, str) or now == then:
        return ""
    return f", changed since (sha256 {now[:12]} now, {then[:12]} then): its rows are scored as they are now"


def wants_tables(args: argparse.Namespace) -> bool:
    """Whether the command names proxy tables: a ``--bench`` CSV whose first column is ``id``, or a
    ``--space`` that is a packaged table space and no released benchmark."""
    from autoprox.data.benchmark import BENCH_FILE_NAMES

    if any(is_proxy_table(b) for b in _several(getattr(args, "bench", None))):
        return True
    spaces = _several(getattr(args, "space", None))
    return bool(spaces) and any(s in table_space_names() and s not in BENCH_FILE_NAMES for s in spaces)


def table_space_from(name_or_file: str, targets=None, labels: bool = True) -> TableSpace:
    """A packaged table space by name, or a proxy-table CSV as a space of one table (judged on
    ``targets``, default every accuracy column; ``labels`` False: a table without labels is read too)."""
    if name_or_file in table_space_names():
        return load_table_space(name_or_file)
    path = Path(name_or_file)
    if not is_proxy_table(path):
        raise not_a_table(name_or_file)
    table = read_proxy_table(path, progress=_reading_progress(path), labels=labels)
    for note in table.notes:
        print(note, file=sys.stderr)
    return TableSpace(table.name, (table,), (tuple(table.check_targets(list(targets) if targets else None)),))


def _reading_progress(path: Path):
    """The progress line of reading a large table (``read_proxy_table`` calls it for a file of at least
    ``PROGRESS_BYTES``), in MB."""
    from autoprox.core.progress import Progress

    line = Progress(f"reading {path.name[:60]} (MB)", every=10)
    return lambda done, total: line(done >> 20, max(1, total >> 20))


def not_a_table(name_or_file: str) -> Exception:
    """Why ``name_or_file`` is neither a packaged table space nor a proxy table: a file that is not there (or
    not a regular file, or a path too long), a header in another delimiter, a first column other than ``id``."""
    import csv

    from autoprox.data.benchmark import file_problem

    spaces = ", ".join(table_space_names())
    path = Path(name_or_file)
    problem = file_problem(path, "proxy table")
    if problem is not None:
        if isinstance(problem, BenchmarkError) and "not found" in str(problem) and "/" not in name_or_file \
                and not name_or_file.endswith((".csv", ".gz")):
            return BenchmarkError(f"{name_or_file!r} is neither a packaged table space ({spaces}) nor a file")
        return problem
    if not path.name.endswith((".csv", ".csv.gz")):
        return BenchmarkError(f"{name_or_file}: not a proxy table (a .csv or .csv.gz file whose first column is 'id')")
    header = next(csv.reader([first_line(path)]), [])
    found = [d for d in (";", "\t", "|") if header and len(header) == 1 and d in header[0]]
    if found:
        return BenchmarkError(f"{name_or_file}: the header is one column holding {found[0]!r}: the file seems to "
                              f"use {found[0]!r} as its delimiter; a proxy table is comma-separated")
    return BenchmarkError(f"{name_or_file}: not a proxy table: its first column is {(header[0] if header else '')!r}, "
                          "where a proxy table's first column is 'id' (the architecture's name)")


def table_spaces_given(args: argparse.Namespace, labels: bool = True) -> list[TableSpace]:
    """The spaces a command names: ``--space`` (packaged table spaces, the released ViT spaces among them
    as their packaged proxy tables) and ``--bench`` proxy tables (``labels`` False: for a command that needs no
    labels, a table without them too)."""
    from autoprox.cli.options import benches_given

    given = benches_given(args) or ([("space", s) for s in _several(getattr(args, "space", None))]
                                    + [("bench", b) for b in _several(getattr(args, "bench", None))])
    known = table_space_names()
    targets = list(getattr(args, "targets", ()) or ())
    spaces, named = [], {}
    for kind, value in given:
        if kind == "space" and value not in known:
            raise BenchmarkError(f"space {value!r} has no proxy table; packaged table spaces: {', '.join(known)}")
        space = load_table_space(value) if kind == "space" else table_space_from(value, targets, labels)
        if space.name in named:
            before = named[space.name]
            same = before == value or (kind == "bench" and Path(before).resolve() == Path(value).resolve())
            raise ConfigError(f"{value} is given twice; give each space once" if same else
                              f"{before} and {value} are both named {space.name!r} (a proxy table is named by its "
                              "file name without suffixes); rename one")
        named[space.name] = value
        spaces.append(space)
    return spaces


def check_rankable(space: TableSpace, pairs=None) -> None:
    """Refuse, in one line naming the table and the target, a (table, target) pair whose target cannot rank the
    table's rows (fewer than 3 measured values, or one constant value); ``pairs``: the space's own by default."""
    for table, target in (space.pairs if pairs is None else pairs):
        problem = table.measured_problem(target)
        if problem:
            raise BenchmarkError(f"{problem}; choose other --targets or another table")


def rank_on_tables(args: argparse.Namespace) -> int:
    """``rank --proxy P --bench TABLE.csv`` (or ``--space nb201``): the proxy's correlations on each
    table's targets, from the table's columns alone; several proxies (``all``, ``a,b``) as one ranking table."""
    from autoprox.proxies.proxy import repeated_proxies_warning
    from autoprox.proxies.proxy_input import split_proxy_list
    from autoprox.proxies.table_scores import reading_note, table_figures, table_scores

    check_table_rank_options(args)
    spaces = table_spaces_given(args)
    if len(spaces) != 1:
        raise ConfigError("rank scores one space: give one --space or one --bench")
    space = spaces[0]
    pairs = [(table, target) for table, default_targets in zip(space.tables, space.targets)
             for target in table.check_targets(list(args.targets) if args.targets else list(default_targets))]
    check_rankable(space, pairs)
    names = split_proxy_list(args.proxy)
    if not names:
        raise ProxyError(f"no proxy given; this space's proxy columns: all, {', '.join(space.proxy_names)} (or a rank "
                         "formula over them, or a proxy file)")
    if names == ["all"]:
        names = list(space.proxy_names)
    results = {}
    repeated: list[str] = []
    for name in names:
        proxy = table_proxy(name, space.proxy_names, space.name, space.tables)
        label = proxy if isinstance(proxy, str) else proxy.name
        if label in results:
            repeated += [] if label in repeated else [label]
            continue
        if not isinstance(proxy, str) and proxy.note:
            print(f"{label}: {proxy.note}", file=sys.stderr)
        seen = _searched_on(proxy)
        if space.name in seen:
            print(f"in-sample: {label} was chosen with the labels of {', '.join(seen)}, this space's included, so "
                  "these figures are not an estimate on a space it never saw; the N-space protocol's figures, on "
                  "the space each choice did not see, are (docs/results-new-space.md)", file=sys.stderr)
        per_table = {}
        for table in space.tables:
            targets = [target for t, target in pairs if t is table]
            note = reading_note(proxy, table)
            if note:
                print(f"{label}: {note}", file=sys.stderr)
            note = fitted_here_note(proxy, table)
            if note:
                print(f"in-sample: {label}: {note}", file=sys.stderr)
            per_table[table.name] = table_figures(table_scores(proxy, table), table, targets)
        results[label] = per_table
    if repeated:
        warnings.warn(repeated_proxies_warning(repeated), stacklevel=1)
    if args.json or args.format == "json":
        from autoprox.core.atomic import json_safe

        print(json.dumps(json_safe(results if len(results) > 1 else next(iter(results.values()))), indent=2))
        return 0
    sys.stdout.write(format_table_ranking(space, results, args.format or "text"))
    return 0


#: ``rank``'s options that a proxy table has no use for: it has no search/test split, and its proxies are read
#: from its columns, not computed on networks under seeds.
_NOT_ON_TABLES = {"split_seed": "--split-seed", "search_fraction": "--search-fraction", "seeds": "--seeds"}


def check_table_rank_options(args: argparse.Namespace) -> None:
    """Refuse, in one line and before a table is read, ``rank``'s options that a proxy table cannot take: a
    ``--search-fraction`` outside (0, 1) as the benchmark path refuses it, then ``--split`` other than ``all``,
    ``--split-seed``, ``--search-fraction`` and ``--seeds`` (a table has no split and no network seeds)."""
    fraction = getattr(args, "search_fraction", None)
    if fraction is not None and not 0 < fraction < 1:
        raise ConfigError(f"search fraction must be in (0, 1), got {fraction}")
    given = [flag for name, flag in _NOT_ON_TABLES.items() if getattr(args, name, None) is not None]
    if getattr(args, "split", None) not in (None, "all"):
        given.insert(0, f"--split {args.split}")
    if given:
        raise ConfigError(f"{given[0]} does not apply to a proxy table: it has no search/test split and its proxies "
                          "are read from its columns, not computed under seeds (rank ranks every row and correlates "
                          "the labelled ones)")


def format_table_ranking(space: TableSpace, results: dict, fmt: str = "text") -> str:
    """What ``rank`` prints on a table space: ``results`` (proxy -> table -> target -> figures) as one table, the
    proxies ranked by their mean Kendall over the (table, target) pairs when there are several; ``fmt`` ``text``
    (every column as wide as its widest cell, a table of millions of rows included), ``markdown`` or ``csv``
    (no title; figures as numbers)."""
    import numpy as np

    several = len(results) > 1
    rows_total = sum(len(t) for t in space.tables)
    what = f"the proxy table{'s' if len(space.tables) > 1 else ''} of {space.name}"
    if several:
        def mean_kendall(item) -> float:
            values = [m["kendall"] for figures in item[1].values() for m in figures.values()]
            values = [v for v in values if v is not None and v == v]
            return float(np.mean(values)) if values else -np.inf

        ordered = sorted(results.items(), key=mean_kendall, reverse=True)
        title = (f"{len(results)} proxies on {what} ({rows_total:,} rows; scored from its columns, no network "
                 "built), ranked by their mean Kendall")
    else:
        ordered = list(results.items())
        title = f"proxy {ordered[0][0]} on {what} ({rows_total:,} rows; scored from its columns, no network built)"
    header = (["rank", "proxy"] if several else []) + ["table", "target", "kendall", "spearman", "pearson", "n"]
    if fmt == "csv":
        import csv
        import io

        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(["rank", "proxy", *header[-6:]])
        for rank, (label, per_table) in enumerate(ordered, 1):
            for table_name, figures in per_table.items():
                for target, m in figures.items():
                    writer.writerow([rank, label, table_name, target, *(_csv_number(m[k]) for k in
                                                                         ("kendall", "spearman", "pearson")), m["n"]])
        return buffer.getvalue()
    body = []
    for rank, (label, per_table) in enumerate(ordered, 1):
        for table_name, figures in per_table.items():
            for target, m in figures.items():
                body.append(([str(rank), label] if several else []) + [
                    table_name, target, format_float(m["kendall"]), format_float(m["spearman"]),
                    format_float(m["pearson"]), f"{m['n']:,}"])
    if fmt == "markdown":
        def cells(row) -> str:
            return "| " + " | ".join(c.replace("|", "\\|") for c in row) + " |"

        aligned = ["---" if h in ("proxy", "table", "target") else "---:" for h in header]
        return "\n".join([f"{title}\n", cells(header), "|" + "|".join(aligned) + "|"]
                         + [cells(row) for row in body]) + "\n"
    widths = [max(len(row[i]) for row in [header] + body) for i in range(len(header))]
    left = {"proxy", "table", "target"}

    def line(cells) -> str:
        return "  ".join(c.ljust(w) if h in left else c.rjust(w) for c, w, h in zip(cells, widths, header)).rstrip()

    return "\n".join([title, line(header)] + [line(row) for row in body]) + "\n"


def _csv_number(value) -> str:
    """A figure as a CSV cell: its repr, empty when undefined."""
    return "" if value is None or value != value else repr(float(value))


def fitted_here_note(proxy, table) -> str | None:
    """Why ``rank``'s figures of a table search's proxy on ``table`` are in-sample: its weights were fitted on this
    very table's labelled rows (the sha256 its ``best.json`` records), or None."""
    provenance = getattr(proxy, "provenance", {}) if not isinstance(proxy, str) else {}
    recorded = provenance.get("table")
    if not isinstance(recorded, dict) or recorded.get("sha256") != table.sha256:
        return None
    said = (f"its weights were fitted on the labelled rows of this very table ({table.name}), so the figures on them "
            "are in-sample")
    try:
        search = json.loads(Path(provenance["file"]).read_text(encoding="utf-8")).get("search", {})
        out_of_bag = float(search["out_of_bag_kendall"])
    except (KeyError, OSError, ValueError, TypeError, AttributeError):
        return said + "; judge it on rows it never saw"
    return (f"{said}; the search's out-of-bag Kendall ({out_of_bag:+.3f}) estimates what it does on rows it never "
            "saw")


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
    from autoprox.apps.protocols.cross_space import DEFAULT_SEEDS
    from autoprox.apps.protocols.space import run_space_protocol
    from autoprox.apps.protocols.summary import BOOTSTRAP_SAMPLES
    from autoprox.apps.rank_search import RankSearchSettings
    from autoprox.search.rundir import PROTOCOL

    spaces = table_spaces_given(args)
    for space in spaces:  # before anything is written: a target that cannot rank would score +0.000 everywhere
        check_rankable(space)
    seeds = tuple(range(args.seeds if args.seeds is not None else DEFAULT_SEEDS))
    given = {"objective": args.objective, "missing": args.missing_columns, "iterations": args.iterations}
    settings = RankSearchSettings(**{name: value for name, value in given.items() if value is not None})
    out = Path(args.out or "runs/space-protocol-" + "+".join(s.name for s in spaces))
    protocol = run_space_protocol(spaces, out, seeds=seeds, settings=settings,
                                  samples=args.bootstrap if args.bootstrap is not None else BOOTSTRAP_SAMPLES,
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
        width = max(30, 2 + max(len(name) for name in summary))  # a table's own column can be longer than 30
        for name, row in sorted(summary.items(), key=lambda item: -item[1]["mean"]):
            count = row["spaces"]
            lines.append(f"  {name:<{width}}{format_float(row['mean'])}  ({count} space{'' if count == 1 else 's'})")
    return "\n".join(lines) + "\n"
