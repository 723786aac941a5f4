"""Write the measured tables of the results pages (docs/results.md and docs/results-*.md) from the committed runs.

Usage:
    python benchmarks/docs_tables.py            # rewrite every table in place
    python benchmarks/docs_tables.py --check    # exit 1 if any table differs from what the runs say
    python benchmarks/docs_tables.py --check --tracked   # the same from the run files git tracks only

Each generated table sits between two markers in a Markdown file:

    <!-- table:NAME -->
    ...written by this script...
    <!-- /table:NAME -->

and is rebuilt from the run files under runs/ (``runs/protocol/*/protocol.json`` and
``runs/vit-*/top.json``; runs/README.md says which table reads which), read as plain JSON. The script needs only the standard
library: it never imports the autoprox package, so it runs without torch and whatever the
package's layout. Figures that the runs do not store (the paired bootstrap differences, the
zoo ranking tables, timings) are not generated; the pages keep them as text and say which
command produced them.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parent.parent

SPACE_NAMES = {"autoformer": "AutoFormer", "pit": "PiT"}

#: Defaults of settings recorded before the genome options existed.
DEFAULT_GENOME = {"kind": "template", "aggregations": ["block_mean"], "arch_terminals": False}


class DocsTableError(Exception):
    """A run file is missing or inconsistent, or a page lacks a table's markers."""


# ---------------------------------------------------------------------------- reading runs


def load_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise DocsTableError(f"{path}: missing") from None
    except json.JSONDecodeError as error:
        raise DocsTableError(f"{path}: not JSON ({error})") from None


class Runs:
    """The committed run files under one runs/ directory, read once each."""

    def __init__(self, root: Path, tracked_only: bool = False):
        self.root = root
        self._cache: dict[Path, dict] = {}
        self.tracked = tracked_files(root) if tracked_only else None

    def glob(self, pattern: str) -> list[Path]:
        """The files under the root matching ``pattern``; with ``tracked_only``, those git tracks."""
        found = sorted(self.root.glob(pattern))
        return found if self.tracked is None else [p for p in found if p.resolve() in self.tracked]

    def json(self, relative: str) -> dict:
        path = self.root / relative
        if path not in self._cache:
            self._cache[path] = load_json(path)
        return self._cache[path]


def tracked_files(root: Path) -> set[Path]:
    """The files git tracks under ``root`` (resolved paths), so output of one's own there is left out."""
    listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], capture_output=True, check=True).stdout
    return {(root / name).resolve() for name in listed.decode().split("\0") if name}


# ---------------------------------------------------------------------------- formatting


def num(value, signed: bool = False) -> str:
    """A Kendall or JCM figure to 3 decimals; ``n/a`` when the run stored none (NaN)."""
    if value is None:
        return "n/a"
    text = f"{value:+.3f}" if signed else f"{value:.3f}"
    return "0.000" if text in ("-0.000", "+0.000") and not signed else text


def table(head: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def same(value_a, value_b, what: str) -> None:
    """Runs compared in one table must agree on figures that depend only on the split (params, bars)."""
    if value_a is None or value_b is None or abs(value_a - value_b) > 1e-9:
        raise DocsTableError(f"{what}: {value_a} and {value_b} differ; the runs do not share a split")


# ---------------------------------------------------------------------------- tables


def _arch_cell(arch: dict) -> str:
    parts = []
    for key, value in arch.items():
        if isinstance(value, list):
            value = "[" + ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in value) + "]"
        parts.append(f"{key} {value}")
    return ", ".join(parts)


