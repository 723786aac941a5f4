"""``autoprox show``: a run's hall of fame with readable formulas and, on request, the
beyond-size figures of each entry."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Callable, Iterable, Mapping

from autoprox.core.errors import ConfigError
from autoprox.core.correlation import kendall_null_sd
from autoprox.core.numbers import format_float
from autoprox.genome.tree import InvalidProxy, canonical_string, parse_genome, uses_spread_terminals
from autoprox.core.errors import GenomeError
from autoprox.search.halloffame import (
    Entry,
    holds_proxy,
    load_hall_of_fame,
    search_kendall,
    write_hall_of_fame,
)
from autoprox.search.rundir import BEST, HALL_OF_FAME, RunDirectory, python_call, shown_command
from autoprox.core.errors import RunDirError


def format_beyond_size(blocks: Mapping[str, Mapping], label: str = "split") -> list[str]:
    """Lines of a beyond-size table: one row per (row label, target).

    ``blocks`` maps a row label (a split, a hall-of-fame rank) to a
    :func:`autoprox.spaces.descriptors.beyond_size` report ({target: figures}) or to
    ``{"invalid": reason}``.
    """
    width = max([len(label)] + [len(str(k)) for k in blocks])
    targets = [t for block in blocks.values() for t in block if t != "invalid"]
    target_width = max([6] + [len(t) for t in targets])
    header = f"  {label:<{width}}  {'target':<{target_width}}" + "".join(
        f"{name:>{w}}" for name, _, w in _BEYOND_COLUMNS) + f"  {'bar (tau)':<18}beats it?"
    lines = [header]
    for name, block in blocks.items():
        if "invalid" in block:
            lines.append(f"  {name:<{width}}  invalid: {block['invalid']}")
            continue
        for target, figures in block.items():
            bar = figures.get("bar") if isinstance(figures.get("bar"), Mapping) else {}
            bar_text = f"{bar.get('descriptor', '?')} ({_tau(bar.get('kendall'))})"
            beats = figures.get("beats_bar")
            lines.append(f"  {name:<{width}}  {target:<{target_width}}" + "".join(
                f"{_tau(figures.get(key)):>{w}}" for _, key, w in _BEYOND_COLUMNS)
                + f"  {bar_text:<18}{'n/a' if beats is None else ('yes' if beats else 'no')}")
    return lines


def hall_beyond_size(run: RunDirectory, entries: Iterable[Entry], progress: bool = True) -> tuple[dict[str, dict], int]:
    """The beyond-size report of each entry on the run's search split.

    The benchmark, the split and the statistics plan are the run's (``config.json``);
    scores come from the statistics cache (what is missing is computed first, with a
    progress line on stderr). Only the search split is read. Returns ({canonical genome:
    report}, number of search architectures).
    """
    import sys

    from autoprox.core.progress import Progress
    from autoprox.data.cache import build_cache
    from autoprox.proxies.proxy import Proxy
    from autoprox.search.multispace import open_context

    context = open_context(run)
    indices = context.indices("search")
    entries = list(entries)
    for part in getattr(context, "parts", (context,)):  # a multi-space run: each benchmark's
        requests = part.plan.requests(part.archs("search"))
        missing = sum(not part.cache.contains(r) for r in requests)
        if missing:
            if progress:
                print(f"beyond size: computing {missing} missing statistics entries of the search split",
                      file=sys.stderr)
            build_cache(part.cache, requests, workers=part.settings.workers,
                        progress=Progress("statistics", every=15) if progress else None)
    ticker = Progress(f"beyond size of {len(entries)} proxies, search split", every=5) if progress else None
    reports = {}
    if ticker:
        ticker(0, len(entries))
    for done, entry in enumerate(entries, start=1):
        proxy = Proxy(entry.genome, parse_genome(entry.genome))
        try:
            reports[entry.canonical] = context.beyond_size(context.score(proxy, "search", workers=1), "search")
        except InvalidProxy as exc:
            reports[entry.canonical] = {"invalid": str(exc)}
        if ticker:
            ticker(done, len(entries))
    return reports, len(indices)


def _heading_lines(run: RunDirectory, config: Mapping, hall, best: Mapping | None, settings: Mapping) -> list[str]:
    """The first lines of ``autoprox show``: the run's progress, best.json's verdict, deferred test figures."""
    done = _iterations_done(run, hall.iteration)
    evolution = settings.get("evolution") if isinstance(settings.get("evolution"), dict) else {}
    iterations = evolution.get("iterations")
    status = "finished" if best and best.get("finished") else "in progress or interrupted"
    if best is None and run.file(BEST).exists():  # unreadable: the log says whether every iteration was done
        finished = isinstance(iterations, int) and done >= iterations
        status = f"{'every iteration done' if finished else 'in progress or interrupted'}; best.json unreadable"
    early = best.get("stopped_early") if best else None
    if status == "finished" and isinstance(early, Mapping):
        status = f"stopped early: no better proxy in {early.get('patience')} iterations (--patience)"
    lines = [f"run {run.path}: {config.get('space', '?')}, iteration {done} of {iterations} ({status}), "
             f"{hall.evaluated} genomes evaluated, {hall.valid} valid"]
    verdict = params_verdict(best) if best else None
    if verdict:
        lines.append(f"best.json: {verdict}")
    small = small_test_note(best) if best else None
    if small:
        lines.append(f"best.json: {small}")
    deferred = best.get("test") if best else None
    if isinstance(deferred, Mapping) and str(deferred.get("none", "")).startswith("not computed"):
        lines.append(f"test figures {deferred['none']}")
    return lines


def _beyond_size_lines(run: RunDirectory, best: Mapping | None, rows: list, is_best: Callable[[object], bool],
                       beyond_size: bool) -> list[str]:
    """The beyond-size report of best.json's proxy, and with ``beyond_size`` the one computed now for ``rows``."""
    lines: list[str] = []
    if best is not None:
        block = best.get("beyond_size")
        if isinstance(block, Mapping) and block:
            lines.append("beyond size of the proxy best.json holds (*), on the search split and the test split "
                         "(the test split chose nothing):")
            lines += format_beyond_size({name: _readable_block(block[name]) for name in ("search", "test")
                                         if name in block and not _no_part(block[name])})
            if not beyond_size:  # else once, after the hall of fame's block
                lines.append(BEYOND_SIZE_LEGEND)
        else:
            lines.append("best.json has no beyond-size report (written before it existed)"
                         + ("" if beyond_size else "; --beyond-size computes one for the hall of fame"))
    if beyond_size:
        reports, count = hall_beyond_size(run, rows)
        lines.append(f"beyond size of the hall of fame, computed now on the search split ({count} architectures, "
                     "the run's statistics):")
        labels = {}
        for rank, entry in enumerate(rows, start=1):
            mark = "*" if is_best(entry) else ""
            labels[f"#{rank}{mark}"] = reports[entry.canonical]
        lines += format_beyond_size(labels, label="rank")
        lines.append(BEYOND_SIZE_LEGEND)
    return lines


