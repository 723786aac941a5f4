"""A user's own accuracy table: CSV benchmarks, ``model`` entries and the space of a benchmark.

A CSV benchmark has a header row, then one row per network::

    # ImageNet top-1 of timm models (lines starting with # are comments)
    model,imagenet_acc
    timm:deit_tiny_patch16_224,72.172

Columns: ``arch`` (the architecture config as JSON, quoted as CSV quotes text with commas)
or ``model`` (a model name such as ``timm:deit_tiny_patch16_224``), an optional ``space``,
and any number of accuracy columns ``<target>_acc`` (an empty cell is a missing value).
Every bad row is reported, each with its line number and the reason, in one error, and
nothing is computed until the file is valid.

In every benchmark format an entry may carry a ``space``: the name of a registered space,
or a space file (``.json``/``.toml``, relative to the benchmark's folder), so that the
benchmark says which space its architectures belong to (a run reopened later finds it
again). Without one the space is detected from the first entry's keys.
"""

from __future__ import annotations

import csv
import json
import math
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from autoprox.core.errors import ArchitectureError, BenchmarkError
from autoprox.core.numbers import cell_number
from autoprox.data.proxy_tables import binary_kind
from autoprox.networks import timm_models  # noqa: F401 (registers the timm space for model entries)
from autoprox.spaces.architectures import parse_arch
from autoprox.spaces.base import SearchSpace
from autoprox.spaces.registry import REGISTRY

__all__ = ["ACC_SUFFIX", "SPACE_FILE_SUFFIXES", "parse_architectures", "read_csv_entries", "resolve_space"]

ACC_SUFFIX = "_acc"
SPACE_FILE_SUFFIXES = (".json", ".toml")
ARCH_COLUMNS = ("arch", "model")


def resolve_space(name: str, folder: Path | None = None) -> SearchSpace:
    """A benchmark's ``space`` value: a registered space's name, or a space file (relative to ``folder``)."""
    if not isinstance(name, str) or not name.strip():
        raise BenchmarkError(f"a space is a name or a space file, got {name!r}")
    if Path(name).suffix.lower() in SPACE_FILE_SUFFIXES:
        path = Path(name)
        if not path.is_absolute() and folder is not None:
            path = folder / path
        return REGISTRY.register_file(path)
    return REGISTRY.get(name)


def _config(entry: Mapping) -> Any:
    if "arch" in entry and "model" in entry:
        raise ArchitectureError("has both 'arch' and 'model'; give one")
    if "model" in entry:
        return {"model": entry["model"]}
    return entry["arch"]


def _architectures(entries: Sequence[Mapping], source: str, labels: Sequence[str]
                   ) -> tuple[SearchSpace | None, list, list[str]]:
    """The benchmark's space, its records, and ``"<label>: <reason>"`` for every entry that fails."""
    folder = Path(source).parent if source and not source.startswith("<") else None
    named = sorted({str(e["space"]) for e in entries if "space" in e})
    if len(named) > 1:
        return None, [], [f"entries name different spaces ({', '.join(named)}); a benchmark has one space"]
    if named:
        try:
            space = resolve_space(named[0], folder)
        except ArchitectureError as exc:
            return None, [], [f"space {named[0]!r}: {exc}"]
    else:
        try:
            space = REGISTRY.detect(_config(entries[0]))
        except ArchitectureError as exc:
            return None, [], [f"{labels[0]}: {exc}"]
        _warn_if_shadowed(space, _config(entries[0]), source)
    archs, errors = [], []
    for label, entry in zip(labels, entries):
        try:
            archs.append(parse_arch(_config(entry), space.name))
        except ArchitectureError as exc:
            errors.append(f"{label}: {exc}")
    return space, archs, errors


def _warn_if_shadowed(space: SearchSpace, config: Any, source: str) -> None:
    try:
        others = [s for s in REGISTRY.fitting(config) if s is not space and REGISTRY.is_from_file(s)]
    except ArchitectureError:
        return
    if others and not REGISTRY.is_from_file(space):
        warnings.warn(f"{Path(source).name}: its architectures also fit {others[0].name} (a space file); read as "
                      f"{space.name}. Add a 'space' column or key naming the file to read them as that space",
                      stacklevel=3)


def _report(source: str, errors: Sequence[str], what: str) -> BenchmarkError:
    count = f" ({len(errors)} bad {what})" if len(errors) > 1 else ""
    return BenchmarkError(f"{source}: " + "; ".join(errors) + count)


def parse_architectures(entries: Sequence[Mapping], source: str = "<memory>",
                        labels: Sequence[str] | None = None) -> tuple[str, list]:
    """``(space name, records)`` of benchmark entries (``arch`` or ``model``, optional ``space``).

    Every entry that fails is reported, in one :class:`BenchmarkError`.
    """
    labels = list(labels) if labels is not None else [f"entry {n}" for n in range(len(entries))]
    for label, entry in zip(labels, entries):
        if "arch" in entry and "model" in entry:
            raise BenchmarkError(f"{source}: {label} has both 'arch' and 'model'; give one")
    space, archs, errors = _architectures(entries, source, labels)
    if errors:
        raise _report(source, errors, "entries")
    assert space is not None
    return space.name, archs


# ------------------------------------------------------------------------- CSV
def _data_lines(text: str, consumed: list[int]) -> Iterator[str]:
    """The lines of ``text`` that are neither blank nor comments, noting each one's line number."""
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        consumed.append(number)
        yield line


def _cell_number(text: str) -> float | None:
    if not text.strip():
        return None
    try:
        value = cell_number(text.strip())
    except ValueError:
        raise ValueError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"{text!r} is not a finite number")
    return value


