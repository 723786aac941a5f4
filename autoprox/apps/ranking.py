"""The ranking table: many proxies, one benchmark, the same architectures, seeds and statistics.

For each proxy and target: Kendall tau-b, Spearman and Pearson of the proxy's scores
against the target's accuracies; with several seeds the mean and standard deviation over
seeds (sample std, ddof 1), each seed being one network initialisation and one minibatch
(``make_batch`` / ``build_model`` with that seed, the statistics cache's seed). Columns
none of the papers has say whether a proxy knows anything beyond size and depth:

``tau_params`` / ``tau_depth``
    the proxy's own Kendall tau-b with the parameter count / with the depth (number of
    transformer blocks);
``partial_tau`` / ``partial_tau_depth``
    its **partial Kendall tau** with the accuracy given the parameter count / the depth
    (Kendall 1942): ``(t_xy - t_xz t_yz) / sqrt((1 - t_xz^2)(1 - t_yz^2))`` with x the
    scores, y the accuracies, z the parameter counts (depths) and every t a Kendall
    tau-b, all over the architectures where the target is measured. It is undefined
    (blank) when the proxy or the accuracy ranks exactly as z does (|t| = 1);
the **bar** of each target
    the best coarse descriptor for it (parameter count, depth, width or
    multiply-accumulates, :func:`autoprox.spaces.descriptors.beyond_size`) and its Kendall on
    the same architectures: the figure a proxy has to clear (``beats_bar``: the proxy's
    mean Kendall over seeds is above it).

Seconds per architecture are the wall time of scoring one architecture (single-threaded):
network build, batch and the proxy's own passes for the zoo; reading the cached statistics
and evaluating the tree for genome proxies (``autoprox_a``, ``autoprox_p``, discovered
ones), which need no fresh forward/backward once the statistics cache holds them; the
arithmetic alone for ``params`` and ``flops``. The ``fresh`` field says which passes a
proxy needed. A proxy that fails on an architecture is reported failed with the reason;
the other proxies still finish.
"""

from __future__ import annotations

import csv
import io
import json
import math
import sys
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from autoprox.core.atomic import json_safe
from autoprox.core.correlation import correlate, kendall, partial_kendall
from autoprox.core.errors import ConfigError
from autoprox.core.numbers import format_float
from autoprox.core.progress import Progress
from autoprox.data.benchmark import Benchmark
from autoprox.data.cache import StatisticsCache, StatsPlan, build_cache
from autoprox.genome.tree import genome_to_string
from autoprox.networks.statistics import InputSpec
from autoprox.proxies.figures import coarse_bar
from autoprox.proxies.proxy import Proxy
from autoprox.spaces.descriptors import descriptor_columns

METRICS = ("kendall", "spearman", "pearson", "tau_params", "tau_depth", "partial_tau", "partial_tau_depth")
FORMATS = ("markdown", "csv", "json")
PARTIAL_DEFINITION = (
    "partial Kendall tau of the score x with the accuracy y given the parameter count z (Kendall 1942): "
    "(t_xy - t_xz t_yz) / sqrt((1 - t_xz^2)(1 - t_yz^2)), each t a Kendall tau-b over the architectures "
    "where the target is measured"
)
PARTIAL_DEPTH_DEFINITION = "the same with z the depth (number of transformer blocks)"
BAR_DEFINITION = (
    "the best coarse descriptor for the target (parameter count, depth, width, multiply-accumulates) and its "
    "Kendall tau-b on the same architectures: the figure a proxy has to clear; beats_bar compares the proxy's "
    "mean Kendall over seeds with it"
)


# ------------------------------------------------------------------ correlations






def seed_figures(scores: np.ndarray, accuracies: np.ndarray, params: np.ndarray,
                 depth: np.ndarray | None = None) -> dict:
    """One seed's figures for one target: correlate() plus tau_params and partial_tau (and,
    with ``depth``, tau_depth and partial_tau_depth)."""
    result = correlate(scores, accuracies)
    keep = ~np.isnan(accuracies)
    x, y, z = scores[keep], accuracies[keep], params[keep]
    result["tau_params"] = kendall(x, z)
    result["partial_tau"] = partial_kendall(x, y, z)
    if depth is not None:
        result["tau_depth"] = kendall(x, depth[keep])
        result["partial_tau_depth"] = partial_kendall(x, y, depth[keep])
    return result


