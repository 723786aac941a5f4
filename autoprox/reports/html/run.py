"""The HTML report of one search run: header, evolution curves, hall of fame, chosen proxy, beyond size.

Every number in a table is read from the run's own files (``config.json``, ``log.jsonl``,
``evaluations.jsonl``, ``hall_of_fame.json``, ``best.json``) except the test-split Kendall of
the hall of fame's entries and the chosen proxy's per-architecture scores, which are computed
here from the run's statistics cache (:class:`PartScorer`) exactly as the search computes them:
each architecture's statistics are read from the run's cache once and every genome is evaluated on
them, with the same code, the same statistics plan and one torch thread as the search and
``best.json`` use, so the figures agree with theirs to the last digit. Statistics missing from the
cache are computed first (a progress line on stderr), or, when computing is not allowed (a search in
progress), the part is reported as not available. A run still going has no ``best.json`` yet; its report says so and
shows what is there.
"""

from __future__ import annotations

import math
import shlex
from functools import cached_property
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np

from autoprox.core.errors import AutoproxError, CurvesError, GenomeError, one_line
from autoprox.core.progress import Progress
from autoprox.data.cache import build_cache, load_statistics
from autoprox.genome.tree import (
    InvalidProxy,
    canonical_string,
    genome_extras,
    parse_genome,
    score_architecture,
    uses_spread_terminals,
)
from autoprox.networks.statistics import torch_threads
from autoprox.proxies.scorers import mean_over_seeds
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
from autoprox.reports.html.evolution import curves_section, evaluated_per_iteration
from autoprox.reports.html.protocol import command_rows
from autoprox.search.halloffame import holds_proxy, load_hall_of_fame, search_kendall
from autoprox.search.context import RunContext
from autoprox.search.rundir import (
    HALL_OF_FAME,
    RunDirectory,
    lock_holder,
    read_records,
)

#: Rows of the hall of fame in the report.
HALL_ROWS = 20


def run_body(path: Path, compute: bool, simplify: bool, memo: ReportMemo,
             progress: Callable[[str], None]) -> tuple[str, str]:
    """(title, body HTML) of the run in ``path``; RunDirError on a run whose files cannot be read."""
    from autoprox.reports.curves import load_curves

    run = RunDirectory(path)
    config = run.config()
    settings = config.get("settings") if isinstance(config.get("settings"), dict) else {}
    try:
        curves = load_curves(run.path)
    except CurvesError:  # no iteration logged yet (an initial population being evaluated)
        curves = None
    loaded = load_hall_of_fame(run)
    hall = loaded.hall
    if loaded.note and "unreadable" in loaded.note and ("hall", str(run.path)) not in memo.warned:
        import warnings

        memo.warned.add(("hall", str(run.path)))  # a served page or a search's checkpoints: said once
        warnings.warn(f"{run.file(HALL_OF_FAME)}: {loaded.note}; the report shows the rebuilt one",
                      stacklevel=2)
    best = run.best()
    evaluated = evaluated_per_iteration(run)
    fitness = str(settings.get("fitness") or "jcm")
    name = run.path.resolve().name
    context, context_note = _context(run)
    parts = [_header(run, config, settings, curves, hall, best, name)]
    parts.append(curves_section(curves, evaluated, fitness))
    genomes = [e.genome for e in hall.entries[:HALL_ROWS]]
    chosen = best.get("genome") if best and isinstance(best.get("genome"), str) else None
    test = _test_figures(context, genomes + ([chosen] if chosen else []), compute, memo, progress)
    formulas = _formulas(run, genomes + [e.genome for e in hall.pareto] + ([chosen] if chosen else []), simplify, memo)
    parts.append(_hall_section(hall, best, test, formulas, fitness, context_note, memo))
    parts.append(_chosen_section(run, best, context, context_note, compute, memo, progress, formulas))
    return f"autoprox report: run {name}", "".join(parts)


# --------------------------------------------------------------------------- reading


def _context(run: RunDirectory):
    """The run's RunContext, or None and why (a benchmark not found here: the computed parts are left out)."""
    try:
        return RunContext.open(run), ""
    except AutoproxError as exc:
        return None, f"not computed: {one_line(exc)}"


def _test_figures(context, genomes: Sequence[str], compute: bool, memo: ReportMemo,
                  progress: Callable[[str], None]) -> dict[str, Mapping] | None:
    """Test-split figures by canonical genome, or None when the test split cannot be scored now."""
    if context is None or not context.split.test:
        return None
    scorer = PartScorer(context, "test", memo.statistics)
    if not scorer.available(genomes, compute, progress):
        return None
    found = {}
    for genome in genomes:
        canonical = canonical_string(parse_genome(genome))
        key = (str(context.run.path), "test", canonical)
        if key not in memo.figures:
            memo.figures[key] = scorer.figures(genome)
        found[canonical] = memo.figures[key]
    return found