def read_csv_entries(path: str | Path, with_lines: bool = False) -> list[dict[str, Any]] | tuple[list, list[int]]:
    """The entries of a CSV benchmark, validated (architectures included), as JSON Lines entries.

    Raises one :class:`BenchmarkError` naming every bad row by its line number. With
    ``with_lines``, also the file line of each entry (for the errors found later).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        kind = binary_kind(path)
        raise BenchmarkError(f"{path}: {kind}" if kind else
                             f"{path}: not a UTF-8 text file (byte {exc.start}); expected CSV") from None
    consumed: list[int] = []
    reader = csv.reader(_data_lines(text, consumed), skipinitialspace=True)
    try:
        header = [cell.strip() for cell in next(reader)]
    except StopIteration:
        raise BenchmarkError(f"{path}: no header row: a proxy table starts with id, its accuracy columns, then its "
                             "proxy columns; a ViT benchmark with arch or model, then <target>_acc columns") from None
    except csv.Error as exc:
        raise BenchmarkError(f"{path}: line {consumed[-1]}: {exc}") from None
    header_line = consumed[0]
    problems = []
    if len(header) == 1:  # one column: most likely another delimiter
        found = [d for d in (";", "\t", "|", ":") if d in header[0]]
        if found:  # the column checks below would only restate it
            raise BenchmarkError(f"{path}: header (line {header_line}): the header is one column holding {found[0]!r}: "
                                 f"the file seems to use {found[0]!r} as its delimiter; a CSV table or benchmark is "
                                 "comma-separated")
    strangers = []
    for index, name in enumerate(header):
        if name in header[:index]:
            problems.append(f"column {name!r} appears twice")
        elif name not in (*ARCH_COLUMNS, "space") and not (name.endswith(ACC_SUFFIX) and len(name) > len(ACC_SUFFIX)):
            strangers.append(name)
    if strangers:  # named once, the first few: a wide table is not a line per column
        shown = ", ".join(repr(name[:40]) for name in strangers[:4]) + (f" and {len(strangers) - 4} more"
                                                                         if len(strangers) > 4 else "")
        problems.append(f"column{'s' if len(strangers) > 1 else ''} {shown} {'are' if len(strangers) > 1 else 'is'} "
                        f"not arch, model, space or an accuracy column <target>{ACC_SUFFIX}")
    if not any(c in header for c in ARCH_COLUMNS):
        cased = f" ({header[0]!r} is not 'id': names are case-sensitive)" if header[0].lower() == "id" else ""
        problems.append("no arch or model column" + ("; a proxy table (id, accuracies, proxy columns) must have "
                                                      f"'id' as its first column{cased}" if strangers else ""))
    if not any(c.endswith(ACC_SUFFIX) for c in header):
        problems.append(f"no accuracy column (<target>{ACC_SUFFIX})")
    if problems:
        raise BenchmarkError(f"{path}: header (line {header_line}): " + "; ".join(problems))

    entries: list[dict[str, Any]] = []
    entry_lines: list[int] = []
    reasons_by_line: dict[int, list[str]] = {}
    checkable: list[tuple[int, dict[str, Any]]] = []  # rows whose architecture can be checked
    trouble: list[str] = []
    while True:
        start = len(consumed)
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            trouble.append(f"line {consumed[start] if start < len(consumed) else consumed[-1]}: {exc}")
            break
        line = consumed[start]
        if len(row) != len(header):
            reasons_by_line[line] = [f"{len(row)} cells, the header has {len(header)}"]
            continue
        entry, reasons = _entry(dict(zip(header, row)))
        if reasons:
            reasons_by_line[line] = reasons
        else:
            entries.append(entry)
            entry_lines.append(line)
        if "arch" in entry or "model" in entry:
            checkable.append((line, entry))
    if not checkable and not reasons_by_line and not trouble:
        raise BenchmarkError(f"{path}: no rows after the header")
    if checkable:
        _, _, arch_errors = _architectures([e for _, e in checkable], str(path), [f"line {n}" for n, _ in checkable])
        for error in arch_errors:
            label, _, reason = error.partition(": ")
            if label.startswith("line ") and label[5:].isdigit():
                reasons_by_line.setdefault(int(label[5:]), []).append(reason)
            else:
                trouble.append(error)
    errors = trouble + [f"line {n}: " + ", ".join(reasons_by_line[n]) for n in sorted(reasons_by_line)]
    if errors:
        raise _report(str(path), errors, "rows")
    return (entries, entry_lines) if with_lines else entries


def _entry(cells: Mapping[str, str]) -> tuple[dict[str, Any], list[str]]:
    """One row as a JSON Lines entry, and what is wrong with it."""
    entry: dict[str, Any] = {}
    reasons = []
    given = [c for c in ARCH_COLUMNS if cells.get(c, "").strip()]
    if len(given) != 1:
        reasons.append("give exactly one of arch and model" if given else "no arch or model")
    elif given[0] == "arch":
        try:
            config = json.loads(cells["arch"])
        except json.JSONDecodeError as exc:
            reasons.append(f"arch is not JSON ({exc.msg})")
        else:
            if isinstance(config, dict):
                entry["arch"] = config
            else:
                reasons.append(f"arch is not a JSON object: {cells['arch']!r}")
    else:
        entry["model"] = cells["model"].strip()
    if cells.get("space", "").strip():
        entry["space"] = cells["space"].strip()
    for column, text in cells.items():
        if column.endswith(ACC_SUFFIX):
            try:
                entry[column] = _cell_number(text)
            except ValueError as exc:
                reasons.append(f"{column} {exc}")
    return entry, reasons
