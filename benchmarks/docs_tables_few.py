"""The few-label protocol's tables of docs/results-few-labels.md, from ``runs/few-labels/few_labels.json`` (the record
of ``autoprox evaluate --few-labels``). Registered by docs_tables.py beside the others; standard library only."""

from __future__ import annotations

from typing import Callable

FEW_LABELS = "few-labels/few_labels.json"
SHOWN = ("size", "best-column", "ridge", "forest", "engine")


def _num(value: float, signed: bool = True) -> str:
    return "n/a" if value is None else (f"{value:+.3f}" if signed else f"{value:.3f}")


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + ["| " + " | ".join(r) + " |" for r in rows]


def _interval(difference: dict) -> str:
    low, high = difference["interval"]
    return f"{difference['mean']:+.3f} [{low:+.3f}, {high:+.3f}] {difference['ahead']}/{difference['draws']}"


def summary_table(record: dict) -> list[str]:
    """Per k: the mean over tables of each method, and on how many tables the engine leads size, ridge, forest."""
    methods = [m for m in SHOWN if m in record["spec"]["methods"]]
    rows = []
    for k, entry in record["summary"].items():
        tables = entry["tables"]
        cells = [k, str(tables)] + [_num(entry["mean"].get(m), False) for m in methods]
        cells += [f"{entry.get('engine_ahead_of_size', 'n/a')}/{tables}",
                  f"{entry.get('engine_at_or_above_ridge', 'n/a')}/{tables}",
                  f"{entry.get('engine_at_or_above_forest', 'n/a')}/{tables}"]
        rows.append(cells)
    return _table(["k", "tables"] + methods + ["engine ahead of size", "engine >= ridge", "engine >= forest"], rows)


def per_table(record: dict) -> list[str]:
    """Per table and k: each method's mean Kendall over the draws, and the engine's paired difference to ridge and to
    the size count (bootstrap 95 % interval over the draws, draws ahead)."""
    methods = [m for m in SHOWN if m in record["spec"]["methods"]]
    rows = []
    for name, per_k in record["results"].items():
        for k, entry in per_k.items():
            if "mean" not in entry:
                rows.append([name, k] + ["skipped"] + [""] * (len(methods) + 1))
                continue
            diff = entry["difference"]
            rows.append([name, k] + [_num(entry["mean"][m], False) for m in methods]
                        + [_interval(diff["ridge"]) if "ridge" in diff else "n/a",
                           _interval(diff["size"]) if "size" in diff else "n/a"])
    return _table(["table", "k"] + methods + ["engine - ridge", "engine - size"], rows)


def tables() -> dict[str, tuple[str, Callable]]:
    return {"few-labels-summary": ("results", lambda r: summary_table(r.json(FEW_LABELS))),
            "few-labels-tables": ("results", lambda r: per_table(r.json(FEW_LABELS)))}
