"""The HTML reports of the protocols that leave a space out: the leave-one-space-out protocol (``autoprox
evaluate --leave-space-out``) and the N-space protocol (``evaluate --leave-space-out --rank-formulas``).

Everything shown is what its ``protocol.json`` records (:mod:`autoprox.apps.protocols.cross_space`): per
left-out space, the searches (one per seed, on every architecture of the other spaces) with the
proxy each chose, each method's Kendall and JCM on every architecture of the left-out space, and
the paired difference of the seed-averaged searched proxy against each baseline with its bootstrap
interval over the left-out architectures. A committed protocol keeps a trimmed ``protocol.json``
(runs/README.md): the figures are all there, the per-architecture scores are not needed.

The N-space protocol's report (:func:`space_protocol_body`) shows, per left-out space, the searched
formulas, the label-free baselines and a forest plot of the paired intervals.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Mapping, Sequence

from autoprox.core.atomic import load_json
from autoprox.core.errors import AutoproxError, ReportError
from autoprox.reports.html import figures as svg
from autoprox.reports.html.page import (
    Cell,
    ReportMemo,
    esc,
    facts,
    figure,
    formula_cell,
    num,
    number,
    table,
    text,
)
from autoprox.reports.html.protocol import command_rows
from autoprox.search.rundir import PROTOCOL

#: The searched proxy's name in the summary (:data:`autoprox.apps.protocols.cross_space.SEARCHED`).
SEARCHED = "searched"
#: The reference that uses the left-out space's own labels (:data:`autoprox.apps.protocols.cross_space.OWN_BLEND`).
OWN_BLEND = "blend-own"


def is_cross_space(protocol: Mapping) -> bool:
    """Whether a ``protocol.json`` is a leave-one-space-out protocol's."""
    spec = protocol.get("protocol")
    return (isinstance(spec, Mapping) and spec.get("mode") == "leave-space-out") or "directions" in protocol


def _done(search: Mapping) -> bool:
    return bool(search.get("scores")) or isinstance(search.get("genome"), str)