def _formula_notes(rows: list, by_canonical: Mapping) -> list[str]:
    """The notes of the shown formulas (an outer transform, a simplification note), by rank."""
    notes = []
    for rank, entry in enumerate(rows, start=1):
        formula = by_canonical[entry.canonical]
        if formula.outer:
            notes.append(f"  #{rank}: {formula.outer_text()}")
        if formula.note:
            notes.append(f"  #{rank}: {formula.note}")
    return notes


def show_run(path: str | Path, top: int = 10, simplify: bool = True, latex: bool = False,
             timeout: float | None = None, save: bool = False, beyond_size: bool = False) -> str:
    """The text ``autoprox show`` prints: the hall of fame as a table, its notes, the Pareto front, and
    the beyond-size report of ``best.json`` (``beyond_size``: also computed for each shown entry on the
    search split)."""
    from autoprox.reports.simplify import DEFAULT_TIMEOUT, LEGEND, SPREAD_LEGEND, readable_formulas
    from autoprox.reports.formula_check import statistics_for_check

    if top < 1:
        raise ConfigError(f"--top must be at least 1, got {top}")
    run = RunDirectory(path)
    config = run.config()
    loaded = load_hall_of_fame(run)
    hall = loaded.hall
    if loaded.source == "file" and loaded.note:
        warnings.warn(loaded.note, stacklevel=2)
    if save:
        with run.lock():  # refused while a search writes this run
            write_hall_of_fame(run, hall)
    best = readable_best(run)
    best_canonical = None
    if best is not None and not isinstance(best.get("genome"), str):
        warnings.warn(f"{run.file(BEST)}: no 'genome' string; shown without it", stacklevel=2)
        best = None
    if best:
        try:
            best_canonical = canonical_string(parse_genome(best["genome"]))
        except GenomeError as exc:
            warnings.warn(f"{run.file(BEST)}: its genome is not valid ({exc}); shown without it", stacklevel=2)
            best = None
    best_kendall = search_kendall(best)

    def is_best(entry) -> bool:
        return holds_proxy(entry, best_canonical, best_kendall)

    settings = config.get("settings") if isinstance(config.get("settings"), dict) else {}
    lines = _heading_lines(run, config, hall, best, settings)
    lines += _setting_lines(settings, config, best)
    source = f"{HALL_OF_FAME}" if loaded.source == "file" else loaded.note
    rows = hall.entries[:top]
    if not rows:
        lines.append(f"hall of fame ({source}): empty, no valid genome evaluated yet")
        return "\n".join(lines) + "\n"
    front = [e for e in hall.pareto if all(e.canonical != r.canonical for r in rows)]
    check = statistics_for_check(run) if simplify else None
    formulas = readable_formulas([e.genome for e in rows + front], check_stats=check,
                                 timeout=timeout or DEFAULT_TIMEOUT, simplify=simplify)
    by_canonical = {e.canonical: f for e, f in zip(rows + front, formulas)}
    targets = hall.targets
    lines.append(f"hall of fame ({source}); top {len(rows)} of {len(hall.entries)} kept; "
                 "search-split figures; * = the proxy best.json holds")
    widths = [max(len(t), 6) for t in targets]
    # A run whose fitness is not the plain JCM shows both: the fitness ranks, the JCM beside it.
    plain = _plain_fitness(settings)
    lead = f"{'JCM':>6}" if plain else f"{'fitness':>7}  {'JCM':>6}"
    header = f"{'rank':>5}  {lead}  " + "  ".join(f"{t:>{w}}" for t, w in zip(targets, widths)) + "  nodes  formula"
    lines.append(header)
    first_rank: dict[str, int] = {}
    for rank, entry in enumerate(rows, start=1):
        mark = "*" if is_best(entry) else " "
        taus = "  ".join(f"{_tau(entry.kendall.get(t)):>{w}}" for t, w in zip(targets, widths))
        text = by_canonical[entry.canonical].text
        same = f"   (same formula as #{first_rank[text]})" if text in first_rank else ""
        first_rank.setdefault(text, rank)
        figure = format_float(entry.jcm) if plain else f"{format_float(entry.fitness):>7}  {format_float(entry.jcm)}"
        lines.append(f"{rank:>4}{mark}  {figure}  {taus}  {entry.complexity:>5}  {text}{same}")
    alike = next((r for r, e in enumerate(rows, start=1) if is_best(e) and e.canonical != best_canonical), None)
    if alike is not None:
        lines.append(f"best.json holds {best['genome']}, kept as #{alike} (the same ranking: the hall keeps one genome per ranking, the simplest)")
    elif best is not None and best_canonical is not None and not any(is_best(r) for r in rows):
        rank = next((r for r, e in enumerate(hall.entries, start=1) if is_best(e)), None)
        where = f"rank {rank} of the hall of fame" if rank else "not in the hall of fame"
        lines.append(f"best.json holds {best['genome']} ({where})")
    elif best is None:
        lines.append("best.json not written yet (the run is in progress)")
    notes = _formula_notes(rows, by_canonical)
    if notes:
        lines += ["notes:"] + notes
    lines.append(f"Pareto front of {'JCM' if plain else 'fitness'} against complexity (every valid genome seen):")
    for entry in hall.pareto:
        rank = hall.rank_of(entry.canonical)
        label = f"#{rank}" if rank and rank <= len(rows) else by_canonical[entry.canonical].text
        figure = f"JCM {format_float(entry.jcm)}" if plain else \
            f"fitness {format_float(entry.fitness)}  JCM {format_float(entry.jcm)}"
        lines.append(f"  {entry.complexity:>3} nodes  {figure}  {label}")
    if latex:
        lines.append("LaTeX:")
        lines += [f"  #{rank}: {by_canonical[e.canonical].latex}" for rank, e in enumerate(rows, start=1)]
    lines.append(LEGEND)
    if any(uses_spread_terminals(parse_genome(entry.canonical)) for entry in rows):
        lines.append(SPREAD_LEGEND)
    lines += _beyond_size_lines(run, best, rows, is_best, beyond_size)
    return "\n".join(lines) + "\n"


