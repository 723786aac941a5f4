"""Proxy tables of the computed spaces: each architecture's accuracies and the thirteen proxies of
NAS-Bench-Suite-Zero, as ``autoprox rank --proxy NAME`` computes them.

One CSV per space, ``autoprox/resources/proxy-tables/<name>.csv``: the column ``id`` (a ViT-Bench-101
architecture's key as autoprox spells it, the compact JSON of its config; a timm model's name,
``timm:deit_base_patch16_224``), then every target of the benchmark (top-1 in %), then the proxies
of :data:`PROXIES` in that order (``params`` and ``flops`` in millions, as NAS-Bench-Suite-Zero
writes them). Floats are written with ``repr`` precision; a proxy that fails on a network leaves
its cell empty (and says so on stderr). Beside it, ``<name>.json`` records the command, the autoprox
version, the seed, the input, the date, the empty cells with their reason and each proxy's seconds.

Every value comes through the path of ``autoprox rank --proxy NAME --split all`` with rank's
defaults (statistics seed 0, one gaussian batch of 8, a 100-class head for the zoo's networks and
for the parameter and MAC counts), and zoo values go to (and are read from) the same score cache,
so a later ``rank`` reads them back. Architectures are computed one at a time, every proxy on a
fresh network that is dropped (and garbage-collected) before the next; the table and its sidecar
are rewritten (atomically) after each architecture, so an interrupted run resumes where it stopped:
the cells already in the table are kept (``--fresh`` computes everything again). ``--minutes M``
starts no new architecture after M minutes. ``--proxies a,b`` makes a table of those columns (in
the table's order; the sidecar names them): on a 2-core machine shared with others GraSP and the
other full forward/backward proxies cost minutes per large network, so a table can be made column
by column, each run keeping the earlier table's cells of the columns it names and computing only
the columns that table lacks (or reading them from the score cache).

Usage::

    python benchmarks/proxy_tables.py --space autoformer   # 100 AutoFormer architectures of ViT-Bench-101
    python benchmarks/proxy_tables.py --space pit          # 100 PiT architectures
    python benchmarks/proxy_tables.py --space timm         # the 49 models of examples/timm_imagenet_heldout.csv
"""

from __future__ import annotations

import argparse
import csv
import gc
import io
import json
import math
import os
import resource
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT_DIR = REPO / "autoprox" / "resources" / "proxy-tables"

#: The proxies of NAS-Bench-Suite-Zero (Krishnakumar et al. NeurIPS 2022), in the tables' column order.
PROXIES = ("params", "flops", "snip", "grasp", "synflow", "grad_norm", "fisher", "plain", "nwot", "jacov",
           "l2_norm", "zen", "epe_nas")
#: Proxies written in millions.
MILLIONS = frozenset({"params", "flops"})
#: Space -> (rank's benchmark options, table name).
SPACES = {
    "autoformer": (("--space", "autoformer"), "autoformer"),
    "pit": (("--space", "pit"), "pit"),
    "timm": (("--bench", "examples/timm_imagenet_heldout.csv"), "timm-imagenet"),
}


def architecture_id(arch) -> str:
    """The table's ``id`` of an architecture: a timm model's name, else autoprox's key (compact JSON)."""
    from autoprox.spaces.architectures import arch_key

    model = getattr(arch, "model", None)
    return model if isinstance(model, str) else arch_key(arch)


