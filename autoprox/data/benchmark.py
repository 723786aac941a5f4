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

What is refused, each with one line naming the file and the entry (and, in a JSON
Lines file, its line): an accuracy that is not a number, not finite (``Infinity``,
``NaN``) or outside :data:`ACCURACY_RANGE` (a top-1 accuracy in percent); an
architecture listed twice (with the same or with other accuracies); a file of fewer
than :data:`MIN_ARCHITECTURES` architectures; JSON nested too deeply to read; a pickle
that is not plain data. A target that cannot rank architectures (fewer than three
measured values, or one constant value) is refused where it is chosen
(:meth:`Benchmark.check_measured`).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from autoprox.core.errors import AutoproxError, BenchmarkError, ConfigError, path_too_long
from autoprox.core.resources import packaged_benchmark_dir
from autoprox.data.tables import parse_architectures, read_csv_entries
from autoprox.spaces.architectures import SPACES, arch_key, arch_to_config

ACC_SUFFIX = "_acc"
#: The released file of each ViT-Bench-101 space.
BENCH_FILE_NAMES = {space: f"gt_{space}.pth" for space in SPACES}
BENCH_DIR_ENV = "AUTOPROX_BENCH_DIR"

#: Classes of each target's dataset, for per-target statistics.
DATASET_CLASSES = {"c100": 100, "flower": 102, "chaoyang": 4, "imagenet": 1000}

#: An accuracy column holds top-1 accuracies in percent: anything outside is a mistake.
ACCURACY_RANGE = (0.0, 100.0)

#: Fewest architectures a benchmark (and a target's measured values) must have: Kendall's
#: tau of two architectures is always +1 or -1 and ranks nothing.
MIN_ARCHITECTURES = 3


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

    def measured_problem(self, target: str, indices: Sequence[int] | None = None, part: str = "") -> str | None:
        """Why ``target`` cannot rank the architectures at ``indices`` (all by default), or None.

        A target needs :data:`MIN_ARCHITECTURES` measured (non-null) values that are not all equal.
        """
        values = self.accuracies[target] if indices is None else self.accuracies[target][list(indices)]
        measured = values[np.isfinite(values)]
        where = f" on {part}" if part else ""
        name = Path(self.source).name or "the benchmark"
        if len(measured) == 0:
            return f"{name}: target {target!r} has no measured value{where} (every {target}{ACC_SUFFIX} is null)"
        if len(measured) < MIN_ARCHITECTURES:
            return (f"{name}: target {target!r} has only {len(measured)} measured value(s){where}; "
                    f"at least {MIN_ARCHITECTURES} are needed to rank architectures")
        if np.ptp(measured) == 0:
            return (f"{name}: target {target!r} has one constant value ({measured[0]:g}) for all "
                    f"{len(measured)} measured architectures{where}, so it cannot rank them")
        return None

    def check_measured(self, targets: Sequence[str], indices: Sequence[int] | None = None, part: str = "") -> None:
        """Raise :class:`BenchmarkError` naming the first of ``targets`` that cannot rank the architectures
        at ``indices`` (see :meth:`measured_problem`); ``part`` names them in the message."""
        for target in targets:
            problem = self.measured_problem(target, indices, part)
            if problem:
                raise BenchmarkError(f"{problem}; choose other --targets")