def params_verdict(report: Mapping) -> str | None:
    """One plain line: the proxy's JCM against the parameter count's on the test split (the search
    split when the run has no test figures), and whether it beats it (a difference that prints as 0.000 is a
    tie); None without figures."""
    recorded = report.get("params") if isinstance(report.get("params"), Mapping) else {}
    for part in ("test", "search"):
        proxy, params = report.get(part), recorded.get(part)
        if not isinstance(proxy, Mapping) or not isinstance(params, Mapping):
            continue
        mine, theirs = proxy.get("jcm"), params.get("jcm")
        if isinstance(mine, (int, float)) and isinstance(theirs, (int, float)):
            verdict = ("the proxy ties it (they differ by less than 0.0005)" if abs(mine - theirs) < 0.0005
                       else f"the proxy beats it by {mine - theirs:.3f}" if mine > theirs
                       else "the proxy does not beat it")
            return f"{part} JCM {mine:.3f} against the parameter count's {theirs:.3f}: {verdict}"
    return None


#: A test split of fewer architectures than this gets :func:`small_test_note`.
SMALL_TEST_SPLIT = 20


def small_test_note(report: Mapping) -> str | None:
    """One line when a run's test split (for a run of several benchmarks, the smallest one's) holds fewer than
    :data:`SMALL_TEST_SPLIT` architectures, so that its test figures mean little; None otherwise or without a
    test figures."""
    test = report.get("test")
    if not isinstance(test, Mapping) or not isinstance(test.get("jcm"), (int, float)):
        return None
    split = report.get("split")
    entries = split if isinstance(split, list) else [split]
    sizes = [(len(e["test"]), e.get("space")) for e in entries
             if isinstance(e, Mapping) and isinstance(e.get("test"), list) and e["test"]]
    if not sizes:
        return None
    n, space = min(sizes, key=lambda s: s[0])
    if n >= SMALL_TEST_SPLIT:
        return None
    where = f"{space}'s test split" if isinstance(split, list) and space else "the test split"
    return (f"{where} holds {n} architectures (fewer than {SMALL_TEST_SPLIT}): a Kendall over {n} has a standard "
            f"deviation of about {kendall_null_sd(n):.2f} (sqrt(2(2n+5)/(9n(n-1)))), so the test figures mean little; "
            "a benchmark of more architectures judges the proxy")


