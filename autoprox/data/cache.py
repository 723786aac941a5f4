"""Disk cache of per-block statistics, so that fitness never re-runs a network.

An entry is keyed by everything that determines it: space, architecture, input
specification, seed, class count, precision and :data:`STATS_VERSION` (bump it when
the statistics code changes). Entries are NumPy ``.npz`` archives read with
``allow_pickle=False``, written atomically. Zip CRCs and a metadata record detect a
truncated or corrupt entry, which is then recomputed with a warning.

A cache that cannot be written (a read-only file system, no permission) still serves
what it holds; what it lacks is computed in memory, with one warning. A full disk is
an error (:class:`~autoprox.core.errors.DiskFullError`) naming the entry, the bytes
written and how many entries this command had written: nothing already computed is
lost, and rerunning once there is room continues where it stopped.

Precision ``float16`` (default) stores each tensor as float16 times a power-of-two
scale kept in the metadata: the activation gradients reach 1e-11, far below
float16's normal range, and the scale keeps them (relative error about 5e-4).
``float32`` stores values exactly.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np
import torch

from autoprox.core.atomic import FULL_DISK_ERRNOS, atomic_open, disk_full_error
from autoprox.core.errors import CacheError, ConfigError, DiskFullError
from autoprox.core.parallel import Executor, as_executor
from autoprox.networks.statistics import (
    STAT_NAMES,
    BlockStats,
    InputSpec,
    compute_statistics,
)
from autoprox.spaces.architectures import arch_key, parse_arch

STATS_VERSION = "stats-v1"
CACHE_DIR_ENV = "AUTOPROX_CACHE"
PRECISIONS = ("float16", "float32")
FLOAT16_TOP_EXPONENT = 14  # largest magnitude maps into [2^14, 2^15), below float16's 65504


#: How a ``.npz`` entry starts: a zip file's local header (or an empty zip's end record).
ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")


class CacheCorrupt(CacheError, ValueError):
    """A cache entry that cannot be trusted."""


class CacheWarning(UserWarning):
    """A cache entry recomputed, or a cache that cannot be written."""


def default_cache_dir() -> Path:
    """``$AUTOPROX_CACHE``, else ``$XDG_CACHE_HOME/autoprox`` (``~/.cache/autoprox``)."""
    if os.environ.get(CACHE_DIR_ENV):
        return Path(os.environ[CACHE_DIR_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "autoprox"


@dataclass(frozen=True)
class StatsRequest:
    """What statistics are asked for: the cache key's ingredients."""

    arch: object
    spec: InputSpec
    seed: int
    num_classes: int

    def key_fields(self, precision: str) -> dict:
        return {
            "version": STATS_VERSION,
            "space": self.arch.space,
            "arch": arch_key(self.arch),
            "input": self.spec.describe(),
            "seed": self.seed,
            "classes": self.num_classes,
            "precision": precision,
        }