def vit_search_table(runs: Runs) -> list[str]:
    """The top 5 of each committed 400-sample vit-search (runs/vit-*/top.json)."""
    lines: list[str] = []
    for path in runs.glob("vit-*/top.json"):
        name = path.parent.name
        top = runs.json(f"{name}/top.json")
        low, high = top["budget_millions"]
        state = "finished" if top.get("finished") else "not finished"
        if lines:
            lines.append("")
        lines += [f"**{SPACE_NAMES.get(top['space'], top['space'])}**, `runs/{name}/top.json` ({state}): "
                  f"{top['scored']} of {top['samples']} sampled architectures scored ({top['failed']} failed), "
                  f"budget {low:g}-{high:g} M parameters, {top['search_seconds']:.0f} s in all, "
                  f"{top['seconds_per_architecture']:.2f} s per architecture", ""]
        rows = [[str(entry["rank"]), f"{entry['score']:.6f}", f"{entry['params'] / 1e6:.2f}M",
                 f"{entry['macs'] / 1e9:.2f}G", _arch_cell(entry["arch"])] for entry in top["top"]]
        lines += table(["rank", "score", "params", "MACs", "architecture"], rows)
    if not lines:
        raise DocsTableError(f"{runs.root}: no vit-*/top.json")
    return lines


#: The headline (docs/results-in-space.md): per space, the protocol of the searched proxy and of the recommended
#: selection.
HEADLINE_PROTOCOLS = {"autoformer": ("autoformer-best-patience30", "autoformer-best-patience30-cv-pick-coarse"),
                      "pit": ("pit-best", "pit-best-cv-pick-coarse")}


def _mean_sd(figure: dict) -> str:
    return f"{num(figure['mean'])} +- {num(figure['sd'])}"


def _paired(difference: dict) -> str:
    """A paired difference of a protocol summary: its mean and t-interval."""
    low, high = difference["ci"]
    return f"{num(difference['mean'], True)} [{num(low, True)}, {num(high, True)}]"


def _paired_ahead(difference: dict) -> str:
    """A paired difference's mean and t-interval, and the folds where the proxy is ahead."""
    return f"{_paired(difference)} {difference['ahead']}/{difference['n']}"


def _corrected(difference: dict) -> str:
    """A paired difference's Nadeau-Bengio corrected interval."""
    low, high = difference["corrected_ci"]
    return f"[{num(low, True)}, {num(high, True)}]"


def _outer_folds(protocol: dict) -> str:
    spec = protocol["protocol"]
    return f"{spec['folds']} x {spec.get('repeats', 1)}"


def headline_table(runs: Runs) -> list[str]:
    """The headline of docs/results-in-space.md: outer-fold test JCM (mean +- sd over every outer fold) of the
    searched proxy, of the recommended selection and of the three baselines, with the recommended one's paired
    difference to the blend (t-interval and Nadeau-Bengio corrected interval, folds ahead)."""
    head = ["space", "outer folds x repeats", "searched proxy (`best`)", "recommended (selection)",
            "parameter count", "best coarse descriptor", "fitted blend", "recommended - blend [t-interval]",
            "corrected interval"]
    rows = []
    for space, label in SPACE_NAMES.items():
        searched, chosen = (runs.json(f"protocol/{name}/protocol.json") for name in HEADLINE_PROTOCOLS[space])
        test, other = chosen["summary"]["jcm"]["test"], searched["summary"]["jcm"]["test"]
        same(test["blend"]["mean"], other["blend"]["mean"], f"{space} blend JCM of the headline protocols")
        diff = chosen["summary"]["jcm"]["difference"]["blend"]
        rows.append([label, _outer_folds(chosen), _mean_sd(other["proxy"]),
                     f"{_mean_sd(test['proxy'])} (`{chosen['protocol']['selection']}`)", _mean_sd(test["params"]),
                     _mean_sd(test["coarse"]), _mean_sd(test["blend"]),
                     _paired_ahead(diff), _corrected(diff)])
    return table(head, rows)