BEYOND_SIZE_LEGEND = ("  Kendall tau-b; w/ params, w/ depth: the proxy's own Kendall with the parameter count, the depth; "
                      "partial|params, partial|depth: its partial Kendall with the target given them;\n"
                      "  bar: the best coarse descriptor for the target (params, depth, width, macs) on the same "
                      "architectures, the Kendall the proxy has to clear")


def _setting_lines(settings: Mapping, config: Mapping, best: Mapping | None) -> list[str]:
    """What a run's fitness, split and restarts make of the figures below (nothing for the paper's setting), and
    the command that made it."""
    lines = []
    if not _plain_fitness(settings):
        fitness = settings.get("fitness", "jcm")
        folds = settings.get("cv_folds") or 0
        what = fitness + (f", the {settings.get('cv_mode', 'mean')} over {folds} folds of the search split" if folds
                          else "")
        lines.append(f"fitness {what}: the fitness column holds it (what the search ranked by); JCM and the "
                     "per-target columns hold the plain JCM and Kendall on the search split")
    split = config.get("split")
    if isinstance(split, Mapping) and split.get("test") == []:
        lines.append("no test part: the search used every architecture")
    restarts = best.get("restarts") if isinstance(best, Mapping) else None
    if isinstance(restarts, Mapping):
        lines.append(f"restarts: {restarts.get('made')} of {restarts.get('allowed')} made; the best proxy is the best "
                     "of every population")
    made_by = made_by_line(config)
    return lines + ([made_by] if made_by else [])