def cache_key(request: StatsRequest, precision: str) -> str:
    text = json.dumps(request.key_fields(precision), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _encode(tensor: torch.Tensor, precision: str) -> tuple[np.ndarray, int]:
    array = tensor.detach().cpu().numpy().astype(np.float32, copy=False)
    if precision == "float32":
        return array, 0
    peak = float(np.max(np.abs(array))) if array.size else 0.0
    if peak == 0.0 or not math.isfinite(peak):
        return array.astype(np.float16), 0
    exponent = math.floor(math.log2(peak)) - FLOAT16_TOP_EXPONENT
    return np.ldexp(array, -exponent).astype(np.float16), exponent


def _decode(array: np.ndarray, exponent: int) -> torch.Tensor:
    values = array.astype(np.float32)
    if exponent:
        values = np.ldexp(values, exponent).astype(np.float32)
    return torch.from_numpy(values)


def encode_entry(stats: Sequence[BlockStats], key: str, precision: str) -> bytes:
    """Serialise statistics into ``.npz`` bytes (no pickle anywhere)."""
    arrays: dict[str, np.ndarray] = {}
    exponents: dict[str, int] = {}
    for index, block in enumerate(stats):
        for name in STAT_NAMES:
            label = f"b{index}_{name}"
            arrays[label], exponents[label] = _encode(block[name], precision)
    meta = {
        "key": key,
        "version": STATS_VERSION,
        "precision": precision,
        "blocks": len(stats),
        "exponents": exponents,
        "shapes": {label: list(a.shape) for label, a in arrays.items()},
    }
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def decode_entry(source: Path | bytes, key: str) -> list[BlockStats]:
    """Read and check an entry (a file, or its bytes); raise :class:`CacheCorrupt` naming what is wrong."""
    try:
        with (io.BytesIO(source) if isinstance(source, bytes) else open(source, "rb")) as handle:
            if handle.read(4) not in ZIP_MAGIC:
                raise CacheCorrupt("not a NumPy .npz archive: it does not start as a zip file does")
            handle.seek(0)
            with np.load(handle, allow_pickle=False) as archive:
                stats = _decode_archive(archive, key)
    except CacheCorrupt:
        raise
    except Exception as exc:  # noqa: BLE001 - a damaged zip fails in many ways (BadZipFile,
        # KeyError, ValueError, but also NotImplementedError for a flipped compression or
        # version field and RuntimeError for a flipped "encrypted" flag): all mean corrupt.
        text = str(exc).splitlines()[0] if str(exc) else ""
        if "allow_pickle" in text:  # NumPy's advice to unpickle; the cache never holds pickles
            text = "it holds pickled objects, which the cache never writes"
        raise CacheCorrupt(f"{type(exc).__name__}: {text}"[:200]) from None
    if not stats:
        raise CacheCorrupt("entry holds no blocks")
    return stats


def _decode_archive(archive, key: str) -> list[BlockStats]:
    meta = json.loads(bytes(archive["meta"]).decode())
    if not isinstance(meta, dict) or meta.get("key") != key or meta.get("version") != STATS_VERSION:
        raise CacheCorrupt("metadata does not match its key")
    stats: list[BlockStats] = []
    for index in range(int(meta["blocks"])):
        block = {}
        for name in STAT_NAMES:
            label = f"b{index}_{name}"
            array = archive[label]
            if list(array.shape) != meta["shapes"][label]:
                raise CacheCorrupt(f"{label} has shape {list(array.shape)}")
            block[name] = _decode(array, int(meta["exponents"][label]))
        stats.append(block)
    return stats


class StatisticsCache:
    """Statistics on disk under ``root/<space>/<key[:2]>/<key>.npz``."""

    def __init__(self, root: str | os.PathLike | None = None, precision: str = "float16") -> None:
        if precision not in PRECISIONS:
            raise ConfigError(f"unknown cache precision {precision!r}; use {' or '.join(PRECISIONS)}")
        self.root = Path(root) if root is not None else default_cache_dir()
        self.precision = precision
        #: Why the cache cannot be written, once a write failed (then warned about once).
        self.unwritable: str | None = None
        self._warned: set[str] = set()  # damaged entries of an unwritable cache, each named once

    def key(self, request: StatsRequest) -> str:
        return cache_key(request, self.precision)

    def path(self, request: StatsRequest) -> Path:
        key = self.key(request)
        return self.root / request.arch.space / key[:2] / f"{key}.npz"

    def contains(self, request: StatsRequest) -> bool:
        return self.path(request).is_file()

    def _read(self, request: StatsRequest) -> tuple[list[BlockStats] | None, str]:
        """The entry's statistics, or None and why (empty when there is no entry)."""
        path = self.path(request)
        if not path.is_file():
            return None, ""
        try:
            return decode_entry(path, self.key(request)), ""
        except CacheCorrupt as exc:
            return None, f"corrupt cache entry {path.name} ({exc})"
        except OSError as exc:  # unreadable (permissions, I/O error): treat as missing
            return None, f"unreadable cache entry {path.name} ({exc.strerror or exc})"

    def load(self, request: StatsRequest) -> list[BlockStats] | None:
        """The cached statistics, or None when absent or corrupt (a corrupt entry is removed)."""
        stats, problem = self._read(request)
        if problem:
            warnings.warn(f"{problem}; recomputing", CacheWarning, stacklevel=2)
            self._discard(self.path(request))
        return stats

    @staticmethod
    def _discard(path: Path) -> None:
        try:
            path.unlink(missing_ok=True)
        except OSError:  # a read-only cache keeps it; it is recomputed (in memory) each time
            pass

    def save(self, request: StatsRequest, stats: Sequence[BlockStats]) -> Path:
        path = self.path(request)
        self._write(path, encode_entry(stats, self.key(request), self.precision))
        return path

    def _write(self, path: Path, payload: bytes) -> None:
        try:
            with atomic_open(path, "wb") as handle:
                handle.write(payload)
        except DiskFullError as exc:
            raise DiskFullError(f"statistics cache {self.root} is full: {exc}") from None

    def writable(self, space: str, warn: bool = True) -> bool:
        """Whether entries of ``space`` can be written; the first time not, one warning says why
        (unless ``warn`` is False); :attr:`unwritable` then holds the reason."""
        if self.unwritable is not None:
            return False
        try:
            folder = self.root / space
            folder.mkdir(parents=True, exist_ok=True)
            probe = folder / f".write-test-{os.getpid()}-{threading.get_ident()}"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            if exc.errno in FULL_DISK_ERRNOS:
                raise DiskFullError(f"statistics cache {self.root} is full: {disk_full_error(folder, exc, 0)}") from None
            if warn:
                self._warn_unwritable(exc)
            else:
                self.unwritable = exc.strerror or str(exc)
            return False
        return True

    def _warn_unwritable(self, error: OSError, problem: str = "") -> None:
        reason = error.strerror or str(error)
        prefix = f"{problem}; " if problem else ""
        if problem in self._warned:
            return
        self._warned.add(problem)
        if self.unwritable is None:
            self.unwritable = reason
            warnings.warn(f"{prefix}statistics cache {self.root} cannot be written ({reason}): the statistics it "
                          "lacks are computed in memory and not kept", CacheWarning, stacklevel=3)
        elif problem:
            warnings.warn(f"{prefix}recomputed in memory (the cache cannot be written)", CacheWarning, stacklevel=3)

    def get(self, request: StatsRequest) -> list[BlockStats]:
        """Cached statistics, computing and storing them when missing.

        What is returned is what the cache holds (decoded), so a fresh computation
        and a later cache hit give the very same numbers. A cache that cannot be
        written gives the statistics decoded from the bytes it would have held.
        """
        stats, problem = self._read(request)
        if stats is not None:
            return stats
        fresh = compute_statistics(request.arch, request.spec, request.seed, request.num_classes)
        key, path = self.key(request), self.path(request)
        payload = encode_entry(fresh, key, self.precision)
        try:
            if problem:
                path.unlink(missing_ok=True)
            self._write(path, payload)
        except DiskFullError:
            raise
        except OSError as exc:  # read-only file system, no permission: keep going in memory
            self._warn_unwritable(exc, problem)
            return decode_entry(payload, key)
        if problem:
            warnings.warn(f"{problem}; recomputed", CacheWarning, stacklevel=2)
        stats = self.load(request)
        if stats is None:  # pragma: no cover - only if the disk lies
            raise CacheCorrupt(f"entry {path} unreadable right after writing")
        return stats

    def size_bytes(self, request: StatsRequest) -> int:
        return self.path(request).stat().st_size


def _compute_into_cache(root: str, precision: str, space: str, config: dict, spec: dict,
                        seed: int, num_classes: int) -> tuple[float, list[str]]:
    """Worker body for :func:`build_cache` (plain arguments so it crosses processes cheaply).

    Returns the seconds spent and the warnings raised, which the calling process
    re-issues (a worker's own warnings would print in Python's raw format).
    """
    cache = StatisticsCache(root, precision)
    request = StatsRequest(parse_arch(config, space), InputSpec(**spec), seed, num_classes)
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cache.get(request)
    return time.perf_counter() - start, [str(w.message) for w in caught]


def build_cache(cache: StatisticsCache, requests: Sequence[StatsRequest], workers: int | Executor = 1,
                progress: Callable[[int, int], None] | None = None) -> dict:
    """Compute every missing entry of ``requests`` in parallel: ``workers`` local processes, or
    an :class:`~autoprox.core.parallel.Executor` (a Dask cluster writing to a cache path the
    workers share).

    Each task writes its entry to disk itself, so only a float comes back, and a task lost
    with its worker loses nothing already written. A cache that cannot be written is left
    alone (one warning): what it lacks is computed in memory where it is used. Returns
    counts and timings.
    """
    from autoprox.spaces.architectures import arch_to_config

    missing = [r for r in requests if not cache.contains(r)]
    done = len(requests) - len(missing)
    if progress:
        progress(done, len(requests))
    seconds: list[float] = []
    if missing and not cache.writable(missing[0].arch.space):
        return {"requests": len(requests), "computed": 0, "seconds": seconds, "unwritable": cache.unwritable}
    if missing:
        jobs = [(str(cache.root), cache.precision, r.arch.space, arch_to_config(r.arch), r.spec.to_json(), r.seed,
                 r.num_classes) for r in missing]
        try:
            for elapsed, caught in as_executor(workers).run_unordered(_compute_into_cache, jobs):
                for message in dict.fromkeys(caught):
                    warnings.warn(message, CacheWarning, stacklevel=2)
                seconds.append(elapsed)
                done += 1
                if progress:
                    progress(done, len(requests))
        except DiskFullError as exc:
            raise DiskFullError(f"{exc} ({len(seconds)} entries written by this command before it filled)") from None
    return {"requests": len(requests), "computed": len(missing), "seconds": seconds}





@dataclass(frozen=True)
class StatsPlan:
    """Which statistics sets a search or ranking uses.

    One set per (seed, class count): several ``seeds`` average each architecture's
    score over initialisations; ``target_classes`` maps each target to the class
    count of the statistics it is scored with (all 100 by default: one shared set).
    """

    spec: InputSpec
    seeds: tuple[int, ...]
    target_classes: Mapping[str, int]

    @property
    def class_counts(self) -> tuple[int, ...]:
        return tuple(sorted(set(self.target_classes.values())))

    def keys(self) -> list[StatsKey]:
        return [(seed, classes) for seed in self.seeds for classes in self.class_counts]

    def requests(self, archs: Sequence) -> list[StatsRequest]:
        return [StatsRequest(arch, self.spec, seed, classes) for arch in archs for seed, classes in self.keys()]

    def to_json(self) -> dict:
        return {"input": self.spec.to_json(), "seeds": list(self.seeds), "target_classes": dict(self.target_classes)}

    @classmethod
    def from_options(cls, input: str, batch_size: int, seeds: Sequence[int], targets: Sequence[str],
                     per_target_stats: bool = False) -> "StatsPlan":
        """The plan of ``--input``, ``--batch-size``, ``--stat-seeds`` and ``--per-target-stats`` for
        ``targets``: one 100-class set, or one set per target with its dataset's class count."""
        from autoprox.data.benchmark import target_classes

        classes = {t: (target_classes(t) if per_target_stats else 100) for t in targets}
        return cls(InputSpec.parse(input, batch_size), tuple(seeds), classes)


#: Statistics sets are keyed by (initialisation seed, class count).
StatsKey = tuple[int, int]


def load_statistics(cache: StatisticsCache, plan: StatsPlan, archs: Sequence,
                    progress: Callable[[int, int], None] | None = None) -> dict[StatsKey, list[list[BlockStats]]]:
    """Load (computing what is missing) every statistics set of ``plan`` for ``archs``."""
    loaded: dict[StatsKey, list[list[BlockStats]]] = {key: [] for key in plan.keys()}
    total, done = len(archs) * len(loaded), 0
    for arch in archs:
        for seed, classes in plan.keys():
            loaded[(seed, classes)].append(cache.get(StatsRequest(arch, plan.spec, seed, classes)))
            done += 1
            if progress:
                progress(done, total)
    return loaded