def file_sha256(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _is_file(path: Path) -> bool:
    """``path.is_file()``, False for a name the system cannot even look up (too long, a NUL byte)."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def file_problem(path: Path, what: str = "benchmark file") -> AutoproxError | None:
    """Why ``path`` is not a regular file to read, as the error to raise, or None when it is one: not found, a
    path too long (a part over 255 bytes, or the whole over the system's limit), a directory, a FIFO or
    another special file (reading a FIFO would wait for a writer)."""
    import errno
    import stat

    shown = str(path)[:300]
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:
            return path_too_long(exc)
        if exc.errno == errno.ENOENT:
            return BenchmarkError(f"{what} not found: {shown}")
        return BenchmarkError(f"{shown}: cannot read it ({exc.strerror or exc})")
    except ValueError:  # a NUL byte
        return BenchmarkError(f"{what} not found: {shown!r} (the name holds a NUL byte)")
    if stat.S_ISDIR(mode):
        return BenchmarkError(f"{shown}: a directory, not a {what}; give the file itself")
    if not stat.S_ISREG(mode):
        kind = "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device"
        return BenchmarkError(f"{shown}: {kind}, not a regular file; give a {what} stored on disk")
    return None


#: The names of a file read as a PyTorch archive whatever it holds (``.gz``: a gzip file, checked above); a file
#: of another name is read so only when it starts as one does (:data:`PTH_MAGIC`).
PTH_SUFFIXES = (".pth", ".pt", ".gz")

#: How a PyTorch archive starts: a zip file (torch.save's format) or a pickle (its legacy format).
PTH_MAGIC = (b"PK\x03\x04", b"\x80")

#: The benchmark formats, as the error naming a file of none of them says.
BENCHMARK_FORMATS = ("a benchmark is a ViT-Bench-101 .pth file, a comma-separated .csv (or .csv.gz) table, or "
                     ".json/.jsonl records")


def _read_entries(path: Path) -> tuple[Any, list[int] | None]:
    """The raw entries of a benchmark file and, for JSON Lines, the line of each entry."""
    problem = file_problem(path)
    if problem is not None:
        raise problem
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return read_csv_entries(path, with_lines=True)  # rows are checked, line by line, in the tables module
    if suffix in (".jsonl", ".json"):
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise BenchmarkError(f"{path}: not a UTF-8 text file (byte {exc.start}); expected JSON") from None
    if suffix == ".jsonl":
        entries, lines = [], []
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                entries.append(_json_value(line, f"{path}: line {number} is not JSON"))
                lines.append(number)
        return entries, lines
    if suffix == ".json":
        return _json_value(text, f"{path}: not a JSON file"), None
    if suffix == ".gz" and not _starts_with(path, b"\x1f\x8b"):  # a plain file named .gz is no PyTorch archive
        raise BenchmarkError(f"{path}: named .gz but not a gzip file; a proxy table is .csv, or .csv.gz compressed "
                             "with gzip")
    if suffix not in PTH_SUFFIXES and not any(_starts_with(path, magic) for magic in PTH_MAGIC):
        raise BenchmarkError(f"{path}: not a benchmark file autoprox reads (named {suffix or 'with no suffix'}, and "
                             f"not a PyTorch archive): {BENCHMARK_FORMATS}")
    return _read_pth(path), None


def _starts_with(path: Path, magic: bytes) -> bool:
    try:
        with open(path, "rb") as handle:
            return handle.read(len(magic)) == magic
    except OSError:
        return False


def _json_value(text: str, problem: str) -> Any:
    """``json.loads(text)``; BenchmarkError starting with ``problem`` when it is not JSON or too deep to read."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        where = f" at line {exc.lineno}" if "line" not in problem else ""
        raise BenchmarkError(f"{problem} ({exc.msg}{where})") from None
    except RecursionError:
        raise BenchmarkError(f"{problem} (nested too deeply to read)") from None


#: Patterns of torch's weights_only refusals, newest wording first: each captures the refused global.
_REFUSED_GLOBAL = (
    re.compile(r"Unsupported global: GLOBAL (\S+)"),
    re.compile(r"unsupported GLOBAL (\S+?)(?: whose|\s|$)"),
)


def _read_pth(path: Path) -> Any:
    import pickle

    import torch  # the released format only; plain-text files need no torch

    try:
        with warnings.catch_warnings():
            # torch warns about pickle protocols it did not write; the refusal below says what matters
            warnings.simplefilter("ignore")
            return torch.load(path, map_location="cpu", weights_only=True)
    except RecursionError:
        raise BenchmarkError(f"{path}: not a ViT-Bench-101 .pth file (nested too deeply to read)") from None
    except Exception as exc:  # noqa: BLE001 - any failure means "not a benchmark file"
        message = re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).strip()  # torch adds terminal colours
        found = next((m for m in (p.search(message) for p in _REFUSED_GLOBAL) if m), None)
        if isinstance(exc, pickle.UnpicklingError) and found:
            # weights_only=True refused an object that is not plain data; never retry unsafely.
            raise BenchmarkError(
                f"{path}: refused: the file holds an object of type {found.group(1)}; benchmark files are "
                "loaded with torch.load(weights_only=True) only (lists, dicts, numbers, strings)"
            ) from None
        detail = _pickle_reason(message) if isinstance(exc, pickle.UnpicklingError) else (
            message.splitlines()[0][:200] if message else "")
        raise BenchmarkError(
            f"{path}: not a ViT-Bench-101 .pth file (a PyTorch archive readable with "
            f"torch.load(weights_only=True)): {type(exc).__name__}: {detail}"
        ) from None


def _pickle_reason(message: str) -> str:
    """The reason inside torch's paragraphs of advice (``WeightsUnpickler error: ...``), on one line."""
    found = re.search(r"WeightsUnpickler error:\s*(\S[^\n]*)", message)
    reason = found.group(1) if found else message.splitlines()[-1] if message else "unreadable"
    return reason.strip().rstrip(".")[:160]


def _accuracy(value: Any, where: str, number: int, column: str) -> float:
    if value is None:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BenchmarkError(f"{where}: entry {number} column {column!r} is not a number: {_short(value)}")
    low, high = ACCURACY_RANGE
    if isinstance(value, float) and math.isnan(value):
        raise BenchmarkError(f"{where}: entry {number} column {column!r} is NaN; write null for an accuracy "
                             "that was not measured")
    if not math.isfinite(value):
        raise BenchmarkError(f"{where}: entry {number} column {column!r} is {value!r}, not a finite number; "
                             f"accuracies are top-1 in percent, in [{low:g}, {high:g}]")
    if not low <= value <= high:
        raise BenchmarkError(f"{where}: entry {number} column {column!r} is {_short(value)}, outside "
                             f"[{low:g}, {high:g}], the range of a top-1 accuracy in percent")
    return float(value)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def parse_entries(entries: Any, source: str = "<memory>", sha256: str = "",
                  lines: Sequence[int] | None = None) -> Benchmark:
    """Validate raw entries (a list of dicts) into a :class:`Benchmark`.

    ``lines``: the file line of each entry (JSON Lines), named in the errors.
    """

    def where(number: int) -> str:
        return f"{source}: line {lines[number]}" if lines is not None else str(source)

    if not isinstance(entries, list) or not entries:
        raise BenchmarkError(f"{source}: expected a non-empty list of benchmark entries")
    columns: list[str] = []
    for number, entry in enumerate(entries):
        if not isinstance(entry, Mapping) or not ("arch" in entry or "model" in entry):
            raise BenchmarkError(f"{where(number)}: entry {number} has no 'arch' key (nor 'model')")
        for key in entry:
            if isinstance(key, str) and key.endswith(ACC_SUFFIX) and key not in columns:
                columns.append(key)
    if not columns:
        raise BenchmarkError(f"{source}: no accuracy columns (keys ending in '{ACC_SUFFIX}')")
    space, archs = parse_architectures(entries, str(source))
    accuracies = {}
    for column in columns:
        values = [_accuracy(e.get(column), where(n), n, column) for n, e in enumerate(entries)]
        accuracies[column[: -len(ACC_SUFFIX)]] = np.asarray(values, dtype=np.float64)
    _check_distinct(archs, accuracies, where)
    if len(archs) < MIN_ARCHITECTURES:
        raise BenchmarkError(f"{source}: only {len(archs)} architecture(s); a benchmark needs at least "
                             f"{MIN_ARCHITECTURES} to rank architectures")
    return Benchmark(
        space=space,
        archs=tuple(archs),
        accuracies=accuracies,
        source=str(source),
        sha256=sha256,
        configs=tuple(arch_to_config(a) for a in archs),
    )


def _check_distinct(archs: Sequence, accuracies: Mapping[str, np.ndarray], where) -> None:
    """Refuse an architecture listed twice, saying whether its accuracies agree."""
    first: dict[str, int] = {}
    for number, arch in enumerate(archs):
        key = arch_key(arch)
        if key not in first:
            first[key] = number
            continue
        earlier = first[key]
        differing = [f"{t}: {_cell(v[earlier])} vs {_cell(v[number])}" for t, v in accuracies.items()
                     if not _same_cell(v[earlier], v[number])]
        detail = (f"with other accuracies ({'; '.join(differing[:3])})" if differing
                  else "with the same accuracies")
        raise BenchmarkError(f"{where(number)}: entry {number} repeats the architecture of entry {earlier} "
                             f"{detail}; list each architecture once")


def _cell(value: float) -> str:
    return "null" if math.isnan(value) else f"{value:g}"


def _same_cell(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def load_benchmark(path: str | os.PathLike) -> Benchmark:
    """Read a ViT-Bench-101 file (released ``.pth``, the project's ``.jsonl``/``.json``, or a ``.csv`` table); a
    proxy table (``id`` first) is refused in one line, naming :func:`autoprox.data.proxy_tables.read_proxy_table`."""
    from autoprox.core.atomic import given_path
    from autoprox.data.proxy_tables import is_proxy_table

    path = given_path(path, "load_benchmark", BenchmarkError, "the benchmark file")
    if str(path) in BENCH_FILE_NAMES and not path.exists():
        raise BenchmarkError(f"no file {path}; {str(path)!r} is a space: its released benchmark is "
                             f"load_benchmark(default_bench_path({str(path)!r})) (autoprox.data.benchmark)")
    if is_proxy_table(path):
        raise BenchmarkError(f"{path} is a proxy table (id, accuracy columns, proxy columns), not a ViT benchmark: "
                             "read it with autoprox.data.proxy_tables.read_proxy_table, or search it with "
                             "autoprox.search_table (autoprox search --bench on the command line)")
    entries, lines = _read_entries(path)
    return parse_entries(entries, source=str(path), sha256=file_sha256(path), lines=lines)


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
    silently replaced by another copy); otherwise the files shipped with the package
    (``autoprox/resources/vit-bench-101``), then ``./vit-bench-101`` under the working
    directory (for other files of the same format).
    """
    if os.environ.get(BENCH_DIR_ENV):
        return [Path(os.environ[BENCH_DIR_ENV])]
    return [packaged_benchmark_dir(), Path.cwd() / "vit-bench-101"]


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
    :func:`bench_search_dirs`, or is a byte-for-byte copy of the file of that name there
    (so the run reopens on any machine that has it, the packaged files included), else
    the path as given."""
    given = Path(path)
    if not _is_file(given):
        return str(path)
    resolved = given.resolve()
    for directory in bench_search_dirs():
        known = directory / given.name
        if directory.is_dir() and known.is_file():
            if known.resolve() == resolved or file_sha256(known) == file_sha256(resolved):
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
        if _is_file(candidate) and (not sha256 or file_sha256(candidate) == sha256):
            return candidate
    if not sha256 and Path(recorded).is_dir():  # there, but a folder: "not found" would send the user looking
        raise BenchmarkError(f"{recorded}: a directory, not a benchmark file; give the file itself")
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
