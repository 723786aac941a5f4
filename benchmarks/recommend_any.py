"""Choose the label-free recommended proxies, ``recommended:any/...``, from the leave-one-space-out protocols.

The candidates are everything the committed protocols (``runs/leave-space-out/NAME``) scored
on a left-out space without its labels:

* each configuration, by its searched proxies' JCM on the left-out spaces (each direction's
  mean over its seeds), when its search on every labelled space exists (:data:`SEARCHES`,
  ``--search-fraction 1``, the same configuration): that search gives the proxy;
* each label-free baseline that every protocol scored (:data:`LABEL_FREE`: the parameter
  count, MACs, the zoo proxies asked for), by its JCM on the left-out spaces.

The rule: the highest JCM averaged over both directions. ``recommended:any/joint`` (and
``any/TARGET`` for every target both spaces share) is the winner; ``recommended:any/searched``
is always the best configuration with a search on every space, for whoever wants a searched
formula. A baseline that wins is written as a one-member ensemble file
(:mod:`autoprox.proxies.ensemble`; its reference is its raw values on every architecture of
both spaces, from the protocols' records), which ranks exactly as the baseline does.

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
RUNS = REPO / "runs"
MANIFEST = REPO / "autoprox" / "resources" / "recommended" / "recommended.json"
#: Each committed protocol's configuration and its search on every labelled space (runs/recommended/...).
SEARCHES = {"template-mean": "any-search-mean", "template-sum": "any-search-sum", "template-sum-zoo": "any-search-zoo"}
#: Baselines that use no label at all (the transferred descriptor choices use the other space's labels).
LABEL_FREE = ("params", "flops", "tvt_l2", "snip", "zico", "nwot", "grad_norm", "synflow", "fisher", "grasp",
              "te_nas", "dss", "plain")
#: The targets AutoFormer's and PiT's benchmarks share.
SHARED_TARGETS = ("c100_kd", "flower_kd", "chaoyang_kd", "c100_base", "flower_base", "chaoyang_base")
#: The statistics plan an ensemble file records (a baseline member reads no statistics).
DEFAULT_PLAN = {"input": {"kind": "gaussian", "batch_size": 8, "image_dir": None}, "seeds": [0]}


def left_out_jcm(protocol: dict, method: str | None = None) -> float | None:
    """The mean over directions of the left-out JCM: the searched proxies' (each direction's mean over
    seeds) or, with ``method``, that baseline's; None when a direction lacks it."""
    values = []
    for summary in protocol["summary"].values():
        if method is None:
            values.append((summary.get("searched") or {}).get("jcm_mean"))
        else:
            values.append(((summary.get("figures") or {}).get(method) or {}).get("jcm"))
    return None if not values or None in values else sum(values) / len(values)


def baseline_reference(protocols: dict[str, dict], method: str) -> list[float]:
    """``method``'s raw values on every architecture of the protocols' labelled spaces, sorted: the
    reference of its one-member ensemble. Only an architecture proxy (``params``, ``flops``) is computed
    here (from each benchmark's configs; the committed protocol records keep no per-architecture scores)."""
    from autoprox.data.benchmark import load_benchmark, locate_benchmark
    from autoprox.data.cache import StatisticsCache
    from autoprox.networks.statistics import InputSpec
    from autoprox.proxies.proxy import resolve_proxy

    proxy = resolve_proxy(method)
    if proxy.kind != "architecture":
        raise SystemExit(f"recommend_any: {method} won, and only an architecture proxy can be written here")
    benches = next(iter(protocols.values()))["settings"]["bench"]
    values = []
    for bench in benches:
        archs = list(load_benchmark(locate_benchmark(bench)).archs)
        results = proxy.raw_values(archs, InputSpec(), 0, 100, StatisticsCache(None, "float16"))
        values += [float(r.raw) for r in results]
    return sorted(values)


