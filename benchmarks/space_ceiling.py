"""The ceiling of the N-space protocol (issue #31): what a rank formula could reach if it were chosen with
the labels of the space it is judged on, against what a choice on the other spaces reaches.

The N-space protocol (``autoprox evaluate --leave-space-out --rank-formulas``) asks whether a formula
chosen on four labelled spaces beats the parameter and MAC counts on the fifth. It did not (docs/results-new-space.md).
This script asks the question behind that answer: is there such a formula at all, within the search's
language, or is the goal out of reach of the formulas themselves? For each set of spaces it runs the same
rank-formula search with the labels of *every* space in the set, the margin objective (the worst lead over
each space's better size count, ``r(params)`` or ``r(flops)``), and keeps, over all seeds' halls of fame
rescored on every row, the formula with the best worst lead over the set. Sets: all five spaces, and each
four of them; a four-space set's formula is then also scored on the fifth, whose labels it never read.

This is an **in-sample** figure: it reads the labels it is judged on, so it is a ceiling, never a result a
user could expect, and nothing here is a candidate for a recommendation. Intervals are the protocol's
(95% paired bootstrap over each space's rows, :func:`autoprox.apps.protocols.space.paired_interval`).

Writes ``runs/space-ceiling/ceiling.json`` (read by ``benchmarks/docs_tables.py``: the
``space-ceiling`` table of docs/results-new-space.md). About 5 minutes on 2 cores.

Usage: python benchmarks/space_ceiling.py [--seeds 5] [--iterations 400] [--samples 1000] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
#: The five labelled spaces, in the protocol's order.
SPACES = ("nb201", "flexibert", "autoformer", "pit", "timm")
CEILING_FORMAT = "autoprox-space-ceiling/1"


def space_sets(spaces: tuple[str, ...] = SPACES) -> list[tuple[str, ...]]:
    """Every space together, then each set of all but one (the one left out named by its absence)."""
    return [spaces] + [tuple(s for s in spaces if s != out) for out in spaces]


def best_in_sample(hall: list[str], members: tuple[str, ...], figures: dict[str, dict[str, float]],
                   sizes: dict[str, float]) -> tuple[str, float]:
    """The formula of ``hall`` with the best worst lead over ``members`` (every row; ties to the shorter text,
    then the text), and that lead."""
    def worst(text: str) -> float:
        return min(figures[text][name] - sizes[name] for name in members)
    chosen = max(hall, key=lambda text: (round(worst(text), 9), -len(text), text))
    return chosen, worst(chosen)


def scores(formula, space) -> list:
    """``formula``'s scores of each table of ``space``, a column the space lacks scored as no information."""
    return [formula.score(table.proxies, missing="neutral") for table in space.tables]


def rounded(value, digits: int = 6):
    """``value`` with every float rounded to ``digits`` decimals (the record is read as a table, not replayed)."""
    if isinstance(value, float):
        return round(value, digits)
    if isinstance(value, dict):
        return {key: rounded(item, digits) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [rounded(item, digits) for item in value]
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5, help="searches per set of spaces (seeds 0..N-1)")
    parser.add_argument("--iterations", type=int, default=400,
                        help="iterations of each search's evolution (default 400, four times a protocol search's)")
    parser.add_argument("--samples", type=int, default=1000, help="bootstrap resamples of each interval")
    parser.add_argument("--out", default=str(REPO / "runs" / "space-ceiling"), help="directory of ceiling.json")
    args = parser.parse_args(argv)

    from autoprox.apps.rank_search import RankSearchSettings, figures_on, prepare_spaces, search_rank_formula
    from autoprox.apps.protocols.space import paired_interval
    from autoprox.core.atomic import atomic_write_text, make_directory
    from autoprox.data.proxy_tables import load_table_space
    from autoprox.genome.rank_formula import parse_formula

    started = time.perf_counter()
    spaces = {name: load_table_space(name) for name in SPACES}
    every_row = prepare_spaces([spaces[n] for n in SPACES], None, random.Random(0))
    sizes = {p.name: p.size_figure for p in every_row}
    settings = RankSearchSettings(objective="margin", iterations=args.iterations)
    figures: dict[str, dict[str, float]] = {}
    records = []
    for members in space_sets():
        hall: set[str] = set()
        for seed in range(args.seeds):
            outcome = search_rank_formula([spaces[n] for n in members], seed, settings)
            hall.update(text for _, text, _ in outcome.hall_of_fame)
            print(f"{'+'.join(members)} seed {seed}: {outcome.best}", file=sys.stderr, flush=True)
        for text in hall - figures.keys():
            figures[text] = figures_on(parse_formula(text), every_row)
        formula, worst = best_in_sample(sorted(hall), members, figures, sizes)
        per_space = {}
        for name in SPACES:
            space = spaces[name]
            method = [scores(parse_formula(formula), space)]
            entry = {"figure": figures[formula][name], "size": sizes[name], "lead": figures[formula][name] - sizes[name],
                     "labels_read": name in members}
            for baseline in ("params", "flops"):
                if all(baseline in t.proxies for t in space.tables):
                    size = scores(parse_formula(f"r({baseline})"), space)
                    entry[f"vs_{baseline}"] = paired_interval(method, size, space, samples=args.samples)
            per_space[name] = entry
        records.append({"spaces": list(members), "formula": formula, "worst_lead": worst, "per_space": per_space})
        print(f"{'+'.join(members)}: {formula} (worst lead {worst:+.3f})", file=sys.stderr, flush=True)

    out = make_directory(args.out)
    record = rounded({
        "format": CEILING_FORMAT,
        "command": "python benchmarks/space_ceiling.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "seeds": list(range(args.seeds)), "settings": {"objective": settings.objective,
                                                        "iterations": settings.iterations,
                                                        "population": settings.population,
                                                        "max_size": settings.max_size,
                                                        "max_rows": settings.max_rows,
                                                        "missing": settings.missing},
        "samples": args.samples, "sets": records, "seconds": time.perf_counter() - started})
    atomic_write_text(out / "ceiling.json", json.dumps(record) + "\n")  # one line: runs/ stays under 5 MB
    print(f"wrote {out / 'ceiling.json'} in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