def made_by_line(config: Mapping) -> str | None:
    """``made by: ...``, the command a run's ``config.json`` records as the one that made it (a run made from Python:
    its call, said to be one); None when it records none."""
    command = config.get("command")
    if not isinstance(command, list) or not command:
        return None
    words = [str(word) for word in command]
    return f"made by: {shown_command(words)}" + (" (from Python)" if python_call(words) else "")


def _plain_fitness(settings: Mapping) -> bool:
    """Whether a run's recorded settings make its fitness the plain JCM (the paper's: ``jcm``, no folds)."""
    return settings.get("fitness", "jcm") == "jcm" and not settings.get("cv_folds")


def _no_part(block) -> bool:
    """Whether a block of ``best.json`` stands for a part the run does not have (``{"none": why}``)."""
    return isinstance(block, Mapping) and "none" in block


def _tau(value) -> str:
    return format_float(value)


def _readable_block(block) -> dict:
    """A beyond-size block of ``best.json`` as :func:`format_beyond_size` reads it (anything else left out)."""
    if not isinstance(block, Mapping):
        return {"invalid": "unreadable in best.json"}
    if "invalid" in block:
        return {"invalid": str(block["invalid"])}
    return {str(t): figures for t, figures in block.items() if isinstance(figures, Mapping)}


def readable_best(run: RunDirectory) -> dict | None:
    """``best.json``, or None when there is none yet; one unreadable is named in a warning and left aside."""
    try:
        return run.best()
    except RunDirError as exc:
        warnings.warn(f"{exc}; shown without it", stacklevel=3)
        return None


def _iterations_done(run: RunDirectory, fallback: int) -> int:
    """The last iteration ``log.jsonl`` records; a bad line is named in a warning (then the hall of fame's count)."""
    try:
        log = run.log()
    except RunDirError as exc:
        warnings.warn(f"{exc}; the iteration count shown is the hall of fame's", stacklevel=3)
        return fallback
    last = log[-1].get("iteration", 0) if log else 0
    return last if isinstance(last, int) and not isinstance(last, bool) else fallback


#: Beyond-size table: (header, key in a beyond_size target block, width).
_BEYOND_COLUMNS = (("proxy", "kendall", 8), ("w/ params", "kendall_with_params", 11),
                   ("w/ depth", "kendall_with_depth", 10), ("partial|params", "partial_given_params", 16),
                   ("partial|depth", "partial_given_depth", 15))