def recommended_table(runs: Runs, space: str) -> list[str]:
    """Per target, the recommended selection's protocol (:data:`HEADLINE_PROTOCOLS`): test Kendall mean +- sd
    over the outer folds of the proxy and the three baselines, and the paired difference to each baseline
    with its t-interval and folds ahead; the JCM last."""
    name = HEADLINE_PROTOCOLS[space][1]
    protocol = runs.json(f"protocol/{name}/protocol.json")
    summary = protocol["summary"]
    baselines = ["params", "coarse", "blend"]
    rows = []
    for label, figures in [*((t, summary["targets"][t]) for t in protocol["targets"]), ("JCM", summary["jcm"])]:
        test, diff = figures["test"], figures["difference"]
        rows.append([label, *(_mean_sd(test[m]) for m in ["proxy", *baselines]),
                     *(_paired_ahead(diff[b]) for b in baselines),
                     _corrected(diff["blend"])])
    caption = (f"`runs/protocol/{name}`: selection `{protocol['protocol']['selection']}`, "
               f"{_outer_folds(protocol)} outer folds ({summary['folds']} in all).")
    return [caption, "", *table(["target", "recommended", "params", "coarse", "blend", "- params", "- coarse",
                                 "- blend", "- blend, corrected"], rows)]


#: A statistic in a genome's text (the eight and the spread ones); architecture terminals start with A_.
STATISTIC_TOKEN = re.compile(r"\b(?:F[1-4]g?|S[1-4]g?)\b")


def describe_protocol(protocol: dict) -> str:
    """One protocol's configuration column: its search configuration, fitness, selection and what it reused."""
    settings = protocol["settings"]
    genome = settings.get("genome") or DEFAULT_GENOME
    aggregations = genome["aggregations"]
    parts = [genome["kind"], "gene" if len(aggregations) > 1 else aggregations[0].replace("block_", "")]
    if genome.get("arch_terminals"):
        parts.append("arch terms")
    if genome.get("spread_terminals"):
        parts.append("spread terms")
    if settings.get("cv_folds"):
        parts.append(f"cv{settings['cv_folds']}")
    evolution = settings.get("evolution", {})
    if evolution.get("parsimony"):
        parts.append("parsimony")
    if evolution.get("patience"):
        parts.append(f"patience {evolution['patience']}")
    if evolution.get("restarts"):
        parts.append(f"{evolution['restarts']} restarts")
    if settings.get("fitness") and settings["fitness"] != "jcm":
        parts.append(f"fitness {settings['fitness']}")
    seeds = settings.get("stat_seeds") or [0]
    if len(seeds) > 1:
        parts.append(f"statistics seeds {','.join(map(str, seeds))}")
    if settings.get("batch_size", 8) != 8:
        parts.append(f"batch {settings['batch_size']}")
    if settings.get("input", "gaussian") != "gaussian":
        kind = settings["input"]
        parts.append(f"real images from {kind.partition(':')[2]}" if kind.startswith("images:") else f"input {kind}")
    spec = protocol["protocol"]
    if spec.get("bags"):
        parts.append(f"bagging {spec['bags']} x {spec.get('bag_fraction', 0.5):g}")
    parts.append(f"selection {spec['selection']}")
    return ", ".join(parts)


def protocol_ablation_table(runs: Runs, space: str) -> list[str]:
    """Every finished protocol of ``space`` under runs/protocol/: the proxy's test JCM (mean +- sd over the
    outer folds), the per-target means, and the paired JCM difference to the blend with its t-interval,
    Nadeau-Bengio corrected interval and folds ahead. The baselines are the same folds' for every row."""
    folder = runs.root / "protocol"
    rows, blend_rows = [], {}
    names = [p.parent.name for p in runs.glob("protocol/*/protocol.json")]
    for name in names:
        protocol = runs.json(f"protocol/{name}/protocol.json")
        if protocol["space"] != space or not protocol.get("finished"):
            continue
        # a protocol grown to several repeats shows its first repeat here: the same folds as every other row
        summary, targets = repeat_summaries(protocol)[0], protocol["targets"]
        jcm = summary["jcm"]
        test, blend = jcm["test"]["proxy"], jcm["difference"]["blend"]
        blend_rows[name] = jcm["test"]["blend"]["mean"]
        per_target = [num(summary["targets"][t]["test"]["proxy"]["mean"]) for t in targets]
        genomes = [f["result"].get("genome") or "" for f in protocol["folds"] if f.get("result") and f["repeat"] == 0]
        reading = sum(1 for g in genomes if STATISTIC_TOKEN.search(g))
        repeats = protocol["protocol"].get("repeats", 1)
        label = f"`{name}`" + (f" (repeat 0 of {repeats})" if repeats > 1 else "")
        rows.append([label, describe_protocol(protocol), f"{reading}/{len(genomes)}",
                     f"{num(test['mean'])} +- {num(test['sd'])}"
                     + ("" if test["n"] == summary["folds"] else f" (n={test['n']})"), *per_target,
                     _paired(blend),
                     _corrected(blend),
                     f"{blend['ahead']}/{blend['n']}"])
    if not rows:
        raise DocsTableError(f"{folder}: no finished protocol of {space}")
    if len({round(v, 12) for v in blend_rows.values()}) != 1:
        raise DocsTableError(f"{folder}: the {space} protocols do not share their folds (blend JCMs differ)")
    head = ["protocol", "configuration", "searched proxies reading statistics", "JCM", *targets,
            "JCM - blend [t-interval]", "corrected interval", "ahead"]
    blend_line = f"Blend on the same folds: JCM {num(next(iter(blend_rows.values())))}."
    return [*table(head, rows), "", blend_line]