def _formulas(run: RunDirectory, genomes: Sequence[str], simplify: bool, memo: ReportMemo) -> dict:
    """Readable formulas by genome string (memoised: simplifying takes a SymPy process)."""
    from autoprox.reports.simplify import readable_formulas
    from autoprox.reports.formula_check import statistics_for_check

    wanted = [g for g in dict.fromkeys(genomes) if (g, simplify) not in memo.formulas]
    if wanted:
        check = statistics_for_check(run) if simplify else None
        for genome, formula in zip(wanted, readable_formulas(wanted, check_stats=check, simplify=simplify)):
            memo.formulas[genome, simplify] = formula
    return {g: memo.formulas[g, simplify] for g in genomes}


# ---------------------------------------------------------------------------- header


def _duration(seconds) -> str:
    if not isinstance(seconds, (int, float)) or not math.isfinite(seconds):
        return "n/a"
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours} h {minutes:02d} min" if hours else (f"{minutes} min {secs:02d} s" if minutes else f"{secs} s")


def run_status(best: Mapping | None) -> tuple[str, bool]:
    """(status words, finished?) of a run from its ``best.json``."""
    if best is None:
        return "in progress (or stopped before its first best.json)", False
    if not best.get("finished"):
        return "interrupted", False
    if best.get("stopped_early"):
        return f"finished: stopped early after {best['stopped_early'].get('patience')} iterations without progress", True
    return "finished", True


def _header(run, config, settings, curves, hall, best, name) -> str:
    evolution = settings.get("evolution") if isinstance(settings.get("evolution"), dict) else {}
    split = config.get("split") if isinstance(config.get("split"), dict) else {}
    benchmark = config.get("benchmark") if isinstance(config.get("benchmark"), dict) else {}
    genome = settings.get("genome") if isinstance(settings.get("genome"), dict) else {}
    status, finished = run_status(best)
    iteration = curves.iterations[-1] if curves else 0
    log_path = run.log_path()
    elapsed = None
    for _, record in read_records(log_path):
        elapsed = record.get("elapsed", elapsed)
    weights = settings.get("weights") if isinstance(settings.get("weights"), dict) else {}
    recorded = settings.get("targets") if isinstance(settings.get("targets"), list) else []
    targets = ", ".join(f"{t}{f' (weight {weights[t]:g})' if _is_weight(weights.get(t)) else ''}"
                        for t in recorded if isinstance(t, str))
    rows = [
        ("space", esc(config.get("space", "?"))),
        ("benchmark", esc(f"{benchmark.get('file') or benchmark.get('path') or '?'}, "
                          f"{benchmark.get('architectures', '?')} architectures")),
        ("split", esc(f"{len(split.get('search') or [])} search / {len(split.get('test') or [])} test architectures "
                      f"(split seed {settings.get('split_seed', '?')})")),
        ("targets", esc(targets or "?")),
        ("fitness", esc(f"{settings.get('fitness') or 'jcm'}"
                        + (f", {settings['cv_folds']}-fold cross-validation" if settings.get("cv_folds") else ""))),
        ("genome", esc(genome.get("kind", "template"))),
        ("evolution", esc(f"population {evolution.get('population_size', '?')}, "
                          f"{evolution.get('iterations', '?')} iterations, seed {evolution.get('seed', '?')}"
                          + (f", patience {evolution['patience']}" if evolution.get("patience") else ""))),
        ("statistics", esc(f"input {settings.get('input', '?')}, batch {settings.get('batch_size', '?')}, "
                           f"seeds {settings.get('stat_seeds', '?')}")),
        ("status", f'<span class="status{"" if finished else " unfinished"}" id="status">{esc(status)}</span>'),
        ("iteration", f'<span id="iteration">{iteration}</span> of {esc(evolution.get("iterations", "?"))}'),
        ("genomes evaluated", f'<span id="evaluated">{hall.evaluated}</span> ({hall.valid} valid)'),
        *_time_rows(config, best, elapsed),
        *command_rows(config, run.path),
    ]
    body = f'<header class="top"><h1>Run {esc(name)}</h1><div class="muted">{esc(run.path)}</div></header>'
    body += facts(rows)
    if not finished:
        holder = lock_holder(run.path)
        said = ("Continue it with:" if holder is None else
                f"Being written now by autoprox process {esc(holder)}; should it stop, continue it with:")
        body += f'<p>{said}</p><pre class="command" id="resume">{esc(resume_command(run.path))}</pre>'
    return body


