"""The evolution section of a run's HTML report: its curves and the iterations where the best fitness rose.

The lower two panels (the share of the genomes evaluated that were valid, the distinct genomes
evaluated so far) are counted from ``evaluations.jsonl``: the run's own file, or the one its
``archive.tar.xz`` keeps (a committed run, runs/README.md; read from the archive, never unpacked).
A run that kept neither still has, per iteration in its log, how many genomes it evaluated and how
many were invalid: the valid share is drawn from those, and the distinct-genome panel says why it
is empty.
"""

from __future__ import annotations

import math
import tarfile
from collections import Counter
from dataclasses import dataclass
from typing import Iterable

from autoprox.core.atomic import load_json
from autoprox.reports.html import figures as svg
from autoprox.reports.html.page import Cell, esc, figure, num, table
from autoprox.search.rundir import ARCHIVE, EVALUATIONS, RunDirectory, read_records


@dataclass(frozen=True)
class Evaluated:
    """Per iteration: the genomes evaluated, the share valid, the distinct genomes so far (empty where not
    kept), and where they were read (``source``), or why a panel has nothing (``notes``)."""

    iterations: list[int]
    valid_share: list[float]
    distinct_at: list[int]
    distinct: list[int]
    source: str
    notes: dict


def _counts(records: Iterable[dict]) -> tuple[list[int], list[float], list[int]]:
    counts: Counter = Counter()
    valid: Counter = Counter()
    first_seen: dict[str, int] = {}
    for record in records:
        iteration = record.get("iteration")
        if isinstance(iteration, bool) or not isinstance(iteration, int):
            continue
        counts[iteration] += 1
        valid[iteration] += bool(record.get("valid"))
        key = record.get("canonical") or record.get("genome")
        if isinstance(key, str):
            first_seen.setdefault(key, iteration)
    fresh = Counter(first_seen.values())
    iterations, shares, distinct, total = sorted(counts), [], [], 0
    for iteration in iterations:
        total += fresh[iteration]
        shares.append(valid[iteration] / counts[iteration])
        distinct.append(total)
    return iterations, shares, distinct


def _archived_records(run: RunDirectory) -> list[dict] | None:
    """The records of the ``evaluations.jsonl`` a committed run's archive holds, or None (no archive, no
    such member, or an archive that cannot be read: the panels then fall back on the log)."""
    path = run.file(ARCHIVE)
    if not path.is_file():
        return None
    try:
        with tarfile.open(path, "r:*") as archive:
            member = archive.getmember(EVALUATIONS)
            handle = archive.extractfile(member) if member.isfile() else None
            if handle is None:
                return None
            lines = handle.read().decode("utf-8", errors="replace").splitlines()
    except (OSError, KeyError, tarfile.TarError, EOFError):
        return None
    records = []
    for line in lines:
        try:
            record = load_json(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


def evaluated_per_iteration(run: RunDirectory) -> Evaluated:
    """The lower panels' numbers of ``run``, from the best source it keeps."""
    if run.file(EVALUATIONS).is_file():
        iterations, shares, distinct = _counts(record for _, record in read_records(run.file(EVALUATIONS)))
        return Evaluated(iterations, shares, iterations, distinct, EVALUATIONS, {})
    archived = _archived_records(run)
    if archived is not None:
        iterations, shares, distinct = _counts(archived)
        return Evaluated(iterations, shares, iterations, distinct, f"the {EVALUATIONS} {ARCHIVE} keeps", {})
    iterations, shares = [], []
    for record in run.log():
        attempts, invalid = record.get("attempts"), record.get("invalid")
        if isinstance(record.get("iteration"), int) and isinstance(attempts, int) and isinstance(invalid, int):
            iterations.append(record["iteration"])
            shares.append((attempts - invalid) / attempts if attempts > 0 else math.nan)
    missing = f"not kept: the run has no {EVALUATIONS}"
    notes = {"distinct": f"{missing}, which records each genome evaluated",
             "valid_title": "share of the children tried that are valid"}
    if not iterations:
        notes["valid"] = f"{missing}, and its log counts no children"
    return Evaluated(iterations, shares, [], [], "the log's counts of the children tried and of the invalid ones",
                     notes)


def curves_section(curves, evaluated: Evaluated, fitness: str) -> str:
    """The "Evolution" section: the curves figure and the table of the iterations where the best fitness rose."""
    body = '<h2 id="evolution">Evolution</h2>'
    if curves is None:
        return body + "<p>No iteration logged yet: the initial population is being evaluated.</p>"
    image = svg.curves_svg(curves.iterations, curves.best_jcm, curves.mean_jcm, curves.params_jcm, curves.kendall,
                           evaluated.iterations, evaluated.valid_share, evaluated.distinct, fitness, "curves",
                           distinct_at=evaluated.distinct_at, notes=evaluated.notes)
    lower = ("the share of the genomes evaluated that were valid, and the distinct genomes evaluated so far "
             f"(from {esc(evaluated.source)})")
    if evaluated.notes.get("distinct"):
        lower = (f"the share of the children tried that were valid (from {esc(evaluated.source)}, a genome tried "
                 f"again counted again); the distinct genomes evaluated so far are "
                 f"{esc(evaluated.notes['distinct'])}")
    body += figure(image, "Top: the population's best and mean fitness on the search split (dotted: the parameter "
                   f"count's, {esc(curves.params_note)}), and the best proxy's Kendall tau per target. Bottom: per "
                   f"iteration, {lower}.", "figure-curves")
    rows, previous = [], None
    for i, iteration in enumerate(curves.iterations):
        best = curves.best_jcm[i]
        if previous is None or (math.isfinite(best) and best > previous):
            rows.append([Cell(str(iteration)), num(best), num(curves.mean_jcm[i]),
                         *(num(curves.kendall[t][i]) for t in curves.targets)])
            previous = best
    body += "<h3>Iterations where the best fitness rose</h3>"
    body += table(["iteration", f"best {fitness}", f"mean {fitness}", *(f"τ {t}" for t in curves.targets)], rows,
                  table_id="improvements")
    return body


__all__ = ["Evaluated", "curves_section", "evaluated_per_iteration"]