def repeat_summaries(protocol: dict) -> list[dict]:
    """A protocol's summary per repeat: its ``repeat_summaries`` when it has several repeats
    (written by ``autoprox evaluate``), else its one summary."""
    return protocol.get("repeat_summaries") or [protocol["summary"]]


def repeats_table(runs: Runs, space: str) -> list[str]:
    """The headline protocols of ``space`` repeat by repeat (each repeat another shuffle of the
    architectures into 5 folds): test JCM of the searched proxy, the recommended selection and the
    blend, and recommended - blend with its t-interval; then all folds together, with the
    Nadeau-Bengio corrected interval that allows for folds sharing architectures."""
    searched, chosen = (runs.json(f"protocol/{name}/protocol.json") for name in HEADLINE_PROTOCOLS[space])
    if searched["protocol"].get("repeats", 1) != chosen["protocol"].get("repeats", 1):
        raise DocsTableError(f"{space}: the headline protocols have different repeats")
    rows = []
    for repeat, (mine, picked) in enumerate(zip(repeat_summaries(searched), repeat_summaries(chosen))):
        same(mine["jcm"]["test"]["blend"]["mean"], picked["jcm"]["test"]["blend"]["mean"], f"{space} repeat {repeat}")
        diff = picked["jcm"]["difference"]["blend"]
        rows.append([f"repeat {repeat} ({picked['folds']} folds)", _mean_sd(mine["jcm"]["test"]["proxy"]),
                     _mean_sd(picked["jcm"]["test"]["proxy"]), _mean_sd(picked["jcm"]["test"]["blend"]),
                     _paired_ahead(diff), ""])
    whole, diff = chosen["summary"]["jcm"], chosen["summary"]["jcm"]["difference"]["blend"]
    rows.append([f"all ({chosen['summary']['folds']} folds)", _mean_sd(searched["summary"]["jcm"]["test"]["proxy"]),
                 _mean_sd(whole["test"]["proxy"]), _mean_sd(whole["test"]["blend"]),
                 _paired_ahead(diff), _corrected(diff)])
    head = ["outer split", "searched proxy (`best`)", f"recommended (`{chosen['protocol']['selection']}`)",
            "fitted blend", "recommended - blend [t-interval]", "corrected interval"]
    return table(head, rows)


def _per_space(function: Callable[[Runs, str], list[str]], space: str) -> Callable[[Runs], list[str]]:
    return lambda runs: function(runs, space)


#: Table name -> (page, generator). Pages: "results" (docs/results.md or one of the question pages beside it,
#: docs/results-*.md) or "readme" (README.md, which links to the results pages and holds no table: a marker there
#: is an error).
TABLES: dict[str, tuple[str, Callable[[Runs], list[str]]]] = {"headline": ("results", headline_table)}
for _space in SPACE_NAMES:
    TABLES[f"protocol-ablation-{_space}"] = ("results", _per_space(protocol_ablation_table, _space))
    TABLES[f"recommended-{_space}"] = ("results", _per_space(recommended_table, _space))
    TABLES[f"repeats-{_space}"] = ("results", _per_space(repeats_table, _space))