def summarise(values: Sequence[float]) -> dict:
    """Mean and sample std (ddof 1; None with one seed) over seeds; NaN seeds make them None."""
    array = np.asarray(values, dtype=np.float64)
    if len(array) == 0 or np.isnan(array).any():
        return {"mean": None, "std": None, "per_seed": [_none(v) for v in array.tolist()]}
    std = float(np.std(array, ddof=1)) if len(array) > 1 else None
    return {"mean": float(np.mean(array)), "std": std, "per_seed": array.tolist()}


def _none(value):
    return None if isinstance(value, float) and math.isnan(value) else value


# ----------------------------------------------------------------------- the table


def _log(message: str, quiet: bool) -> None:
    if not quiet:
        print(message, file=sys.stderr, flush=True)


def _compute_missing_statistics(proxies: Sequence[Proxy], archs: list, targets: Sequence[str],
                                seeds: Sequence[int], spec: InputSpec, target_classes: Mapping[str, int],
                                cache: StatisticsCache, workers: int, quiet: bool) -> int:
    """Compute, once for all genome proxies, the statistics entries they read that the cache lacks; their count."""
    if not any(p.needs_statistics for p in proxies):
        return 0
    plans = [StatsPlan(spec, (seed,), {t: target_classes[t] for t in targets}) for seed in seeds]
    absent = [r for plan in plans for r in plan.requests(archs) if not cache.contains(r)]
    if absent:
        _log(f"genome proxies: computing {len(absent)} missing statistics entries", quiet)
        build_cache(cache, absent, workers=workers, progress=None if quiet else Progress("statistics", every=30))
    return len(absent)


def _score_proxy(proxy: Proxy, row: dict, archs: list, indices: Sequence[int], seeds: Sequence[int],
                 class_counts: list[int], spec: InputSpec, cache: StatisticsCache, workers: int, teacher,
                 quiet: bool) -> dict[int, dict[int, np.ndarray]] | None:
    """One proxy's scores by seed and class count, through the core every scoring path shares.

    ``row`` is filled with what the table says of the scoring (seconds, cache use, a
    failure); ``None`` when the proxy failed on some architecture.
    """
    per_seed: dict[int, dict[int, np.ndarray]] = {}
    results: list = []
    failures = []
    for seed in seeds:
        for classes in class_counts:
            progress = None if quiet or proxy.needs_statistics else Progress(f"{proxy.name}, seed {seed}", every=30)
            outcome = proxy.raw_values(archs, spec, seed, classes, cache, workers=workers, progress=progress,
                                       teacher=teacher)
            results += outcome
            failed = [(seed, index, r.error) for index, r in enumerate(outcome) if not r.ok]
            failures += failed
            if not failed:
                per_seed.setdefault(seed, {})[classes] = proxy.set_scores([r.raw for r in outcome])
    row["seconds_per_arch"] = float(np.mean([r.seconds for r in results]))
    cached = sum(r.cached for r in results)
    if cached == len(results):
        row["fresh"] += " (values read from the score cache)"
    elif cached:
        row["fresh"] += f" ({cached} of {len(results)} values read from the score cache)"
    if failures:
        seed, index, reason = failures[0]
        row.update(status="failed", reason=(
            f"failed on {len({f[1] for f in failures})} of {len(archs)} architectures; first: architecture "
            f"{indices[index]} (seed {seed}): {reason}"))
        return None
    return per_seed


def _add_figures(rows: dict[str, dict], scores: dict[str, dict[int, dict[int, np.ndarray]]],
                 targets: Sequence[str], seeds: Sequence[int], target_classes: Mapping[str, int],
                 accuracies: Mapping[str, np.ndarray], params: np.ndarray, depth: np.ndarray,
                 bars: Mapping[str, dict]) -> None:
    """Each scored row's figures per target (mean and std over seeds); a row of constant scores fails."""
    for name, row in rows.items():
        row["targets"] = {}
        if name not in scores:
            continue
        constant = [s for s, by_classes in scores[name].items() if any(np.ptp(v) == 0 for v in by_classes.values())]
        if constant:
            row.update(status="failed", reason=f"all scores equal (seed {constant[0]})")
            continue
        for target in targets:
            classes = target_classes[target]
            per_seed = [seed_figures(scores[name][seed][classes], accuracies[target], params, depth)
                        for seed in seeds]
            figs = {"n": per_seed[0]["n"], **{metric: summarise([f[metric] for f in per_seed]) for metric in METRICS}}
            mean, bar = figs["kendall"]["mean"], bars[target]["kendall"]
            figs["beats_bar"] = None if mean is None or bar is None or math.isnan(bar) else bool(mean > bar)
            row["targets"][target] = figs