def cell(value: float | None) -> str:
    """A float with ``repr`` precision; empty for a missing value (NaN or None)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return repr(float(value))


def rss_gb() -> tuple[float, float]:
    """(resident, peak resident) memory of this process in GB."""
    with open("/proc/self/statm", encoding="ascii") as handle:
        resident = int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    return resident / 1e9, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9


def read_kept_rows(path: Path, header: list[str]) -> dict[str, dict[str, str]]:
    """The cells of an earlier (possibly unfinished) table, by id and column.

    The earlier table may hold fewer proxy columns than ``header`` (a column added later) or
    others: its cells of the columns ``header`` names are kept, the rest are computed again. A
    table with other leading (id and target) columns is not read."""
    if not path.is_file():
        return {}
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    targets = [c for c in header if c not in PROXIES]
    if not rows or rows[0][:len(targets)] != targets:
        print(f"{path}: another header; computing every row again", file=sys.stderr)
        return {}
    columns = rows[0]
    return {row[0]: {c: v for c, v in zip(columns, row) if c in header}
            for row in rows[1:] if len(row) == len(columns)}


def write_table(path: Path, header: list[str], rows: list[list[str]]) -> None:
    from autoprox.core.atomic import atomic_write_text

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    atomic_write_text(path, buffer.getvalue())


def chosen_proxies(text: str | None) -> tuple[str, ...]:
    """The columns ``--proxies`` names, in the order of :data:`PROXIES` (all of them without it)."""
    if text is None:
        return tuple(PROXIES)
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in PROXIES]
    if unknown or not names:
        raise SystemExit(f"--proxies: unknown column {unknown[0]!r}; known: {', '.join(PROXIES)}" if unknown
                         else "--proxies: no column given")
    return tuple(p for p in PROXIES if p in names)


def rank_context(space: str):
    """Benchmark, statistics plan and cache exactly as ``autoprox rank --split all`` makes them."""
    from autoprox.cli.main import build_parser
    from autoprox.cli.options import bench_path, plan_from_args
    from autoprox.data.benchmark import load_benchmark
    from autoprox.data.cache import StatisticsCache

    options, _ = SPACES[space]
    args = build_parser().parse_args(["rank", "--proxy", "params", *options, "--split", "all"])
    bench = load_benchmark(bench_path(args))
    plan = plan_from_args(args, bench.targets)
    if len(plan.keys()) != 1:
        raise SystemExit(f"rank's defaults give {len(plan.keys())} statistics sets; the table takes one")
    return args, bench, plan, StatisticsCache(args.cache_dir, args.cache_precision)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--space", choices=sorted(SPACES), required=True)
    parser.add_argument("--out", type=Path, default=OUT_DIR, help="folder of the tables (default: %(default)s)")
    parser.add_argument("--fresh", action="store_true", help="compute every row again (default: keep the table's)")
    parser.add_argument("--minutes", type=float, default=None, help="start no architecture after this many minutes")
    parser.add_argument("--limit", type=int, default=None, help="the first N architectures only (a trial)")
    parser.add_argument("--proxies", default=None,
                        help="comma-separated columns to compute, of: " + ",".join(PROXIES) + " (default: all)")
    options = parser.parse_args(argv)

    import torch

    from autoprox import __version__
    from autoprox.core.atomic import atomic_write_json
    from autoprox.proxies.proxy import resolve_proxy

    start = time.perf_counter()
    args, bench, plan, cache = rank_context(options.space)
    (seed, classes), = plan.keys()
    rank_options, name = SPACES[options.space]
    archs = list(bench.archs)[:options.limit]
    targets = list(bench.targets)
    chosen = chosen_proxies(options.proxies)
    header = ["id", *targets, *chosen]
    table_path, sidecar_path = options.out / f"{name}.csv", options.out / f"{name}.json"
    kept = {} if options.fresh else read_kept_rows(table_path, header)
    previous = json.loads(sidecar_path.read_text()) if kept and sidecar_path.is_file() else {}
    for arch_id, columns in previous.get("pending_cells", {}).items():  # written empty by an interrupted run
        for column in columns:
            kept.get(arch_id, {}).pop(column, None)
    seconds = {p: dict(previous.get("seconds", {}).get(p, {"total": 0.0, "architectures": 0})) for p in chosen}
    failed: dict[str, dict] = {p: dict(v) for p, v in previous.get("empty_cells", {}).items()}
    wall = float(previous.get("wall_seconds", 0.0))
    proxies = {p: resolve_proxy(p) for p in chosen}
    rows: dict[str, list[str]] = {}
    ids = [architecture_id(a) for a in archs]
    loads = [round(v, 2) for v in os.getloadavg()]
    peak = 0.0

    def save(complete: bool) -> None:
        # rows not reached yet keep their earlier cells (a new column's cell empty, and named as pending), so
        # an interrupted run loses nothing computed
        pending = {i: [c for c in chosen if c not in kept[i]] for i in ids if i not in rows and i in kept}
        pending = {i: columns for i, columns in pending.items() if columns}
        ordered = [rows[i] if i in rows else [kept[i].get(c, "") for c in header] for i in ids
                   if i in rows or i in kept]
        write_table(table_path, header, ordered)
        record = {
            "table": table_path.name,
            "command": f"python benchmarks/proxy_tables.py --space {options.space}"
                       + (f" --proxies {','.join(chosen)}" if list(chosen) != list(PROXIES) else ""),
            "values_as": f"autoprox rank --proxy NAME {' '.join(rank_options)} --split all (its defaults)",
            "autoprox_version": __version__,
            "torch_version": torch.__version__,
            "benchmark": {"file": Path(bench.source).name, "sha256": bench.sha256, "architectures": len(archs)},
            "seed": seed,
            "input": plan.spec.to_json(),
            "classes": classes,
            "units": {"accuracy": "top-1 %", "params": "millions (100-class head, as rank counts)",
                      "flops": "millions of multiply-accumulates (100-class head, as rank counts)"},
            "proxies": list(chosen),
            "rows": len(ordered),
            "complete": complete,
            "empty_cells": failed,
            "seconds": seconds,
            "wall_seconds": round(wall + time.perf_counter() - start, 1),
            "machine": {"cores": os.cpu_count(), "load_at_start": loads, "load_now": [round(v, 2) for v in os.getloadavg()],
                        "peak_rss_gb": round(max(peak, rss_gb()[1]), 2)},
            "date": datetime.now(timezone.utc).replace(microsecond=0).isoformat(),
        }
        if pending:
            record["pending_cells"] = pending
        if previous.get("left_out_as_empty"):
            record["left_out_as_empty"] = previous["left_out_as_empty"]
        atomic_write_json(sidecar_path, record)

    options.out.mkdir(parents=True, exist_ok=True)
    print(f"{name}: {len(archs)} architectures, {len(kept)} kept from {table_path}; seed {seed}, "
          f"{plan.spec.kind} batch {plan.spec.batch_size}, {classes} classes", file=sys.stderr, flush=True)
    stopped = False
    for index, (arch, arch_id) in enumerate(zip(archs, ids)):
        kept_cells = kept.get(arch_id, {})
        missing = [p for p in chosen if p not in kept_cells]
        if arch_id in kept and not missing:
            rows[arch_id] = [kept_cells[c] for c in header]
            continue
        if options.minutes is not None and time.perf_counter() - start > 60 * options.minutes:
            stopped = True
            break
        began = time.perf_counter()
        computed = {"id": arch_id, **{t: cell(float(bench.accuracies[t][index])) for t in targets}}
        for proxy_name in chosen:
            if proxy_name not in missing:
                computed[proxy_name] = kept_cells[proxy_name]
                continue
            result = proxies[proxy_name].raw_values([arch], plan.spec, seed, classes, cache, workers=1)[0]
            if math.isfinite(result.seconds):
                seconds[proxy_name]["total"] = round(seconds[proxy_name]["total"] + result.seconds, 3)
                seconds[proxy_name]["architectures"] += 1
            if result.ok:
                value = float(result.raw) / (1e6 if proxy_name in MILLIONS else 1.0)
                computed[proxy_name] = cell(value)
            else:
                computed[proxy_name] = ""
                entry = failed.setdefault(proxy_name, {"count": 0, "first_reason": result.error})
                entry["count"] += 1
                print(f"warning: {proxy_name} failed on {arch_id}: {result.error}", file=sys.stderr, flush=True)
            del result
            gc.collect()
        rows[arch_id] = [computed[c] for c in header]
        resident, peak_now = rss_gb()
        peak = max(peak, peak_now)
        save(complete=False)
        print(f"[{index + 1}/{len(archs)}] {arch_id[:60]} {time.perf_counter() - began:.1f} s, "
              f"rss {resident:.2f} GB (peak {peak:.2f} GB), load {os.getloadavg()[0]:.1f}", file=sys.stderr, flush=True)
    complete = not stopped and len(rows) == len(archs)
    save(complete=complete)
    print(f"{name}: {len(rows)} of {len(archs)} rows in {table_path}"
          + ("" if complete else " (unfinished: run it again to go on)"), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