def candidates(protocols: dict[str, dict]) -> dict[str, float]:
    """Every candidate's mean left-out JCM: ``config:NAME`` (with a search on every space) and
    ``baseline:NAME`` (scored by every protocol, with the same figure in each)."""
    scores = {f"config:{name}": left_out_jcm(p) for name, p in protocols.items()
              if SEARCHES.get(name) and (RUNS / "recommended" / SEARCHES[name] / "best.json").is_file()}
    for method in LABEL_FREE:
        figures = [left_out_jcm(p, method) for p in protocols.values()]
        if None not in figures:
            scores[f"baseline:{method}"] = figures[0]
    return {k: v for k, v in scores.items() if v is not None}


def searched_file(name: str, protocols: dict[str, dict]) -> tuple[dict, dict]:
    """The proxy file and manifest entry of configuration ``name``'s search on every labelled space."""
    run = f"runs/recommended/{SEARCHES[name]}"
    best = json.loads((REPO / run / "best.json").read_text())
    proxy = {"genome": best["genome"], "run": run, "protocol": f"runs/leave-space-out/{name}",
             "searched_on": best["space"].split("+"), "targets": best["targets"],
             "search": {"jcm": best["search"]["jcm"], "spaces": best["search"].get("spaces")},
             "left_out_jcm": left_out_jcm(protocols[name]),
             "note": "searched on every architecture of every labelled space; its configuration is the one whose "
                     "searches ranked the spaces they never saw best (the leave-one-space-out protocol)"}
    return proxy, {"run": run, "protocol": f"runs/leave-space-out/{name}", "selection": "best"}


def baseline_file(method: str, protocols: dict[str, dict], score: float, best_config: str | None) -> tuple[dict, dict]:
    """A one-member ensemble of baseline ``method`` (it ranks exactly as the baseline) and its manifest entry."""
    note = (f"{method}: the highest JCM on spaces whose labels were not used ({score:.3f}, the mean over both "
            "directions of the leave-one-space-out protocols); no searched configuration beat it"
            + (f" (the best, {best_config}, is recommended:any/searched)" if best_config else ""))
    proxy = {"format": "autoprox-ensemble/1", "name": f"any-{method}", "plan": DEFAULT_PLAN, "note": note,
             "members": [{"proxy": method, "weight": 1.0, "classes": 100,
                          "reference": baseline_reference(protocols, method)}]}
    return proxy, {"selection": f"baseline {method}", "protocols": [f"runs/leave-space-out/{p}" for p in protocols]}


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
    protocols = {path.parent.name: json.loads(path.read_text())
                 for path in sorted((RUNS / "leave-space-out").glob("*/protocol.json"))}
    protocols = {name: p for name, p in protocols.items() if p.get("finished")}
    scores = candidates(protocols)
    configs = {k: v for k, v in scores.items() if k.startswith("config:")}
    if not configs:
        print("recommend_any: no finished protocol with its search on every space", file=sys.stderr)
        return 2
    for name, value in sorted(scores.items(), key=lambda kv: -kv[1]):
        print(f"{name}: mean left-out JCM {value:+.4f}")
    chosen = max(scores, key=scores.get)
    best_config = max(configs, key=configs.get).split(":", 1)[1]
    searched, searched_entry = searched_file(best_config, protocols)
    kind, name = chosen.split(":", 1)
    joint, joint_entry = (searched, searched_entry) if kind == "config" else \
        baseline_file(name, protocols, scores[chosen], best_config)
    manifest = json.loads(MANIFEST.read_text())
    manifest["spaces"]["any"] = {"joint": {"file": "any/joint.json", **joint_entry},
                                 **{t: {"file": "any/joint.json", "target": t, **joint_entry} for t in SHARED_TARGETS},
                                 "searched": {"file": "any/searched.json", **searched_entry}}
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
    print(f"recommended:any/joint: {chosen}; recommended:any/searched: config {best_config}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