TABLES["vit-search"] = ("results", vit_search_table)
sys.path.insert(0, str(Path(__file__).resolve().parent))
from docs_tables_cross import tables as _cross_tables  # noqa: E402 (the leave-one-space-out tables, beside this file)

TABLES.update(_cross_tables())
from docs_tables_few import tables as _few_label_tables  # noqa: E402 (the few-label protocol's tables, beside this file)

TABLES.update(_few_label_tables())


# ---------------------------------------------------------------------------- pages

MARKER = re.compile(r"<!-- table:(?P<name>[\w-]+) -->\n(?P<body>.*?)<!-- /table:(?P=name) -->", re.S)


def render(texts: dict[Path, str], page: str, runs: Runs) -> dict[Path, tuple[str, list[str]]]:
    """Every file of ``page`` with its tables regenerated, and per file the names of the tables that changed.

    A page is one file or several (the results index and the question pages beside it): each of the page's tables
    must appear exactly once in one of them, and no file may hold a table of another page.
    """
    found = {path: [match.group("name") for match in MARKER.finditer(text)] for path, text in texts.items()}
    wanted = [name for name, (where, _) in TABLES.items() if where == page]
    everywhere = [name for names in found.values() for name in names]
    problems = [f"{path}: unknown table {name!r}" for path, names in found.items() for name in names
                if name not in wanted]
    problems += [f"{' or '.join(map(str, texts))}: no markers for table {name!r}" for name in wanted
                 if name not in everywhere]
    problems += [f"table {name!r} appears more than once" for name in sorted(set(everywhere))
                 if everywhere.count(name) > 1]
    if problems:
        raise DocsTableError("; ".join(problems))
    written = {}
    for path, text in texts.items():
        changed: list[str] = []

        def replace(match: re.Match, changed: list[str] = changed) -> str:
            name = match.group("name")
            body = "\n".join(TABLES[name][1](runs)) + "\n"
            if body != match.group("body"):
                changed.append(name)
            return f"<!-- table:{name} -->\n{body}<!-- /table:{name} -->"

        written[path] = (MARKER.sub(replace, text), changed)
    return written


def page_files(page: Path) -> list[Path]:
    """A page and the pages beside it: ``docs/results.md`` and every ``docs/results-*.md``."""
    return [page, *sorted(page.parent.glob(f"{page.stem}-*{page.suffix}"))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a table differs from the runs")
    parser.add_argument("--docs", type=Path, default=REPO / "docs" / "results.md", help="the results index (the question pages, NAME-*.md beside it, are read too)")
    parser.add_argument("--readme", type=Path, default=REPO / "README.md",
                        help="the front page (no table may sit there)")
    parser.add_argument("--runs", type=Path, default=REPO / "runs", help="the committed runs")
    parser.add_argument("--tracked", action="store_true",
                        help="read only the run files git tracks, so runs of your own under --runs are left out")
    args = parser.parse_args(argv)
    runs = Runs(args.runs, tracked_only=args.tracked)
    stale = False
    try:
        for page, paths in (("results", page_files(args.docs)), ("readme", [args.readme])):
            texts = {}
            for path in paths:
                try:
                    texts[path] = path.read_text()
                except FileNotFoundError:
                    raise DocsTableError(f"{path}: missing") from None
            for path, (new_text, changed) in render(texts, page, runs).items():
                if not changed:
                    continue
                if args.check:
                    stale = True
                    print(f"{path}: stale tables: {', '.join(changed)}", file=sys.stderr)
                    sys.stderr.writelines(difflib.unified_diff(texts[path].splitlines(True), new_text.splitlines(True),
                                                               str(path), "from the runs", n=0))
                else:
                    path.write_text(new_text)
                    print(f"{path}: rewrote {', '.join(changed)}")
    except DocsTableError as error:
        print(f"docs_tables: error: {error}", file=sys.stderr)
        return 2
    if args.check:
        print("docs tables: stale" if stale else "docs tables: up to date with runs/")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