def rank_table(proxies: Sequence[Proxy], bench: Benchmark, indices: Sequence[int], targets: Sequence[str],
               seeds: Sequence[int], spec: InputSpec, target_classes: Mapping[str, int], cache: StatisticsCache,
               workers: int = 1, teacher=None, quiet: bool = True, split: str = "all") -> dict:
    """The ranking table of ``proxies`` on the architectures ``indices`` of ``bench``, as JSON-ready data.

    Each seed in ``seeds`` is one repetition (network initialisation and minibatch).
    Zoo raw values are read from / stored in the score cache beside the statistics
    cache; genome proxies use the statistics cache. ``teacher`` (an ``nn.Module``
    returning (B, C, H, W) feature maps) enables ``tvt``'s teacher-aware term.

    Scores come from the core every scoring path shares (:meth:`Proxy.raw_values`, then
    :meth:`Proxy.set_scores` over these architectures), seed by seed. What is the
    table's own: the scores of each seed are kept (mean and std over seeds), a failing
    proxy is a failed row (with its first failing benchmark index) and never stops the
    others, seconds and score-cache use are reported, and the statistics missing for the
    genome proxies are computed once for all of them before any is scored.
    """
    if not seeds:
        raise ConfigError("no seed given")
    archs = [bench.archs[i] for i in indices]
    columns = descriptor_columns(archs)  # params: 100-class head, as everywhere in the engine
    params, depth = columns["params"], columns["depth"]
    accuracies = {t: bench.accuracies[t][list(indices)] for t in targets}
    bars = {t: coarse_bar(columns, accuracies[t]) for t in targets}
    class_counts = sorted(set(target_classes[t] for t in targets))
    names = [p.name for p in proxies]
    rows: dict[str, dict] = {}
    # scores[name][seed][classes] -> array
    scores: dict[str, dict[int, dict[int, np.ndarray]]] = {}

    for proxy in proxies:
        rows[proxy.name] = {
            "proxy": proxy.name, "kind": proxy.kind, "source": proxy.source, "status": "ok", "reason": "",
            "note": "", "input": "", "fresh": "", "seconds_per_arch": None,
            **({"genome": genome_to_string(proxy.genome)} if proxy.genome is not None else {}),
        }

    # Genome proxies read statistics: the missing ones are computed here once, for all of them.
    missing = _compute_missing_statistics(proxies, archs, targets, seeds, spec, target_classes, cache, workers, quiet)

    # Every proxy through the same core, seed by seed: its raw values, then its scores of this set.
    for proxy in proxies:
        row = rows[proxy.name]
        row["input"], row["fresh"] = proxy.scorer.describe(spec, teacher)
        actual = proxy.computed_as(teacher)
        if actual != proxy.name:  # tvt without a teacher is tvt_l2: one row, not two
            if actual in names:
                row.update(status="skipped", reason=f"no teacher given; {actual} is its teacher-free part",
                           note=proxy.note, fresh="", input="")
                continue
            row["note"] = proxy.note
        if proxy.needs_statistics and missing:
            row["fresh"] = (f"statistics: {missing} entries computed in this run (one forward/backward each, "
                            "shared by every genome proxy), then cached")
        per_seed = _score_proxy(proxy, row, archs, indices, seeds, class_counts, spec, cache, workers, teacher,
                                quiet)
        if per_seed is None:
            continue
        scores[proxy.name] = per_seed

    _add_figures(rows, scores, targets, seeds, target_classes, accuracies, params, depth, bars)

    return {
        "benchmark": {"file": Path(bench.source).name, "path": str(bench.source), "sha256": bench.sha256,
                      "space": bench.space},
        "split": split,
        "architectures": len(archs),
        "seeds": list(seeds),
        "input": spec.to_json(),
        "target_classes": {t: target_classes[t] for t in targets},
        "targets": list(targets),
        "partial_tau": PARTIAL_DEFINITION,
        "partial_tau_depth": PARTIAL_DEPTH_DEFINITION,
        "bar": BAR_DEFINITION,
        "bars": bars,
        "std": "sample standard deviation over seeds (ddof 1)",
        "proxies": [rows[p.name] for p in proxies],
    }


# -------------------------------------------------------------------------- output


def _cell(summary: Mapping | None, seeds: int) -> str:
    if not summary or summary.get("mean") is None:
        return ""
    text = format_float(summary["mean"])
    if seeds > 1 and summary.get("std") is not None:
        text += f" ± {format_float(summary['std'], signed=False)}"
    return text


def _seconds(value) -> str:
    if value is None:
        return ""
    return f"{value:.3f}" if value >= 0.001 else f"{value:.1e}"


def _bar_text(bar: Mapping | None) -> str:
    if not bar or bar.get("kendall") is None or (isinstance(bar["kendall"], float) and math.isnan(bar["kendall"])):
        return ""
    return f"{bar['descriptor']} {format_float(bar['kendall'])}"