def cross_space_body(path: Path, protocol: Mapping, simplify: bool, memo: ReportMemo) -> tuple[str, str]:
    """(title, body HTML) of the leave-one-space-out protocol in ``path`` (its ``protocol.json`` read)."""
    try:
        spec, directions = dict(protocol["protocol"]), list(protocol["directions"])
        targets = list(protocol["targets"])
        settings = dict(protocol.get("settings") or {})
        for direction in directions:
            direction["left_out"], list(direction["searches"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ReportError(f"{path / PROTOCOL}: not a leave-one-space-out protocol this autoprox can read "
                          f"(no {exc})") from None
    name = path.resolve().name
    summary = protocol.get("summary") if isinstance(protocol.get("summary"), Mapping) else {}
    searches = [s for d in directions for s in d["searches"]]
    done = sum(_done(s) for s in searches)
    finished = bool(protocol.get("finished"))
    evolution = settings.get("evolution") if isinstance(settings.get("evolution"), Mapping) else {}
    genome = settings.get("genome") if isinstance(settings.get("genome"), Mapping) else {}
    rows = [("spaces", esc(", ".join(map(str, protocol.get("spaces") or [d["left_out"] for d in directions])))),
            ("design", esc(f"each space left out in turn; {spec.get('seeds', '?')} search seed(s) per left-out space, "
                           "each search on every architecture of the other spaces, its proxy then scored on every "
                           f"architecture of the left-out one; {spec.get('bootstrap', '?')} bootstrap resamples of "
                           "those architectures")),
            ("search", esc(f"population {evolution.get('population_size', '?')}, {evolution.get('iterations', '?')} "
                           f"iterations, first seed {evolution.get('seed', '?')}; genome {genome.get('kind', '?')} "
                           f"({', '.join(genome.get('aggregations') or [])}"
                           + (f"; terminals {', '.join(genome['terminals'])}" if genome.get("terminals") else "")
                           + f"); fitness {settings.get('fitness') or 'jcm'}; evaluation "
                           f"{settings.get('evaluation') or 'exact'}")),
            ("targets", esc(", ".join(targets))),
            ("zoo baselines", esc(", ".join(spec.get("zoo") or []) or "none")),
            ("status", f'<span class="status{"" if finished else " unfinished"}" id="status">'
                       f"{esc('finished' if finished else 'unfinished')}: {done} of {len(searches)} searches</span>"),
            *command_rows(protocol, path)]
    archive = protocol.get("archive") if isinstance(protocol.get("archive"), Mapping) else None
    if archive:
        rows.append(("archive", esc(f"{archive.get('dropped')}" if archive.get("dropped") else
                                    f"{archive.get('holds', 'the searches')} are packed in "
                                    f"{archive.get('file', 'archive.tar.xz')} ({archive.get('unpack', '')})")))
    body = (f'<header class="top"><h1>Leave-one-space-out protocol {esc(name)}</h1>'
            f'<div class="muted">{esc(path)}</div></header>' + facts(rows))
    if not finished:
        body += ('<p>Continue it with:</p><pre class="command" id="resume">'
                 f"{esc(f'autoprox evaluate --leave-space-out --resume --out {shlex.quote(str(path))}')}</pre>")
    body += _forest_section(directions, summary)
    formulas = _formulas([s.get("genome") for s in searches], simplify, memo)
    for index, direction in enumerate(directions):
        body += _direction_section(index, direction, summary.get(direction["left_out"]) or {}, targets, formulas,
                                   memo)
    return f"autoprox report: leave-one-space-out protocol {name}", body


def _formulas(genomes: Sequence, simplify: bool, memo: ReportMemo) -> dict:
    from autoprox.reports.simplify import readable_formulas

    for genome in dict.fromkeys(g for g in genomes if isinstance(g, str)):
        if (genome, simplify) not in memo.formulas:
            try:
                memo.formulas[genome, simplify] = readable_formulas([genome], simplify=simplify)[0]
            except AutoproxError:  # not a genome this autoprox reads: shown as recorded
                memo.formulas[genome, simplify] = None
    return {g: memo.formulas.get((g, simplify)) for g in genomes if isinstance(g, str)}


def _interval(diff: Mapping) -> list:
    interval = diff.get("interval") if isinstance(diff.get("interval"), Mapping) else {}
    return [interval.get("low"), interval.get("high")]


def _forest_section(directions: Sequence[Mapping], summary: Mapping) -> str:
    body = '<h2 id="differences">Paired differences per left-out space</h2>'
    spaces = [d["left_out"] for d in directions if (summary.get(d["left_out"]) or {}).get("differences")]
    if not spaces:
        return body + "<p>No left-out space has a finished search and its baselines yet: no difference to show.</p>"
    baselines = list(dict.fromkeys(b for s in spaces for b in summary[s]["differences"]))
    differences = {space: {b: {"mean": d.get("difference"), "ci": _interval(d),
                               "corrected_ci": [d.get("per_seed_min"), d.get("per_seed_max")]}
                           for b, d in summary[space]["differences"].items()} for space in spaces}
    labels = {space: f"left out {space}" for space in spaces}
    body += figure(svg.forest_svg([labels[s] for s in spaces], baselines,
                                  {labels[s]: differences[s] for s in spaces}, "forest",
                                  xlabel="searched proxy minus baseline, JCM on the left-out space (thick: 95% "
                                         "bootstrap interval; thin: range over seeds)"),
                   "Per left-out space, the searched proxy (its JCM averaged over the seeds) minus each baseline, on "
                   "every architecture of the space it never saw: the observed difference (circle), its 95% bootstrap "
                   "interval over the left-out architectures, each resample scoring every method on the same "
                   "architectures (thick), and the range of the single seeds' differences (thin). Right of zero: the "
                   f"searched proxy ranks better. {OWN_BLEND} is fitted on the left-out space's own labels: an "
                   "in-sample ceiling, not a fair competitor.", "figure-forest")
    return body


def _direction_section(index: int, direction: Mapping, summary: Mapping, targets: Sequence[str],
                       formulas: Mapping, memo: ReportMemo) -> str:
    space = direction["left_out"]
    trained = ", ".join(map(str, direction.get("trained_on") or []))
    body = f'<h2 id="left-out-{esc(space)}">Left out: {esc(space)} (searched on {esc(trained)})</h2>'
    figures = summary.get("figures") if isinstance(summary.get("figures"), Mapping) else {}
    rows = []
    for search in direction["searches"]:
        found = figures.get(f"seed-{search.get('seed')}") or {}
        kendall = found.get("kendall") or {}
        genome = search.get("genome")
        formula = formulas.get(genome) if isinstance(genome, str) else None
        shown = (formula_cell(formula, memo, f"lso{index}-{search.get('seed')}") if formula is not None
                 else Cell(f'<span class="mono">{esc(genome if genome else "not finished")}</span>', "formula"))
        rows.append([Cell(esc(search.get("seed", "?"))), num(found.get("jcm")), *(num(kendall.get(t)) for t in targets),
                     num(search.get("search_jcm")), Cell(esc(search.get("iteration", "n/a"))),
                     num(search.get("seconds"), 0, signed=False), shown])
    body += (f"<p>One search per seed on every architecture of {esc(trained)}; its best proxy (chosen on those "
             f"spaces' figures alone) scored on every architecture of {esc(space)}.</p>")
    body += table(["seed", f"JCM on {space}", *(f"τ {t}" for t in targets), "search fitness", "iterations", "seconds",
                   "chosen proxy"], rows, table_id=f"searches-{space}")
    searched = summary.get(SEARCHED) if isinstance(summary.get(SEARCHED), Mapping) else None
    differences = summary.get("differences") if isinstance(summary.get("differences"), Mapping) else {}
    if not searched:
        return body + "<p>No search finished for this space yet.</p>"
    method_rows = [[text(f"searched proxy (mean of {summary.get('seeds')} seeds)"),
                    Cell(esc(f"{number(searched.get('jcm_mean'))} ± {number(searched.get('jcm_sd'), signed=False)}")),
                    *(num((searched.get("kendall_mean") or {}).get(t)) for t in targets),
                    Cell(""), Cell(""), Cell(""), Cell("")]]
    for name, diff in differences.items():
        kendall = (figures.get(name) or {}).get("kendall") or {}
        low, high = _interval(diff)
        method_rows.append([text(name + (" (in-sample)" if name == OWN_BLEND else "")), num(diff.get("jcm")),
                            *(num(kendall.get(t)) for t in targets), num(diff.get("difference")),
                            Cell(esc(f"[{number(low)}, {number(high)}]")),
                            Cell(esc(f"[{number(diff.get('per_seed_min'))}, {number(diff.get('per_seed_max'))}]")),
                            Cell(esc(f"{diff.get('seeds_ahead', '?')}/{summary.get('seeds', '?')}"))])
    body += (f"<p>Every method on every architecture of {esc(space)}: JCM and Kendall per target; the searched proxy "
             "minus each baseline (JCM), its 95% bootstrap interval, the range over the seeds, and the seeds ahead of "
             "the baseline.</p>")
    body += table(["method", "JCM", *(f"τ {t}" for t in targets), "proxy - it", "95% bootstrap interval",
                   "range over seeds", "seeds ahead"], method_rows, table_id=f"methods-{space}")
    return body


# -------------------------------------------------------- the N-space protocol


#: The format of an N-space protocol's record (:mod:`autoprox.apps.protocols.space`).
SPACE_PROTOCOL_FORMAT = "autoprox-space-protocol/1"


def _forest_interval(pair: Mapping) -> dict:
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
        record = load_json(protocol_file.read_text(encoding="utf-8"))
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
            differences = {"searched": {name: _forest_interval(pair) for name, pair in d["paired"].items()}}
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


__all__ = ["SPACE_PROTOCOL_FORMAT", "cross_space_body", "is_cross_space", "space_protocol_body"]
