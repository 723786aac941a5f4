"""The report of a few-label protocol (``evaluate --few-labels``, its ``few_labels.json``): mean Kendall against k
per method, one panel per table, and per (table, k) the means and the engine's paired differences."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping

from autoprox.apps.few_labels import FEW_LABELS_FILE, FORMAT as FEW_LABELS_FORMAT
from autoprox.core.atomic import atomic_write_text
from autoprox.core.errors import ReportError
from autoprox.reports import figures_svg as svg
from autoprox.reports.html import esc, facts, figure, num, page, table, text

__all__ = ["few_labels_body", "few_labels_record", "write_few_labels_report"]



def few_labels_record(path: str | Path) -> dict | None:
    """The few-label record of a protocol folder (or of the file itself), else None."""
    path = Path(path)
    file = path / FEW_LABELS_FILE if path.is_dir() else path
    try:
        data = json.loads(file.read_text(encoding="utf-8")) if file.is_file() else None
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("format") == FEW_LABELS_FORMAT else None


def _interval(difference: Mapping) -> str:
    low, high = difference["interval"]
    return f"[{low:+.3f}, {high:+.3f}]"


def few_labels_body(record: Mapping) -> tuple[str, str]:
    """(title, HTML body) of a few-label record."""
    try:
        spec, results = record["spec"], record["results"]
        methods = spec["methods"]
    except (KeyError, TypeError) as exc:
        raise ReportError(f"a few-label protocol record without {exc}") from None
    title = f"Few-label protocol: {len(spec['tables'])} tables"
    body = f"<h1>{esc(title)}</h1>" + facts([
        ("tables done", f"{len(results)} of {len(spec['tables'])}"), ("labelled rows k", ", ".join(map(str, spec["ks"]))),
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
        body += f"<p>k={esc(k)}, {entry['tables']} tables: " + esc(", ".join(
            f"{m} {v:+.3f}" for m, v in entry["mean"].items())) + "</p>"
    for name, cells in results.items():
        body += f'<h2 id="table-{esc(name)}">{esc(name)}</h2>'
        done = {k: c for k, c in cells.items() if "mean" in c}
        skipped = [f"k={k}: {c['skipped']}" for k, c in cells.items() if "skipped" in c]
        if done:
            body += table(["k", *methods], [[text(k)] + [num(c["mean"][m]) for m in methods] for k, c in done.items()])
            rows = [[text(k), text(m), num(d["mean"]), text(_interval(d)), text(f"{d['ahead']}/{d['draws']}")]
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
    title, body = few_labels_body(record)
    target = Path(out) if out is not None else Path(path) / "report.html"
    atomic_write_text(target, page(title, body))
    return target