def resume_command(path: Path) -> str:
    """The whole command that continues the run in ``path``, its path quoted for a shell: ``search --resume``,
    or the command of the protocol the run is a fold or a search of (``PROTOCOL/repeat-R/fold-K``,
    ``PROTOCOL/leave-out-SPACE/seed-S``), which resumes its runs itself."""
    protocol = path.parent.parent
    if RunDirectory(protocol).has_protocol():
        mode = " --leave-space-out" if path.parent.name.startswith("leave-out-") else ""
        return f"autoprox evaluate{mode} --resume --out {shlex.quote(str(protocol))}"
    return f"autoprox search --resume --out {shlex.quote(str(path))}"


def _time_rows(config: Mapping, best: Mapping | None, elapsed) -> list[tuple[str, str]]:
    """How long the run took, each figure saying what it counts: the evolution's time the log records, and
    the whole run's, from config.json's creation to best.json's writing (statistics and test figures in)."""
    rows = [("evolution time", f'<span id="evolution-time">{esc(_duration(elapsed))}</span> '
                               '<span class="muted">evaluating genomes: the initial population and the iterations '
                               "(as the log records it); the statistics and the test split's figures not "
                               "counted</span>")]
    whole = _seconds_between(config.get("created"), (best or {}).get("written"))
    if whole is None:
        rows.append(("wall time", '<span id="wall-time">n/a</span> <span class="muted">known once best.json is '
                                  "written (at the end of the search, or when it is stopped)</span>"))
    else:
        rows.append(("wall time", f'<span id="wall-time">{esc(_duration(whole))}</span> <span class="muted">the '
                                  "whole run, from config.json's creation to best.json's writing: statistics and test "
                                  "figures included (and any pause between the sessions of a resumed run)</span>"))
    return rows


def _seconds_between(start, end) -> float | None:
    import datetime as _dt

    try:
        seconds = (_dt.datetime.fromisoformat(str(end)) - _dt.datetime.fromisoformat(str(start))).total_seconds()
    except (TypeError, ValueError):
        return None
    return seconds if seconds >= 0 else None


# ----------------------------------------------------------------------- hall of fame


def _hall_section(hall, best, test, formulas, fitness, context_note, memo) -> str:
    from autoprox.reports.simplify import LEGEND, SPREAD_LEGEND

    body = '<h2 id="hall-of-fame">Hall of fame</h2>'
    rows_in = hall.entries[:HALL_ROWS]
    if not rows_in:
        return body + "<p>Empty: no valid genome evaluated yet.</p>"
    chosen_canonical, chosen_kendall = _canonical(best), search_kendall(best)

    def chosen(entry) -> bool:  # best.json's genome, or the simpler one of its behaviour the hall keeps
        return holds_proxy(entry, chosen_canonical, chosen_kendall)

    targets = list(hall.targets)
    headers = ["rank", fitness, "nodes", "formula", *targets, *(targets if test is not None else ()), "found at"]
    groups = [("", 4), ("Kendall τ, search split", len(targets))]
    groups += [("Kendall τ, test split", len(targets))] if test is not None else []
    groups += [("", 1)]
    rows, classes = [], []
    for rank, entry in enumerate(rows_in, start=1):
        row = [Cell(f"{rank}{'*' if chosen(entry) else ''}"), num(entry.fitness), Cell(str(entry.complexity)),
               formula_cell(formulas[entry.genome], memo, f"hof{rank}"), *(num(entry.kendall.get(t)) for t in targets)]
        if test is not None:
            block = test.get(entry.canonical) or {}
            row += [num(((block.get("targets") or {}).get(t) or {}).get("kendall")) for t in targets]
        row += [Cell(str(entry.iteration))]
        rows.append(row)
        classes.append("chosen" if chosen(entry) else "")
    body += (f"<p>The {len(rows_in)} best distinct proxies of the {hall.evaluated} genomes evaluated "
             f"({esc(HALL_OF_FAME)}); search-split figures as the search measured them"
             + (", test-split Kendall computed from the run's statistics (the test split chose nothing)"
                if test is not None else f"; test-split Kendall {esc(_test_missing(context_note))}")
             + ". * and the shaded row: the proxy best.json holds.</p>")
    body += table(headers, rows, classes, table_id="hall", groups=groups)
    legend = LEGEND + ("; " + SPREAD_LEGEND if any(uses_spread_terminals(parse_genome(e.canonical)) for e in rows_in)
                       else "")
    body += f'<p class="note">{esc(legend)}</p>'
    points = [(e.complexity, e.fitness) for e in rows_in]
    front = [(e.complexity, e.fitness) for e in hall.pareto]
    marked = next(((e.complexity, e.fitness) for e in [*rows_in, *hall.pareto] if chosen(e)), None)
    body += figure(svg.pareto_svg(points, front, marked, fitness, "pareto"),
                   "Grey: the hall of fame; blue: the Pareto front over every valid genome evaluated (no other genome "
                   "has a fitness at least as high with at most as many nodes); star: the chosen proxy.",
                   "figure-pareto")
    return body