def _yes_no(value) -> str:
    return "" if value is None else ("yes" if value else "no")


#: Markdown header cells of the figures, in METRICS order.
MARKDOWN_METRICS = ("Kendall", "Spearman", "Pearson", "τ with params", "τ with depth", "partial τ given params",
                    "partial τ given depth")


def format_markdown(table: Mapping) -> str:
    """The table in Markdown, one row per proxy and target, then the bars and the notes."""
    seeds = len(table["seeds"])
    spec = table["input"]
    bars = table.get("bars") or {}
    header = ["proxy", "target", *MARKDOWN_METRICS, "bar (best descriptor τ)", "beats bar", "s/arch", "fresh pass"]
    lines = [
        f"{table['benchmark']['space']}: {table['benchmark']['file']}, {table['architectures']} architectures "
        f"(split {table['split']}), seeds {', '.join(map(str, table['seeds']))}; statistics input {spec['kind']}, "
        f"batch {spec['batch_size']}" + ("; mean ± std over seeds" if seeds > 1 else ""),
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    notes = []
    for row in table["proxies"]:
        if row["status"] != "ok":
            lines.append(f"| {row['proxy']} | all | {row['status']}: {row['reason']} |" + "  |" * (len(METRICS) + 1)
                         + f" {_seconds(row['seconds_per_arch'])} | {row['fresh']} |")
        else:
            for target, figs in row["targets"].items():
                cells = [_cell(figs[m], seeds) for m in METRICS]
                cells += [_bar_text(bars.get(target)), _yes_no(figs.get("beats_bar"))]
                lines.append(f"| {row['proxy']} | {target} | " + " | ".join(cells)
                             + f" | {_seconds(row['seconds_per_arch'])} | {row['fresh']} |")
        if row.get("note") and row["status"] == "ok":
            notes.append(f"- {row['proxy']}: {row['note']}")
        if row.get("genome"):
            notes.append(f"- {row['proxy']}: `{row['genome']}`")
    if bars:
        lines += ["", "Bar per target, the best coarse descriptor (parameter count, depth, width, multiply-accumulates) "
                      "on these architectures: " + "; ".join(f"{t} {_bar_text(b) or 'undefined'}" for t, b in bars.items())
                  + f". A proxy beats the bar when its {'mean ' if seeds > 1 else ''}Kendall is above it."]
    lines += ["", f"Partial τ: {table['partial_tau']}; given depth: {table.get('partial_tau_depth', PARTIAL_DEPTH_DEFINITION)}."]
    if notes:
        lines += [""] + notes
    return "\n".join(lines) + "\n"


CSV_COLUMNS = ["proxy", "kind", "target", "n",
               *[f"{m}_{s}" for m in METRICS for s in ("mean", "std")],
               "bar_descriptor", "bar_kendall", "beats_bar",
               "seconds_per_arch", "fresh", "input", "status", "reason"]


def format_csv(table: Mapping) -> str:
    """The table as CSV, one row per proxy and target (a failed proxy: one row, target empty)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in table["proxies"]:
        base = {"proxy": row["proxy"], "kind": row["kind"], "seconds_per_arch": row["seconds_per_arch"],
                "fresh": row["fresh"], "input": row["input"], "status": row["status"], "reason": row["reason"]}
        if not row["targets"]:
            writer.writerow(base)
        for target, figs in row["targets"].items():
            values = {f"{m}_{s}": figs[m][s] for m in METRICS for s in ("mean", "std")}
            bar = (table.get("bars") or {}).get(target) or {}
            values |= {"bar_descriptor": bar.get("descriptor"), "bar_kendall": _none(bar.get("kendall")),
                       "beats_bar": figs.get("beats_bar")}
            writer.writerow(base | {"target": target, "n": figs["n"]} | values)
    return buffer.getvalue()


def format_json(table: Mapping) -> str:
    return json.dumps(json_safe(table), indent=2) + "\n"


def format_table(table: Mapping, fmt: str) -> str:
    if fmt == "markdown":
        return format_markdown(table)
    if fmt == "csv":
        return format_csv(table)
    if fmt == "json":
        return format_json(table)
    raise ConfigError(f"unknown format {fmt!r}; use {', '.join(FORMATS)}")


__all__ = ["BAR_DEFINITION", "FORMATS", "METRICS", "PARTIAL_DEFINITION", "PARTIAL_DEPTH_DEFINITION",
           "format_csv", "format_json", "format_markdown", "format_table", "rank_table",
           "seed_figures", "summarise"]
