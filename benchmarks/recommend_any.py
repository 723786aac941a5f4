"""Choose the label-free recommended proxy, ``recommended:any/joint``, from the leave-one-space-out protocols.

The rule: among the configurations of the committed protocols (``runs/leave-space-out/NAME``),
the one whose searched proxies have the highest JCM on the left-out spaces, averaged over
both directions (each direction's mean over its seeds); its search on every labelled space
(:data:`SEARCHES`, ``--search-fraction 1``, the same configuration) gives
the proxy. Writes ``autoprox/resources/recommended/any/joint.json`` (the genome and where it
comes from) and the manifest's ``any`` entries (``joint`` and every target both spaces
share, all the same formula), and prints the comparison.

Usage: python benchmarks/recommend_any.py [--check]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RUNS = REPO / "runs"
MANIFEST = REPO / "autoprox" / "resources" / "recommended" / "recommended.json"
#: Each committed protocol's configuration and its search on every labelled space (runs/recommended/...).
SEARCHES = {"template-mean": "any-search-mean"}
#: The targets AutoFormer's and PiT's benchmarks share.
SHARED_TARGETS = ("c100_kd", "flower_kd", "chaoyang_kd", "c100_base", "flower_base", "chaoyang_base")


def left_out_jcm(protocol: dict) -> float:
    """The mean over directions of the searched proxies' mean JCM on the left-out space."""
    values = [summary["searched"]["jcm_mean"] for summary in protocol["summary"].values()]
    return sum(values) / len(values)


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
    scores = {}
    for path in sorted((RUNS / "leave-space-out").glob("*/protocol.json")):
        protocol = json.loads(path.read_text())
        search = SEARCHES.get(path.parent.name)
        if protocol.get("finished") and search and (RUNS / "recommended" / search / "best.json").is_file():
            scores[path.parent.name] = left_out_jcm(protocol)
    if not scores:
        print("recommend_any: no finished protocol with its search on every space", file=sys.stderr)
        return 2
    for name, value in sorted(scores.items(), key=lambda kv: -kv[1]):
        print(f"{name}: mean left-out JCM {value:+.4f}")
    chosen = max(scores, key=scores.get)
    run = f"runs/recommended/{SEARCHES[chosen]}"
    best = json.loads((REPO / run / "best.json").read_text())
    proxy = {"genome": best["genome"], "run": run, "protocol": f"runs/leave-space-out/{chosen}",
             "searched_on": best["space"].split("+"), "targets": best["targets"],
             "search": {"jcm": best["search"]["jcm"], "spaces": best["search"].get("spaces")},
             "note": "searched on every architecture of every labelled space; its configuration chosen by the "
                     "leave-one-space-out protocol (the highest JCM on spaces its search never saw)"}
    entry = {"run": run, "protocol": f"runs/leave-space-out/{chosen}", "selection": "best"}
    manifest = json.loads(MANIFEST.read_text())
    manifest["spaces"]["any"] = {"joint": {"file": "any/joint.json", **entry},
                                 **{t: {"file": "any/joint.json", "target": t, **entry} for t in SHARED_TARGETS}}
    files = {MANIFEST.parent / "any" / "joint.json": json.dumps(proxy, indent=2) + "\n",
             MANIFEST: manifest_text(manifest)}
    if args.check:
        stale = [str(p) for p, text in files.items() if not p.is_file() or p.read_text() != text]
        print("stale: " + ", ".join(stale) if stale else "up to date")
        return 1 if stale else 0
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    print(f"chosen: {chosen} -> {run}: {best['genome']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