def _test_missing(note: str) -> str:
    return note or ("not shown yet: the test split's statistics are computed when the search ends")


def _canonical(best: Mapping | None) -> str | None:
    if not best or not isinstance(best.get("genome"), str):
        return None
    try:
        return canonical_string(parse_genome(best["genome"]))
    except GenomeError:
        return None


# ---------------------------------------------------------------------- chosen proxy


def _tau(block: Mapping | None, target: str):
    return (((block or {}).get("targets") or {}).get(target) or {}).get("kendall")


def _chosen_section(run, best, context, context_note, compute, memo, progress, formulas) -> str:
    body = '<h2 id="chosen">The chosen proxy</h2>'
    if best is None or not isinstance(best.get("genome"), str):
        return body + "<p>best.json is written when the search ends (or is interrupted).</p>"
    genome = best["genome"]
    formula = formulas[genome]
    targets = [t for t in best.get("targets") or []]
    params = best.get("params") if isinstance(best.get("params"), dict) else {}
    body += f'<p class="formula">{formula_cell(formula, memo, "chosen").html}</p>'
    body += f'<p class="mono note">{esc(genome)}</p>'
    rows = [[text(t), num(_tau(best.get("search"), t)), num(_tau(best.get("test"), t)),
             num(_tau(params.get("search"), t)), num(_tau(params.get("test"), t))] for t in targets]
    rows.append([text("JCM"), num((best.get("search") or {}).get("jcm")), num((best.get("test") or {}).get("jcm")),
                 num((params.get("search") or {}).get("jcm")), num((params.get("test") or {}).get("jcm"))])
    body += table(["target", "τ search", "τ test", "params τ search", "params τ test"], rows, table_id="chosen-figures")
    scores = _chosen_scores(context, genome, compute, memo, progress)
    if scores is None:
        body += f"<p>Per-architecture scores {esc(_test_missing(context_note))}.</p>"
    else:
        panels = {}
        for target in targets:
            classes = context.plan.target_classes[target]
            panels[target] = {part: (scores[part][classes], context.accuracies(part, [target])[target])
                              for part in scores}
            panels[target]["title"] = (f"{target}\nτ search {number(_tau(best.get('search'), target))}, test "
                                       f"{number(_tau(best.get('test'), target))}; params test "
                                       f"{number(_tau(params.get('test'), target))}")
        body += figure(svg.scatter_svg(targets, panels, "scatter"),
                       "The chosen proxy's score against each target's accuracy: circles the search architectures it "
                       "was chosen on, triangles the test architectures it never saw. Titles: its Kendall tau and "
                       "the parameter count's on the test split.", "figure-scatter")
    body += _beyond_section(best, context, scores)
    return body


def _chosen_scores(context, genome, compute, memo, progress) -> dict | None:
    """The chosen proxy's scores on each part it has ({part: {class count: array}}), or None."""
    if context is None:
        return None
    found = {}
    for part in ("search", "test"):
        if not context.indices(part):
            continue
        key = (str(context.run.path), part, "scores", genome)
        if key not in memo.figures:
            scorer = PartScorer(context, part, memo.statistics)
            if not scorer.available([genome], compute, progress):
                return None
            try:
                memo.figures[key] = scorer.scores(genome)
            except InvalidProxy:
                memo.figures[key] = None
        if memo.figures[key] is not None:
            found[part] = memo.figures[key]
    return found or None


