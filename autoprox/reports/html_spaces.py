"""The report of an N-space protocol (``evaluate --leave-space-out --rank-formulas``): per left-out
space, the searched formulas, the label-free baselines and a forest plot of the paired intervals."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping

from autoprox.core.errors import ReportError
from autoprox.reports import figures_svg as svg
from autoprox.reports.html import esc, facts, figure, num, table, text

__all__ = ["SPACE_PROTOCOL_FORMAT", "space_protocol_body"]

SPACE_PROTOCOL_FORMAT = "autoprox-space-protocol/1"


def _interval(pair: Mapping) -> dict:
    """A paired bootstrap interval in the forest plot's terms (the bootstrap interval drawn as both)."""
    return {"mean": pair["difference"], "ci": [pair["low"], pair["high"]], "corrected_ci": [pair["low"], pair["high"]]}


def _evolution_size(settings: dict) -> tuple[str, str]:
    """The searches' size as a fact: iterations of the engine's evolution, or the generations of a record made
    before the rank-formula search ran on it (the generational search, ``generations``)."""
    if "iterations" in settings:
        return "iterations x population", f"{settings['iterations']} x {settings['population']}"
    return "generations x population", f"{settings['generations']} x {settings['population']}"


def space_protocol_body(protocol_file: Path) -> tuple[str, str]:
    """(title, HTML body) of the N-space protocol in ``protocol_file``."""
    try:
        record = json.loads(protocol_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ReportError(f"{protocol_file}: not readable as JSON ({exc})") from None
    spec, directions = record["spec"], record["directions"]
    title = f"N-space protocol: {', '.join(spec['spaces'])}"
    settings = spec["settings"]
    body = f"<h1>{esc(title)}</h1>" + facts([
        ("spaces", ", ".join(spec["spaces"])), ("seeds per left-out space", str(len(spec["seeds"]))),
        ("objective", settings["objective"]), _evolution_size(settings),
        ("bootstrap resamples", str(spec["samples"])), ("left-out spaces done", f"{len(directions)} of "
                                                                               f"{len(spec['spaces'])}")])
    body += ("<p>Each space is left out in turn. Formulas are searched and chosen on the other spaces alone; on the "
             "left-out space no label is used to choose anything. Figures: the mean Kendall over the space's "
             "(table, target) pairs, every row.</p>")
    summary = record.get("summary")
    if summary:
        rows = [[text(name), num(row["mean"]), text(str(row["spaces"]))]
                for name, row in sorted(summary.items(), key=lambda item: -item[1]["mean"])]
        body += '<h2 id="summary">Mean over left-out spaces</h2>' + table(["method", "mean", "spaces"], rows,
                                                                          table_id="summary-table")
    for space, d in directions.items():
        body += f'<h2 id="left-out-{esc(space)}">Left out: {esc(space)}</h2>'
        body += f"<p>Searched on {esc(', '.join(d['training']))}.</p>"
        rows = [[text(f"seed {s['seed']}"), text(s["formula"]), num(s["figure"]),
                 num(min(s["training"].values()))] for s in d["searched"]]
        body += table(["search", "formula", "left-out figure", "worst training figure"], rows)
        rows = [[text(name), text(d["chosen_on_training"].get(name) or d["baselines"].get(name, "")),
                 num(value)] for name, value in sorted(d["figures"].items(), key=lambda item: -item[1])]
        body += table(["baseline", "formula", "left-out figure"], rows)
        if d["paired"]:
            baselines = list(d["paired"])
            differences = {"searched": {name: _interval(pair) for name, pair in d["paired"].items()}}
            body += figure(svg.forest_svg(["searched"], baselines, differences, f"forest-{space}",
                                          "searched minus baseline, Kendall on the left-out space (95% paired "
                                          "bootstrap interval)"),
                           f"Left out {esc(space)}: the searched formulas (mean over seeds) minus each label-free "
                           "baseline, Kendall; circle the observed difference, bar the 95% paired bootstrap interval "
                           "over the space's rows. Right of zero: the searched formulas rank better.",
                           f"figure-forest-{space}")
            rows = [[text(name), num(p["difference"]), text(f"[{p['low']:+.3f}, {p['high']:+.3f}]"),
                     text(f"{p['seeds_ahead']}/{len(d['searched'])}")] for name, p in d["paired"].items()]
            body += table(["searched minus", "difference", "95% interval", "seeds ahead"], rows)
    return title, body
