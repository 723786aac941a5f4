"""Choose the label-free recommended proxies, ``recommended:any/...``, from the N-space protocols.

The candidates are everything the committed N-space protocols (``autoprox evaluate --leave-space-out
--rank-formulas``: ``runs/space-protocol`` with the worst-case objective, ``runs/space-protocol-mean``
with the mean, ``runs/space-protocol-margin`` with the worst lead over the size counts) scored on each
left-out space without its labels:

* each protocol's ways of choosing a formula (also with ``--missing-columns skip``: ``runs/space-protocol-skip-worst``,
  ``runs/space-protocol-skip-mean`` and ``runs/space-protocol-skip-margin``) on labelled spaces: ``searched`` (the rank-formula search, its
  formula chosen by the best worst case over the training spaces; each direction's figure is the
  mean over its seeds), ``best-single`` and ``greedy-lrsum``;
* each fixed label-free proxy every left-out space was scored with: ``params``, each proxy column
  every space has, and ``lrsum-all`` (the log-rank sum of every standard proxy a space has).

The rule, as before: the highest figure averaged over the left-out spaces (a candidate must have a
figure on every one). ``recommended:any/joint`` (and ``any/TARGET`` for the targets AutoFormer and
PiT share) is the winner: a way of choosing is run once more on every labelled space; a fixed proxy
is written as it is. ``recommended:any/searched`` is always the search's formula on every labelled
space (of the objective whose searches did better), for whoever wants a searched formula. Both are rank-formula proxy files with ``"missing":
"neutral"``: a space without one of their columns is scored on the others. ``any/joint`` is written
as ``first(WINNER, r(X), ..., lrsum(...))`` (:func:`fallbacks`): on a space that has every column
the winner reads it is the winner; on a table without them (a parameter count not published, say)
the best single proxy the table has, by the same rule (its mean over the left-out spaces that have
it), else the log-rank sum of the standard proxies it has, rather than a constant score.

Writes ``autoprox/resources/recommended/any/{joint,searched}.json`` and the manifest's ``any``
entries, and prints the comparison.

Usage: python benchmarks/recommend_any.py [--check]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
#: The committed N-space protocols, one per objective of the search (``--objective``).
PROTOCOLS = {"worst": REPO / "runs" / "space-protocol" / "protocol.json",
             "mean": REPO / "runs" / "space-protocol-mean" / "protocol.json",
             # the same searches with --missing-columns skip (a training space lacking a column leaves the objective)
             "worst-skip": REPO / "runs" / "space-protocol-skip-worst" / "protocol.json",
             "mean-skip": REPO / "runs" / "space-protocol-skip-mean" / "protocol.json",
             # --objective margin: the worst lead over each training space's better size count
             "margin": REPO / "runs" / "space-protocol-margin" / "protocol.json",
             "margin-skip": REPO / "runs" / "space-protocol-skip-margin" / "protocol.json",
             # the skipping worst-case searches again with 400 iterations instead of 100
             "worst-skip-100": REPO / "runs" / "space-protocol-skip-worst-100" / "protocol.json"}
MANIFEST = REPO / "autoprox" / "resources" / "recommended" / "recommended.json"
#: The targets AutoFormer's and PiT's benchmarks share.
SHARED_TARGETS = ("c100_kd", "flower_kd", "chaoyang_kd", "c100_base", "flower_base", "chaoyang_base")
#: The ways of choosing a formula on labelled spaces (each direction chose its own).
CONFIGURATIONS = ("searched", "best-single", "greedy-lrsum")
RANK_FORMULA_FORMAT = "autoprox-rank-formula/1"
#: The catch-all last fallback of ``any/joint``: it reads whatever standard proxies a space has.
CATCH_ALL = "lrsum-all"


def candidates(protocols: dict[str, dict]) -> dict[str, float]:
    """Every candidate with a figure on every left-out space -> its mean over them: each protocol's ways of
    choosing (``OBJECTIVE/searched``, ...), and the fixed label-free proxies (the same in every protocol)."""
    scores = {}
    for objective, protocol in protocols.items():
        spaces = len(protocol["directions"])
        for name, row in protocol["summary"].items():
            if row["spaces"] == spaces:
                scores[f"{objective}/{name}" if name in CONFIGURATIONS else name] = row["mean"]
    return scores


def formula_on_every_space(name: str, protocol: dict) -> tuple[str, dict]:
    """The formula the way of choosing ``name`` gives on every labelled space, and how it was made."""
    from autoprox.apps.rank_search import RankSearchSettings, best_single, greedy_lrsum, search_rank_formula
    from autoprox.apps.protocols.space import lrsum_all, select_formula
    from autoprox.data.proxy_tables import load_table_space

    spec = protocol["spec"]
    spaces = [load_table_space(s) for s in spec["spaces"]]
    settings = RankSearchSettings(**{**spec["settings"], "transforms": tuple(spec["settings"]["transforms"])})
    if name == "best-single":
        return f"r({best_single(spaces, settings.objective)[0]})", {"chosen_by": "best-single",
                                                                   "searched_on": spec["spaces"]}
    if name == "greedy-lrsum":
        return greedy_lrsum(spaces, settings.objective)[0], {"chosen_by": "greedy-lrsum", "searched_on": spec["spaces"]}
    chosen = []
    for seed in spec["seeds"]:
        outcome = search_rank_formula(spaces, seed, settings, seeds=[lrsum_all(s) for s in spaces])
        formula, figures, worst = select_formula(outcome.hall_of_fame, spaces, settings.missing, settings.objective)
        chosen.append((worst, -seed, formula, figures))
    worst, _, formula, figures = max(chosen)
    return formula, {"chosen_by": "searched", "searched_on": spec["spaces"], "seeds": spec["seeds"],
                     "figures_on_searched_spaces": figures}


def fixed_formula(name: str, protocol: dict | None = None) -> str:
    """A fixed label-free candidate as a rank formula (``r(X)`` ranks exactly as ``X``)."""
    from autoprox.data.proxy_tables import STANDARD_PROXIES

    if name == "lrsum-all":
        return f"lrsum({', '.join(STANDARD_PROXIES)})"
    return f"r({name})"


def fallbacks(protocols: dict[str, dict]) -> list[str]:
    """What ``any/joint`` reads on a space lacking a column of the winner, by the same rule as the winner:
    each single standard proxy scored on most of the left-out spaces, ordered by its mean over the spaces
    that have it, those above :data:`CATCH_ALL`'s mean; then :data:`CATCH_ALL`. Label-free figures, the
    same in every protocol."""
    from autoprox.data.proxy_tables import STANDARD_PROXIES

    protocol = next(iter(protocols.values()))
    summary, spaces = protocol["summary"], len(protocol["directions"])
    floor = summary[CATCH_ALL]["mean"]
    singles = sorted(((row["mean"], name) for name, row in summary.items()
                      if name in STANDARD_PROXIES and 2 * row["spaces"] > spaces and row["mean"] > floor), reverse=True)
    return [name for _, name in singles] + [CATCH_ALL]


def with_fallbacks(formula: str, names: list[str]) -> str:
    """``first(formula, ...)`` over the fixed candidates ``names`` (those equal to ``formula`` left out)."""
    alternatives = [formula] + [f for f in (fixed_formula(name) for name in names) if f != formula]
    return f"first({', '.join(alternatives)})"


def proxy_file(formula: str, how: dict, score: float | None, note: str) -> dict:
    return {"format": RANK_FORMULA_FORMAT, "formula": formula, "missing": "neutral", **how,
            "protocols": [str(p.parent.relative_to(REPO)) for p in PROTOCOLS.values()], "left_out_mean": score,
            "note": note}


def manifest_text(manifest: dict) -> str:
    """The manifest in its committed layout: one line per entry."""
    lines = ["{", f'  "format": {json.dumps(manifest["format"])},', f'  "note": {json.dumps(manifest["note"])},',
             '  "spaces": {']
    spaces = list(manifest["spaces"].items())
    for s, (space, entries) in enumerate(spaces):
        lines.append(f"    {json.dumps(space)}: {{")
        items = list(entries.items())
        lines += [f"      {json.dumps(name)}: {json.dumps(entry)}" + ("," if e < len(items) - 1 else "")
                  for e, (name, entry) in enumerate(items)]
        lines.append("    }" + ("," if s < len(spaces) - 1 else ""))
    return "\n".join(lines + ["  }", "}"]) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if the files differ")
    args = parser.parse_args(argv)
    missing = [str(p.relative_to(REPO)) for p in PROTOCOLS.values() if not p.is_file()]
    if missing:
        print(f"recommend_any: no N-space protocol at {', '.join(missing)}", file=sys.stderr)
        return 2
    protocols = {objective: json.loads(path.read_text()) for objective, path in PROTOCOLS.items()}
    scores = candidates(protocols)
    for name, value in sorted(scores.items(), key=lambda kv: -kv[1]):
        print(f"{name}: mean left-out figure {value:+.4f}")
    chosen = max(scores, key=lambda n: (scores[n], n == "params"))  # a tie goes to the parameter count
    searched_objective = max(PROTOCOLS, key=lambda o: scores.get(f"{o}/searched", float("-inf")))
    protocol = protocols[searched_objective]
    spaces = ", ".join(protocol["spec"]["spaces"])
    searched_formula, searched_how = formula_on_every_space("searched", protocol)
    searched = proxy_file(searched_formula, {**searched_how, "objective": searched_objective},
                          scores.get(f"{searched_objective}/searched"),
                          f"the rank-formula search ({searched_objective} objective) on every labelled space ({spaces}); "
                          "its configuration's formulas were scored on each space left out in turn")
    if "/" in chosen:
        objective, way = chosen.split("/", 1)
        joint_formula, joint_how = formula_on_every_space(way, protocols[objective])
        joint_how = {**joint_how, "objective": objective}
    else:
        joint_formula, joint_how = fixed_formula(chosen, protocol), {"chosen_by": f"baseline {chosen}"}
    order = fallbacks(protocols)
    joint_formula = with_fallbacks(joint_formula, order)
    joint = proxy_file(joint_formula, joint_how, scores[chosen],
                       f"{chosen}: the highest figure on spaces whose labels were not used ({scores[chosen]:.3f}, the "
                       f"mean over the {len(protocol['directions'])} left-out spaces of the N-space protocols over "
                       f"{spaces}); written as first(...): on a space lacking its columns, the first alternative the "
                       f"space can read ({', '.join(order)}: the single proxies by their mean over the left-out spaces "
                       "that have them, those above the log-rank sum of every standard proxy a space has, then that "
                       "sum)")
    entry = {"selection": joint["chosen_by"], "protocols": joint["protocols"]}
    manifest = json.loads(MANIFEST.read_text())
    manifest["spaces"]["any"] = {"joint": {"file": "any/joint.json", **entry},
                                 **{t: {"file": "any/joint.json", "target": t, **entry} for t in SHARED_TARGETS},
                                 "searched": {"file": "any/searched.json", "selection": f"searched ({searched_objective})",
                                              "protocols": joint["protocols"]}}
    folder = MANIFEST.parent / "any"
    files = {folder / "joint.json": json.dumps(joint, indent=2) + "\n",
             folder / "searched.json": json.dumps(searched, indent=2) + "\n",
             MANIFEST: manifest_text(manifest)}
    if args.check:
        stale = [str(p) for p, text in files.items() if not p.is_file() or p.read_text() != text]
        print("stale: " + ", ".join(stale) if stale else "up to date")
        return 1 if stale else 0
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    print(f"recommended:any/joint: {chosen} -> {joint_formula}; recommended:any/searched: {searched_formula}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
