"""The HTML reports of the protocols within one space: the evaluation protocol (``autoprox evaluate``: folds,
paired differences, repeats) and the few-label protocol (``evaluate --few-labels``).

Everything shown is what ``protocol.json`` records: each finished fold's chosen proxy and
its test Kendall per method, the summary over the folds (per method's mean and sd, the
paired differences proxy minus each baseline with their t and corrected intervals,
:mod:`autoprox.apps.protocols.summary`), and the per-repeat summaries.

A few-label protocol's report (its ``few_labels.json``, :func:`write_few_labels_report`) shows the mean
Kendall against k per method, one panel per table, and per (table, k) the means and the engine's paired
differences.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Mapping, Sequence

from autoprox.apps.protocols.few_labels import FEW_LABELS_FILE, FORMAT as FEW_LABELS_FORMAT, draws_interval, entries_text
from autoprox.apps.protocols.summary import REFERENCE
from autoprox.core.atomic import load_json
from autoprox.core.errors import AutoproxError, ReportError
from autoprox.reports.html import figures as svg
from autoprox.reports.html.page import (
    Cell,
    ReportMemo,
    check_report_out,
    esc,
    facts,
    figure,
    formula_cell,
    num,
    number,
    page,
    table,
    text,
    write_page,
)
from autoprox.search.rundir import PROTOCOL, RunDirectory, python_call, shown_command


def protocol_body(path: Path, simplify: bool, memo: ReportMemo, protocol: Mapping | None = None) -> tuple[str, str]:
    """(title, body HTML) of the protocol in ``path`` (``protocol``: its protocol.json, read here when not
    given); ReportError when its protocol.json cannot be read."""
    protocol = RunDirectory(path).protocol() if protocol is None else protocol
    try:
        spec, folds = protocol["protocol"], list(protocol["folds"])
        targets = list(protocol["targets"])
    except (KeyError, TypeError) as exc:
        raise ReportError(f"{path / PROTOCOL}: not a protocol this autoprox can read (no {exc})") from None
    summary = protocol.get("summary") or {}
    methods = list(summary.get("methods") or [REFERENCE, *spec.get("baselines", [])])
    baselines = [m for m in methods if m != REFERENCE]
    name = path.resolve().name
    done = [f for f in folds if f.get("result")]
    status = "finished" if protocol.get("finished") else "unfinished"
    rows = [("space", esc(protocol.get("space", "?"))),
            ("design", esc(f"{spec.get('folds')} outer folds x {spec.get('repeats')} repeat(s), protocol seed "
                           f"{spec.get('seed')}, {protocol.get('architectures', '?')} architectures")),
            ("selection", esc(spec.get("selection", "best"))),
            ("baselines", esc(", ".join(baselines))),
            ("targets", esc(", ".join(targets))),
            ("status", f'<span class="status{"" if protocol.get("finished") else " unfinished"}">'
                       f"{esc(status)}: {len(done)} of {len(folds)} folds</span>")]
    rows += command_rows(protocol, path)
    body = (f'<header class="top"><h1>Protocol {esc(name)}</h1><div class="muted">{esc(path)}</div></header>'
            + facts(rows))
    if not protocol.get("finished"):
        body += ('<p>Continue it with:</p><pre class="command" id="resume">'
                 f'{esc(f"autoprox evaluate --resume --out {shlex.quote(str(path))}")}</pre>')
    body += _fold_section(path, done, methods, targets, simplify, memo)
    body += _summary_section(summary, methods, baselines, targets)
    body += _repeat_section(protocol.get("repeat_summaries") or [], methods, baselines)
    return f"autoprox report: protocol {name}", body


def _words(value) -> list[str] | None:
    return [str(v) for v in value] if isinstance(value, list) and value else None


def _made_by(command: list[str], element: str) -> str:
    """A recorded command in the header (:func:`~autoprox.search.rundir.shown_command`); a run made from Python
    records its call, which is said to be one (not a command line to type)."""
    code = f'<code id="{element}">{esc(shown_command(command))}</code>'
    return code + (' <span class="muted">(from Python)</span>' if python_call(command) is not None else "")


def command_rows(protocol: Mapping, folder: Path) -> list[tuple[str, str]]:
    """The header's "made by" (the command that started the protocol) and "last resumed with" rows.

    A protocol records its first command and its last resume apart (``command``, ``resumed_with``); one
    written by an older autoprox kept only the last session's command, and its runs' ``config.json`` are
    searched for the first one then (:meth:`RunDirectory.protocol_commands`)."""
    command, resumed = RunDirectory(folder).protocol_commands(protocol)
    rows = []
    if command:
        rows.append(("made by", _made_by(command, "made-by")))
    elif resumed:
        rows.append(("made by", '<span id="made-by">not recorded: this protocol.json keeps only the command of its '
                                "last session, and none of its runs records the first</span>"))
    if resumed:
        rows.append(("last resumed with", _made_by(resumed, "resumed-with")))
    return rows


def _fold_section(path: Path, folds: Sequence[Mapping], methods, targets, simplify: bool, memo: ReportMemo) -> str:
    from autoprox.reports.simplify import readable_formulas

    body = '<h2 id="folds">Folds</h2>'
    if not folds:
        return body + "<p>No fold finished yet.</p>"
    genomes = [f["result"].get("genome") for f in folds]
    readable = {}
    wanted = [g for g in dict.fromkeys(genomes) if isinstance(g, str) and (g, simplify) not in memo.formulas]
    for genome in wanted:
        try:
            memo.formulas[genome, simplify] = readable_formulas([genome], simplify=simplify)[0]
        except AutoproxError:  # not a genome (an ensemble's name): shown as recorded
            memo.formulas[genome, simplify] = None
    readable = {g: memo.formulas.get((g, simplify)) for g in genomes if isinstance(g, str)}
    rows = []
    for index, fold in enumerate(folds):
        result = fold["result"]
        formula = readable.get(result.get("genome"))
        shown = (formula_cell(formula, memo, f"fold{index}") if formula is not None
                 else Cell(f'<span class="mono">{esc(result.get("proxy", "?"))}</span>', "formula"))
        rows.append([Cell(str(fold.get("repeat", 0))), Cell(str(fold.get("fold"))), Cell(str(len(fold.get("search") or []))),
                     Cell(str(len(fold.get("test") or []))), num(result.get("search_jcm")),
                     *(num((result.get("jcm") or {}).get(m)) for m in methods),
                     num(fold.get("seconds"), 0, signed=False), shown])
    body += ("<p>Each outer fold: a search on its search part chose a proxy (its search fitness), then the proxy and "
             "the descriptor baselines (chosen on the same search part) were measured on the fold's test part, "
             "which the search never saw. Test JCM per method.</p>")
    body += table(["repeat", "fold", "search", "test", "search fitness", *(f"test JCM {m}" for m in methods),
                   "seconds", "chosen proxy"], rows, table_id="folds-table")
    return body


def _interval(values) -> str:
    if not isinstance(values, (list, tuple)) or len(values) != 2:
        return "n/a"
    return f"[{number(values[0])}, {number(values[1])}]"


def _summary_rows(summary: Mapping, targets) -> list[tuple[str, Mapping]]:
    rows = [(t, summary["targets"][t]) for t in targets if t in (summary.get("targets") or {})]
    if summary.get("jcm"):
        rows.append(("JCM", summary["jcm"]))
    return rows


def _summary_section(summary: Mapping, methods, baselines, targets) -> str:
    body = '<h2 id="differences">Paired differences</h2>'
    rows = _summary_rows(summary, targets)
    if not rows:
        return body + "<p>No summary yet.</p>"
    test_rows = [[text(name), *(Cell(esc(f"{number(row['test'][m]['mean'])} ± {number(row['test'][m]['sd'], signed=False)}"))
                                for m in methods)] for name, row in rows]
    body += (f"<p>Test Kendall over the {summary.get('folds')} outer folds, mean ± sd (proxy: the search's chosen "
             "proxy; the baselines are chosen on each fold's search part).</p>")
    body += table(["target", *methods], test_rows, table_id="test-kendall")
    difference_rows = []
    for name, row in rows:
        for baseline in baselines:
            d = row["difference"][baseline]
            boot = d.get("bootstrap") or {}
            difference_rows.append([text(name), text(f"proxy - {baseline}"), num(d.get("mean")), Cell(esc(_interval(d.get("ci")))),
                                    Cell(esc(_interval(d.get("corrected_ci")))),
                                    Cell(esc(_interval([boot.get("low"), boot.get("high")]) if boot else "n/a")),
                                    Cell(f"{d.get('ahead')}/{d.get('n')}")])
    body += table(["target", "difference", "mean", "95% t-interval", "corrected interval", "bootstrap", "folds ahead"],
                  difference_rows, table_id="differences-table")
    differences = {name: row["difference"] for name, row in rows}
    body += figure(svg.forest_svg([name for name, _ in rows], baselines, differences, "forest"),
                   "Proxy minus each baseline, test Kendall, one value per outer fold: the mean (circle), the 95% "
                   "t-interval over folds (thick; too narrow, the folds' search parts overlap) and Nadeau and Bengio's "
                   "corrected interval (thin). Right of zero: the proxy ranks better.", "figure-forest")
    if summary.get("invalid_folds"):
        body += f"<p>The proxy was invalid on the test part of {summary['invalid_folds']} fold(s); left out.</p>"
    return body


def _repeat_section(repeats: Sequence[Mapping], methods, baselines) -> str:
    body = '<h2 id="repeats">Per repeat</h2>'
    if not repeats:
        return body + "<p>One repeat: the summary above is its summary.</p>"
    rows = []
    for index, summary in enumerate(repeats):
        jcm = summary.get("jcm") or {}
        if not jcm:
            continue
        rows.append([Cell(str(index)), Cell(str(summary.get("folds"))), *(num(jcm["test"][m]["mean"]) for m in methods),
                     *(Cell(esc(f"{number(jcm['difference'][b]['mean'])} {_interval(jcm['difference'][b].get('ci'))}"))
                       for b in baselines)])
    body += "<p>Each repeat's own folds: test JCM mean per method, and proxy minus each baseline with its t-interval.</p>"
    body += table(["repeat", "folds", *(f"JCM {m}" for m in methods), *(f"proxy - {b}" for b in baselines)], rows,
                  table_id="repeats-table")
    return body


# ------------------------------------------------------ the few-label protocol


def few_labels_record(path: str | Path) -> dict | None:
    """The few-label record of a protocol folder (or of the file itself), else None."""
    path = Path(path)
    file = path / FEW_LABELS_FILE if path.is_dir() else path
    try:
        data = load_json(file.read_text(encoding="utf-8")) if file.is_file() else None
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("format") == FEW_LABELS_FORMAT else None


def few_labels_body(record: Mapping) -> tuple[str, str]:
    """(title, HTML body) of a few-label record."""
    try:
        spec, results = record["spec"], record["results"]
        methods = spec["methods"]
    except (KeyError, TypeError) as exc:
        raise ReportError(f"a few-label protocol record without {exc}") from None
    title = f"Few-label protocol: {entries_text(spec)}"
    body = f"<h1>{esc(title)}</h1>" + facts([
        ("(table, target) pairs done" if "pair" in title else "tables done", f"{len(results)} of {len(spec['tables'])}"), ("labelled rows k", ", ".join(map(str, spec["ks"]))),
        ("draws per (table, k)", str(spec["repeats"])), ("seed", str(spec["seed"])), ("methods", esc(", ".join(methods)))])
    body += ("<p>For each table and k: draws of k rows among those whose target is known; each method is fitted on the "
             "drawn rows' labels alone and judged by Kendall tau-b on the other labelled rows.</p>")
    panels = {name: {m: {int(k): cell["mean"][m] for k, cell in cells.items() if "mean" in cell} for m in methods}
              for name, cells in results.items()}
    if panels:
        body += figure(svg.k_curves_svg(panels, "few-labels"),
                       "Mean Kendall on the held-out labelled rows against the number of labelled rows k; one panel "
                       "per table.", "figure-few-labels")
    for k, entry in (record.get("summary") or {}).items():
        body += f"<p>k={esc(k)}, {esc(entries_text(spec, entry['tables']))}: " + esc(", ".join(
            f"{m} {v:+.3f}" for m, v in entry["mean"].items())) + "</p>"
    for name, cells in results.items():
        body += f'<h2 id="table-{esc(name)}">{esc(name)}</h2>'
        done = {k: c for k, c in cells.items() if "mean" in c}
        skipped = [f"k={k}: {c['skipped']}" for k, c in cells.items() if "skipped" in c]
        if done:
            body += table(["k", *methods], [[text(k)] + [num(c["mean"][m]) for m in methods] for k, c in done.items()])
            rows = [[text(k), text(m), num(d["mean"]), text(draws_interval(d)), text(f"{d['ahead']}/{d['draws']}")]
                    for k, c in done.items() for m, d in c["difference"].items()]
            if rows:
                body += table(["k", "engine minus", "mean difference", "95% bootstrap over draws", "draws ahead"], rows)
        if skipped:
            body += "<ul>" + "".join(f"<li>{esc(line)}</li>" for line in skipped) + "</ul>"
    return title, body


def write_few_labels_report(path: str | Path, out: str | Path | None = None) -> Path:
    """Write the report of the few-label protocol in ``path`` (its folder) to ``out`` (default: report.html there)."""
    record = few_labels_record(path)
    if record is None:
        raise ReportError(f"{path} holds no few-label protocol record ({FEW_LABELS_FILE})")
    target = Path(path) / "report.html" if out is None else out
    check_report_out(target)  # a file report did not write is refused, a link written through
    title, body = few_labels_body(record)
    return write_page(target, page(title, body))


__all__ = ["command_rows", "few_labels_body", "few_labels_record", "protocol_body", "write_few_labels_report"]
