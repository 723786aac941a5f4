"""Benchmark import: ViT-Bench-101 ground truth as architectures and accuracy targets.

Two file formats are read:

* the released format, a PyTorch zip archive holding a list of dicts, loaded with
  ``torch.load(..., weights_only=True)`` only (never full unpickling);
* the project's own plain-text format, JSON Lines (``.jsonl``): one entry per line,
  ``{"arch": {...}, "c100_kd_acc": 76.1, ...}``, or a JSON file holding a list of
  such entries;
* a CSV table (``.csv``) with an ``arch`` or ``model`` column and accuracy columns
  (:mod:`autoprox.data.tables`).

An entry names a model instead of an architecture with ``"model": "timm:<name>"``, and
may say which space it belongs to with ``"space"`` (see :mod:`autoprox.data.tables`).

A column ``<name>_acc`` becomes the target ``<name>`` (``c100_kd``, ``imagenet_super``,
...). ``null`` accuracies are kept as NaN and that entry is left out of the target's
correlations.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from autoprox.core.errors import BenchmarkError, ConfigError  # noqa: F401 (re-exported)
from autoprox.data.tables import parse_architectures, read_csv_entries
from autoprox.spaces.architectures import ArchitectureError, arch_to_config  # noqa: F401 (re-exported)

ACC_SUFFIX = "_acc"
BENCH_FILE_NAMES = {"autoformer": "gt_autoformer.pth", "pit": "gt_pit.pth"}
BENCH_DIR_ENV = "AUTOPROX_BENCH_DIR"

#: Classes of each target's dataset, for per-target statistics.
DATASET_CLASSES = {"c100": 100, "flower": 102, "chaoyang": 4, "imagenet": 1000}



@dataclass(frozen=True)
class Benchmark:
    """Architectures of one search space with their measured accuracies.

    ``accuracies[target]`` is a float array aligned with ``archs`` (NaN where the
    column was not measured for that entry).
    """

    space: str
    archs: tuple
    accuracies: dict[str, np.ndarray]
    source: str = ""
    sha256: str = ""
    configs: tuple = field(default=(), repr=False)

    @property
    def targets(self) -> list[str]:
        return list(self.accuracies)

    def __len__(self) -> int:
        return len(self.archs)

    def default_targets(self) -> list[str]:
        """The KD columns plus ``imagenet_super`` where present (the paper's fitness)."""
        chosen = [t for t in self.targets if t.endswith("_kd") or t == "imagenet_super"]
        return chosen or self.targets

    def subset(self, indices: Sequence[int]) -> "Benchmark":
        idx = list(indices)
        return Benchmark(
            space=self.space,
            archs=tuple(self.archs[i] for i in idx),
            accuracies={t: a[idx] for t, a in self.accuracies.items()},
            source=self.source,
            sha256=self.sha256,
            configs=tuple(self.configs[i] for i in idx) if self.configs else (),
        )

    def check_targets(self, targets: Sequence[str]) -> list[str]:
        """Return ``targets`` as a list, or raise naming the unknown one."""
        for t in targets:
            if t not in self.accuracies:
                raise BenchmarkError(
                    f"unknown target {t!r} for {Path(self.source).name or 'benchmark'}; "
                    f"known targets: {', '.join(self.targets)}"
                )
        if not targets:
            raise BenchmarkError("no target given")
        return list(targets)


def file_sha256(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _read_entries(path: Path) -> list:
    if not path.is_file():
        raise BenchmarkError(f"benchmark file not found: {path}")
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return read_csv_entries(path)
    if suffix in (".jsonl", ".json"):
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise BenchmarkError(f"{path}: not a UTF-8 text file (byte {exc.start}); expected JSON") from None
    if suffix == ".jsonl":
        entries = []
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    entries.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise BenchmarkError(f"{path}: line {number} is not JSON ({exc.msg})") from None
        return entries
    if suffix == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise BenchmarkError(f"{path}: not a JSON file ({exc.msg} at line {exc.lineno})") from None
    import pickle

    import torch  # the released format only; plain-text files need no torch

    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any failure means "not a benchmark file"
        message = re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).strip()  # torch adds terminal colours
        found = re.search(r"Unsupported global: GLOBAL (\S+)", message)
        if isinstance(exc, pickle.UnpicklingError) and found:
            # weights_only=True refused an object that is not plain data; never retry unsafely.
            raise BenchmarkError(
                f"{path}: refused: the file holds an object of type {found.group(1)}; benchmark "
                "files are loaded with torch.load(weights_only=True) only (lists, dicts, numbers, strings)"
            ) from None
        unpickler = re.search(r"WeightsUnpickler error:\s*(\S.*)", message)
        if unpickler:  # torch wraps the real reason in paragraphs of advice: keep the reason
            message = unpickler.group(1)
        detail = message.splitlines()[0][:200] if message else ""
        raise BenchmarkError(
            f"{path}: not a ViT-Bench-101 .pth file (a PyTorch archive readable with "
            f"torch.load(weights_only=True)): {type(exc).__name__}: {detail}"
        ) from None


def _accuracy(value: Any, path: Path, number: int, column: str) -> float:
    if value is None:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BenchmarkError(f"{path}: entry {number} column {column!r} is not a number: {value!r}")
    return float(value)


def parse_entries(entries: Any, source: str = "<memory>", sha256: str = "") -> Benchmark:
    """Validate raw entries (a list of dicts) into a :class:`Benchmark`."""
    path = Path(source)
    if not isinstance(entries, list) or not entries:
        raise BenchmarkError(f"{source}: expected a non-empty list of benchmark entries")
    columns: list[str] = []
    for number, entry in enumerate(entries):
        if not isinstance(entry, Mapping) or not ("arch" in entry or "model" in entry):
            raise BenchmarkError(f"{source}: entry {number} has no 'arch' key (nor 'model')")
        for key in entry:
            if key.endswith(ACC_SUFFIX) and key not in columns:
                columns.append(key)
    if not columns:
        raise BenchmarkError(f"{source}: no accuracy columns (keys ending in '{ACC_SUFFIX}')")
    space, archs = parse_architectures(entries, str(source))
    accuracies = {}
    for column in columns:
        values = [_accuracy(e.get(column), path, n, column) for n, e in enumerate(entries)]
        accuracies[column[: -len(ACC_SUFFIX)]] = np.asarray(values, dtype=np.float64)
    return Benchmark(
        space=space,
        archs=tuple(archs),
        accuracies=accuracies,
        source=str(source),
        sha256=sha256,
        configs=tuple(arch_to_config(a) for a in archs),
    )


def load_benchmark(path: str | os.PathLike) -> Benchmark:
    """Read a ViT-Bench-101 file (released ``.pth``, the project's ``.jsonl``/``.json``, or a ``.csv`` table)."""
    path = Path(path)
    entries = _read_entries(path)
    return parse_entries(entries, source=str(path), sha256=file_sha256(path))


def write_benchmark_jsonl(bench: Benchmark, path: str | os.PathLike) -> None:
    """Write a benchmark in the project's plain-text format (atomically)."""
    from autoprox.core.atomic import atomic_write_text

    lines = []
    for i, arch in enumerate(bench.archs):
        entry: dict[str, Any] = {"arch": arch_to_config(arch)}
        for target, values in bench.accuracies.items():
            value = float(values[i])
            entry[target + ACC_SUFFIX] = None if math.isnan(value) else value
        lines.append(json.dumps(entry))
    atomic_write_text(path, "\n".join(lines) + "\n")


def bench_search_dirs() -> list[Path]:
    """Where released files are looked for, in order.

    ``$AUTOPROX_BENCH_DIR`` alone when it is set (an explicit choice is never
    silently replaced by another copy); otherwise ``./vit-bench-101``, then
    ``../shared/vit-bench-101`` relative to the working directory and to this checkout.
    """
    if os.environ.get(BENCH_DIR_ENV):
        return [Path(os.environ[BENCH_DIR_ENV])]
    dirs = []
    repo_root = Path(__file__).resolve().parents[2]
    for base in (Path.cwd(), repo_root):
        dirs.append(base / "vit-bench-101")
        dirs.append(base.parent / "shared" / "vit-bench-101")
    return dirs


def default_bench_path(space: str) -> Path:
    """The released file for ``space``, found without flags; a clear error otherwise."""
    if space not in BENCH_FILE_NAMES:
        raise BenchmarkError(f"unknown space {space!r}; known: {', '.join(BENCH_FILE_NAMES)}")
    name = BENCH_FILE_NAMES[space]
    for directory in bench_search_dirs():
        if (directory / name).is_file():
            return (directory / name).resolve()
    looked = ", ".join(str(d) for d in bench_search_dirs())
    if os.environ.get(BENCH_DIR_ENV):
        raise BenchmarkError(
            f"{name} not found in ${BENCH_DIR_ENV}={os.environ[BENCH_DIR_ENV]}; "
            f"put the file there, unset {BENCH_DIR_ENV}, or pass --bench FILE"
        )
    raise BenchmarkError(
        f"{name} not found (looked in {looked}); pass --bench FILE or set {BENCH_DIR_ENV}"
    )


def portable_bench_path(path: str | os.PathLike) -> str:
    """How a run records its benchmark: the file name alone when the file lies in one of
    :func:`bench_search_dirs` (so the run reopens on any machine that has it there), else
    the path as given."""
    given = Path(path)
    if not given.is_file():
        return str(path)
    resolved = given.resolve()
    for directory in bench_search_dirs():
        if directory.is_dir() and (directory / given.name).is_file() and (directory / given.name).resolve() == resolved:
            return given.name
    return str(path)


def locate_benchmark(recorded: str, sha256: str | None = None, near: Path | None = None) -> Path:
    """The benchmark file a run recorded as ``recorded`` (a path, or a bare file name).

    Looked for as recorded (relative to the working directory, then to ``near``, the run
    directory), then by its file name in :func:`bench_search_dirs` and beside ``near``;
    when ``sha256`` is given, only a file with that digest is taken. Raises
    :class:`BenchmarkError` naming every place looked in.
    """
    name = Path(recorded).name
    candidates = [Path(recorded)]
    if near is not None:
        candidates += [near / recorded, near / name, near.parent / name]
    candidates += [directory / name for directory in bench_search_dirs()]
    looked = []
    for candidate in candidates:
        if str(candidate) in looked:
            continue
        looked.append(str(candidate))
        if candidate.is_file() and (not sha256 or file_sha256(candidate) == sha256):
            return candidate
    digest = f" with sha256 {sha256[:12]}..." if sha256 else ""
    raise BenchmarkError(f"benchmark {name}{digest} not found (looked for {', '.join(looked)}); "
                         f"put it in one of these places, set {BENCH_DIR_ENV}, or pass --bench FILE")


@dataclass(frozen=True)
class Split:
    """A seeded search/test split of a benchmark's architecture indices."""

    search: tuple[int, ...]
    test: tuple[int, ...]
    seed: int
    search_fraction: float

    def to_json(self) -> dict:
        return {
            "seed": self.seed,
            "search_fraction": self.search_fraction,
            "search": list(self.search),
            "test": list(self.test),
        }

    @classmethod
    def from_json(cls, data: Mapping) -> "Split":
        return cls(tuple(data["search"]), tuple(data["test"]), int(data["seed"]), float(data["search_fraction"]))

    def indices(self, which: str, total: int) -> list[int]:
        if which == "search":
            return list(self.search)
        if which == "test":
            return list(self.test)
        if which == "all":
            return list(range(total))
        raise ConfigError(f"unknown split {which!r}; use all, search or test")


def split_benchmark(size: int, seed: int = 0, search_fraction: float = 0.6) -> Split:
    """Shuffle ``range(size)`` with ``seed`` and cut it into search and test parts."""
    if not 0.0 < search_fraction < 1.0:
        raise ConfigError(f"search fraction must be in (0, 1), got {search_fraction}")
    order = list(range(size))
    random.Random(seed).shuffle(order)
    cut = int(round(size * search_fraction))
    return Split(tuple(sorted(order[:cut])), tuple(sorted(order[cut:])), seed, search_fraction)


def target_classes(target: str) -> int:
    """Class count of a target's dataset (``c100_kd`` -> 100)."""
    dataset = target.split("_")[0]
    if dataset not in DATASET_CLASSES:
        raise BenchmarkError(f"no class count known for target {target!r}")
    return DATASET_CLASSES[dataset]