def _beyond_section(best, context, scores) -> str:
    from autoprox.reports.show import BEYOND_SIZE_LEGEND

    body = '<h3 id="beyond-size">Beyond size</h3>'
    recorded = best.get("beyond_size") if isinstance(best.get("beyond_size"), Mapping) else None
    if recorded:
        blocks, source = dict(recorded), "as best.json records it"
    elif scores is not None:
        blocks = {part: context.beyond_size(scores[part], part) for part in scores}
        source = "computed now from the run's statistics (best.json predates this report)"
    else:
        return body + "<p>Not available: best.json has no beyond-size report and the scores are not computed.</p>"
    blocks = {part: {t: f for t, f in block.items() if isinstance(f, Mapping)} for part, block in blocks.items()
              if isinstance(block, Mapping) and "invalid" not in block and "none" not in block}
    if not blocks:
        return body + "<p>Not available for this proxy (invalid on the split).</p>"
    rows = []
    for part, block in blocks.items():
        for target, f in block.items():
            bar = f.get("bar") if isinstance(f.get("bar"), Mapping) else {}
            beats = f.get("beats_bar")
            rows.append([text(part), text(target), num(f.get("kendall")), num(f.get("kendall_with_params")),
                         num(f.get("kendall_with_depth")), num(f.get("partial_given_params")),
                         num(f.get("partial_given_depth")), text(f"{bar.get('descriptor', '?')}"),
                         num(bar.get("kendall")), text("n/a" if beats is None else ("yes" if beats else "no"))])
    body += (f"<p>Does the proxy see more than size? Figures {esc(source)}: per split and target, its Kendall, its "
             "Kendall with the parameter count and the depth, its partial Kendall given each, and the bar.</p>")
    body += table(["split", "target", "proxy", "w/ params", "w/ depth", "partial|params", "partial|depth", "bar",
                   "bar τ", "beats it?"], rows, table_id="beyond")
    body += figure(svg.beyond_size_svg(blocks, "beyond"), esc(BEYOND_SIZE_LEGEND.replace("\n", " ")),
                   "figure-beyond")
    return body


# ----------------------------------------------- scores on a part of the split


class PartScorer:
    """Scores genomes on one part (``search`` or ``test``) of a run's split.

    ``statistics`` is a dict that keeps the loaded statistics between reports (keyed by
    part and extras), so a served report reads them once.
    """

    def __init__(self, context: RunContext, part: str, statistics: dict) -> None:
        self.context = context
        self.part = part
        self.archs = context.archs(part)
        self.statistics = statistics

    def available(self, genomes: Sequence[str], compute: bool, say: Callable[[str], None]) -> bool:
        """Whether the statistics ``genomes`` read are in the cache (computed first when ``compute``)."""
        if not self.archs:
            return False
        plan = self.context.plan.with_extras(self._extras(genomes))
        requests = plan.requests(self.archs)
        missing = sum(not self.context.cache.contains(r) for r in requests)
        if not missing:
            return True
        if not compute:
            return False
        say(f"computing {missing} missing statistics entries of the {self.part} split "
            f"({len(self.archs)} architectures)")
        build_cache(self.context.cache, requests, workers=self.context.settings.workers,
                    progress=Progress(f"statistics, {self.part} split", every=15))
        return True

    @cached_property
    def _terminals(self) -> list[dict[str, float]]:
        """Each architecture's scalar terminal values, read once for every genome the report scores."""
        return self.context.scalar_terminals(self.archs)

    def scores(self, genome: str) -> dict[int, object]:
        """The genome's scores per class count (mean over the plan's seeds); InvalidProxy when it fails."""
        tree = parse_genome(genome)
        extras = genome_extras(tree)
        stats = self._loaded(extras)
        terminals = self._terminals
        per_key = {}
        with torch_threads(1):
            for key, sets in stats.items():
                values = []
                for index, blocks in enumerate(sets):
                    try:
                        values.append(score_architecture(tree, blocks, terminals[index]))
                    except InvalidProxy as exc:
                        raise InvalidProxy(f"invalid on the {self.part} split (architecture {index}: {exc})") from None
                per_key[key] = values
        return mean_over_seeds({key: np.asarray(v, dtype=np.float64) for key, v in per_key.items()})

    def figures(self, genome: str) -> Mapping:
        """Per-target correlations and the JCM of the genome on this part, or ``{"invalid": reason}``."""
        try:
            return self.context.figures(self.scores(genome), self.part)
        except InvalidProxy as exc:
            return {"invalid": str(exc)}

    def _extras(self, genomes: Sequence[str]) -> tuple[str, ...]:
        found: list[str] = []
        for genome in genomes:
            found += [e for e in genome_extras(parse_genome(genome)) if e not in found]
        return tuple(found)

    def _loaded(self, extras: tuple[str, ...]) -> dict:
        key = (str(self.context.run.path if self.context.run else ""), self.part, extras)
        if key not in self.statistics:
            plan = self.context.plan.with_extras(extras)
            self.statistics[key] = load_statistics(self.context.cache, plan, self.archs, mapped=True)
        return self.statistics[key]


__all__ = ["HALL_ROWS", "PartScorer", "run_body", "run_status"]


def _is_weight(value) -> bool:
    """Whether a recorded weight is a number to print (a hand-edited config.json may hold anything)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)
