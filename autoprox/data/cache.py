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

Extra statistics (:mod:`autoprox.data.extras`), asked for by ``StatsRequest.extras``, have
entries of their own keyed by the eight's key fields plus the set's name and version: the
eight's entries and keys do not depend on them. Blocks read with extras hold both.
"""

from __future__ import annotations

import collections.abc
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
from autoprox.data.extras import EXTRA_SETS, check_extras, extras_for  # noqa: F401 (extras_for re-exported)
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
    """What statistics are asked for: the cache key's ingredients (``extras``: extra sets
    wanted besides the eight; only their own entries' keys depend on them)."""

    arch: object
    spec: InputSpec
    seed: int
    num_classes: int
    extras: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "extras", check_extras(self.extras))

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

    def extra_key_fields(self, precision: str, extra: str) -> dict:
        """The key fields of the entry of extra set ``extra``: the eight's, with its name and version."""
        return {**self.key_fields(precision), "extra": extra, "extra_version": EXTRA_SETS[extra].version}


def cache_key(request: StatsRequest, precision: str, extra: str | None = None) -> str:
    """The key of ``request``'s entry of the eight statistics, or with ``extra`` of that extra set's."""
    fields = request.key_fields(precision) if extra is None else request.extra_key_fields(precision, extra)
    text = json.dumps(fields, sort_keys=True)
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


def _decode_numpy(array: np.ndarray, exponent: int) -> np.ndarray:
    """The reference decoding: float32, then scaled by 2**exponent with ``np.ldexp``."""
    values = array.astype(np.float32)
    if exponent:
        np.ldexp(values, exponent, out=values)  # the float32 loop, in place
    return values


def _decode(array: np.ndarray, exponent: int) -> torch.Tensor:
    """A stored array as a fresh float32 tensor, bitwise equal to :func:`_decode_numpy`'s.

    With a scale 2**exponent that is a normal float32, the conversion (exact: every
    float16 is a float32) and the multiplication (one correctly rounded product, as
    ``ldexp``'s) run in torch, about ten times faster than NumPy's; other cases take
    the reference path.
    """
    if exponent and -126 <= exponent <= 127 and array.dtype == np.float16:
        return torch.from_numpy(array).to(torch.float32).mul_(2.0 ** exponent)
    return torch.from_numpy(_decode_numpy(array, exponent))


class EncodedBlock(collections.abc.Mapping):
    """One block's statistics kept as stored (float16 and a power-of-two scale, or float32).

    Reading a statistic decodes it with :func:`_decode`, the function a float32 load uses,
    so the tensor is the very one :meth:`StatisticsCache.load` returns, to the last bit,
    at half the resident memory for float16 entries. Decoded tensors are not kept.
    """

    __slots__ = ("_arrays",)

    def __init__(self, arrays: Mapping[str, tuple[np.ndarray, int]]) -> None:
        self._arrays = dict(arrays)

    def __getitem__(self, name: str) -> torch.Tensor:
        array, exponent = self._arrays[name]
        return _decode(array, exponent)

    def __iter__(self):
        return iter(self._arrays)

    def __len__(self) -> int:
        return len(self._arrays)

    def shape(self, name: str) -> tuple[int, ...]:
        """A statistic's shape, without decoding it."""
        return tuple(self._arrays[name][0].shape)

    @property
    def nbytes(self) -> int:
        """Bytes held (the encoded arrays)."""
        return sum(array.nbytes for array, _ in self._arrays.values())

    def merged(self, other: "EncodedBlock") -> "EncodedBlock":
        """This block's statistics and ``other``'s together."""
        return EncodedBlock({**self._arrays, **other._arrays})


def merge_blocks(main: Sequence[BlockStats], *extras: Sequence[BlockStats]) -> list[BlockStats]:
    """Blocks holding the statistics of ``main`` and of each of ``extras`` (the same blocks);
    ``main`` itself without extras."""
    if not extras:
        return main
    merged = list(main)
    for extra in extras:
        if len(extra) != len(merged):
            raise CacheCorrupt(f"an extra entry holds {len(extra)} blocks, the statistics {len(merged)}")
        merged = [a.merged(b) if isinstance(a, EncodedBlock) and isinstance(b, EncodedBlock) else {**a, **b}
                  for a, b in zip(merged, extra)]
    return merged


def encode_entry(stats: Sequence[BlockStats], key: str, precision: str, extra: str | None = None) -> bytes:
    """Serialise statistics into ``.npz`` bytes (no pickle anywhere): the eight, or with ``extra``
    that extra set's statistics (its name then in the metadata)."""
    arrays: dict[str, np.ndarray] = {}
    exponents: dict[str, int] = {}
    for index, block in enumerate(stats):
        for name in _entry_names(extra):
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
    if extra is not None:
        meta["extra"] = extra
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


class MappedArchive:
    """The arrays of an uncompressed ``.npz`` entry as read-only views of one memory map.

    Nothing is read into this process's memory: pages come from the page cache when a
    statistic is decoded (and the kernel may drop them again). Each member's zip CRC is
    checked once, when the archive is opened, as :func:`numpy.load` checks it on reading.
    """

    def __init__(self, path: Path) -> None:
        import mmap
        import struct
        import zipfile
        import zlib

        self._arrays: dict[str, np.ndarray] = {}
        with open(path, "rb") as handle:
            self._map = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_COPY)
            with zipfile.ZipFile(handle) as archive:
                members = archive.infolist()
            view = memoryview(self._map)
            for info in members:
                if info.compress_type != zipfile.ZIP_STORED or not info.filename.endswith(".npy"):
                    raise CacheCorrupt(f"member {info.filename} is not a stored .npy array")
                header = bytes(view[info.header_offset:info.header_offset + 30])
                if header[:4] != b"PK\x03\x04":
                    raise CacheCorrupt(f"member {info.filename} has no local header")
                name_length, extra_length = struct.unpack("<HH", header[26:30])
                start = info.header_offset + 30 + name_length + extra_length
                member = view[start:start + info.compress_size]
                if len(member) != info.compress_size or zlib.crc32(member) != info.CRC:
                    raise CacheCorrupt(f"bad CRC-32 for member {info.filename}")
                stream = io.BytesIO(bytes(member[:256]))
                version = np.lib.format.read_magic(stream)
                read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                               else np.lib.format.read_array_header_2_0)
                shape, fortran, dtype = read_header(stream)
                if dtype.hasobject or fortran:
                    raise CacheCorrupt(f"member {info.filename} is not a plain C-ordered array")
                count = int(np.prod(shape))
                array = np.frombuffer(self._map, dtype=dtype, count=count, offset=start + stream.tell())
                self._arrays[info.filename[:-4]] = array.reshape(shape)

    def __getitem__(self, label: str) -> np.ndarray:
        return self._arrays[label]

    def __enter__(self) -> "MappedArchive":
        return self

    def __exit__(self, *exc_info) -> None:
        pass  # the arrays keep the map alive; it closes when the last of them goes


def _entry_names(extra: str | None) -> tuple[str, ...]:
    return STAT_NAMES if extra is None else EXTRA_SETS[extra].stat_names


def decode_entry(source: Path | bytes, key: str, encoded: bool = False, mapped: bool = False,
                 extra: str | None = None) -> list[BlockStats]:
    """Read and check an entry (a file, or its bytes); raise :class:`CacheCorrupt` naming what is wrong.

    ``encoded``: keep each block as stored (an :class:`EncodedBlock`, decoded per read)
    instead of float32 tensors. ``mapped`` (with ``encoded``, for a file): the stored
    arrays are views of a memory map of the file (:class:`MappedArchive`), not copies.
    ``extra``: the entry is that extra set's (:data:`EXTRA_SETS`).
    """
    try:
        if mapped and encoded and not isinstance(source, bytes):
            with MappedArchive(source) as archive:
                stats = _decode_archive(archive, key, encoded, extra)
        else:
            with (io.BytesIO(source) if isinstance(source, bytes) else open(source, "rb")) as handle:
                if handle.read(4) not in ZIP_MAGIC:
                    raise CacheCorrupt("not a NumPy .npz archive: it does not start as a zip file does")
                handle.seek(0)
                with np.load(handle, allow_pickle=False) as archive:
                    stats = _decode_archive(archive, key, encoded, extra)
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


def _decode_archive(archive, key: str, encoded: bool = False, extra: str | None = None) -> list[BlockStats]:
    meta = json.loads(bytes(archive["meta"]).decode())
    if not isinstance(meta, dict) or meta.get("key") != key or meta.get("version") != STATS_VERSION \
            or meta.get("extra") != extra:
        raise CacheCorrupt("metadata does not match its key")
    stats: list[BlockStats] = []
    for index in range(int(meta["blocks"])):
        arrays = {}
        for name in _entry_names(extra):
            label = f"b{index}_{name}"
            array = archive[label]
            if list(array.shape) != meta["shapes"][label]:
                raise CacheCorrupt(f"{label} has shape {list(array.shape)}")
            arrays[name] = (array, int(meta["exponents"][label]))
        stats.append(EncodedBlock(arrays) if encoded else {name: _decode(*pair) for name, pair in arrays.items()})
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

    def key(self, request: StatsRequest, extra: str | None = None) -> str:
        """The key of ``request``'s entry of the eight statistics, or with ``extra`` of that extra set's."""
        return cache_key(request, self.precision, extra)

    def path(self, request: StatsRequest, extra: str | None = None) -> Path:
        key = self.key(request, extra)
        return self.root / request.arch.space / key[:2] / f"{key}.npz"

    def contains(self, request: StatsRequest) -> bool:
        """Whether every entry ``request`` reads is on disk (the eight's and each extra set's)."""
        return all(self.path(request, extra).is_file() for extra in (None, *request.extras))

    def _read(self, request: StatsRequest, encoded: bool = False, mapped: bool = False,
              extra: str | None = None) -> tuple[list[BlockStats] | None, str]:
        """The entry's statistics (the eight, or with ``extra`` that set's), or None and why (empty
        when there is no entry); ``encoded`` and ``mapped`` as in :func:`decode_entry`."""
        path = self.path(request, extra)
        if not path.is_file():
            return None, ""
        try:
            return decode_entry(path, self.key(request, extra), encoded, mapped, extra), ""
        except CacheCorrupt as exc:
            return None, f"corrupt cache entry {path.name} ({exc})"
        except OSError as exc:  # unreadable (permissions, I/O error): treat as missing
            return None, f"unreadable cache entry {path.name} ({exc.strerror or exc})"

    def _load_entry(self, request, extra, encoded, mapped, stacklevel: int) -> list[BlockStats] | None:
        stats, problem = self._read(request, encoded, mapped, extra)
        if problem:
            warnings.warn(f"{problem}; recomputing", CacheWarning, stacklevel=stacklevel + 1)
            self._discard(self.path(request, extra))
        return stats

    def load(self, request: StatsRequest, encoded: bool = False, mapped: bool = False) -> list[BlockStats] | None:
        """The cached statistics, or None when absent or corrupt (a corrupt entry is removed).

        ``encoded``: blocks kept as stored (:class:`EncodedBlock`), decoded when read;
        ``mapped``: and memory-mapped from the file rather than read (with extras: None
        when any of the entries lacks).
        """
        parts = []
        for extra in (None, *request.extras):  # a loop, not a comprehension: warnings name the caller
            parts.append(self._load_entry(request, extra, encoded, mapped, 2))
        return None if any(p is None for p in parts) else merge_blocks(*parts)

    @staticmethod
    def _discard(path: Path) -> None:
        try:
            path.unlink(missing_ok=True)
        except OSError:  # a read-only cache keeps it; it is recomputed (in memory) each time
            pass

    def save(self, request: StatsRequest, stats: Sequence[BlockStats]) -> Path:
        """Write ``stats`` (holding the eight and ``request``'s extras); returns the eight's entry."""
        for extra in (*request.extras, None):
            path = self.path(request, extra)
            self._write(path, encode_entry(stats, self.key(request, extra), self.precision, extra))
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

    def _warn_unwritable(self, error: OSError, problem: str = "", stacklevel: int = 3) -> None:
        reason = error.strerror or str(error)
        prefix = f"{problem}; " if problem else ""
        if problem in self._warned:
            return
        self._warned.add(problem)
        if self.unwritable is None:
            self.unwritable = reason
            warnings.warn(f"{prefix}statistics cache {self.root} cannot be written ({reason}): the statistics it "
                          "lacks are computed in memory and not kept", CacheWarning, stacklevel=stacklevel)
        elif problem:
            warnings.warn(f"{prefix}recomputed in memory (the cache cannot be written)", CacheWarning,
                          stacklevel=stacklevel)

    def get(self, request: StatsRequest, encoded: bool = False, mapped: bool = False) -> list[BlockStats]:
        """Cached statistics, computing and storing them when missing.

        What is returned is what the cache holds (decoded, or with ``encoded`` kept as
        stored and decoded per read), so a fresh computation and a later cache hit give
        the very same numbers. A cache that cannot be written gives the statistics
        decoded from the bytes it would have held. With extras, one pass computes what
        lacks and only missing entries are written (a present one is read as it is).
        """
        found = {extra: self._read(request, encoded, mapped, extra) for extra in (None, *request.extras)}
        if all(stats is not None for stats, _ in found.values()):
            return merge_blocks(*(stats for stats, _ in found.values()))
        fresh = compute_statistics(request.arch, request.spec, request.seed, request.num_classes,
                                   **{extra: True for extra in request.extras})
        loaded = []
        for extra, (stats, problem) in found.items():
            loaded.append(stats if stats is not None else self._store(request, extra, fresh, problem, encoded, mapped))
        return merge_blocks(*loaded)

    def _store(self, request: StatsRequest, extra: str | None, fresh: Sequence[BlockStats], problem: str,
               encoded: bool, mapped: bool) -> list[BlockStats]:
        """Write one entry of ``fresh`` (replacing a damaged one, ``problem``) and read it back."""
        key, path = self.key(request, extra), self.path(request, extra)
        payload = encode_entry(fresh, key, self.precision, extra)
        try:
            if problem:
                path.unlink(missing_ok=True)
            self._write(path, payload)
        except DiskFullError:
            raise
        except OSError as exc:  # read-only file system, no permission: keep going in memory
            self._warn_unwritable(exc, problem, stacklevel=4)
            return decode_entry(payload, key, encoded, extra=extra)
        if problem:
            warnings.warn(f"{problem}; recomputed", CacheWarning, stacklevel=3)
        stats = self._load_entry(request, extra, encoded, mapped, 3)
        if stats is None:  # pragma: no cover - only if the disk lies
            raise CacheCorrupt(f"entry {path} unreadable right after writing")
        return stats

    def size_bytes(self, request: StatsRequest, extra: str | None = None) -> int:
        """Bytes of ``request``'s entry of the eight statistics, or with ``extra`` of that set's."""
        return self.path(request, extra).stat().st_size


def _compute_into_cache(root: str, precision: str, space: str, config: dict, spec: dict,
                        seed: int, num_classes: int, extras: Sequence[str] = ()) -> tuple[float, list[str]]:
    """Worker body for :func:`build_cache` (plain arguments so it crosses processes cheaply).

    Returns the seconds spent and the warnings raised, which the calling process
    re-issues (a worker's own warnings would print in Python's raw format).
    """
    cache = StatisticsCache(root, precision)
    request = StatsRequest(parse_arch(config, space), InputSpec(**spec), seed, num_classes, tuple(extras))
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
                 r.num_classes, list(r.extras)) for r in missing]
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
    ``extras``: extra statistics sets (:data:`EXTRA_SETS`) loaded with the eight.
    """

    spec: InputSpec
    seeds: tuple[int, ...]
    target_classes: Mapping[str, int]
    extras: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "extras", check_extras(self.extras))

    @property
    def class_counts(self) -> tuple[int, ...]:
        return tuple(sorted(set(self.target_classes.values())))

    def keys(self) -> list[StatsKey]:
        return [(seed, classes) for seed in self.seeds for classes in self.class_counts]

    def requests(self, archs: Sequence) -> list[StatsRequest]:
        return [StatsRequest(arch, self.spec, seed, classes, self.extras)
                for arch in archs for seed, classes in self.keys()]

    def with_extras(self, extras: Sequence[str]) -> "StatsPlan":
        """This plan also loading ``extras`` (itself when it already does)."""
        merged = tuple(dict.fromkeys((*self.extras, *extras)))
        return self if merged == self.extras else StatsPlan(self.spec, self.seeds, self.target_classes, merged)

    def to_json(self) -> dict:
        data = {"input": self.spec.to_json(), "seeds": list(self.seeds), "target_classes": dict(self.target_classes)}
        if self.extras:  # absent otherwise: a plan without extras records what it always did
            data["extras"] = list(self.extras)
        return data

    @classmethod
    def from_options(cls, input: str, batch_size: int, seeds: Sequence[int], targets: Sequence[str],
                     per_target_stats: bool = False, device: str = "cpu", extras: Sequence[str] = ()) -> "StatsPlan":
        """The plan of ``--input``, ``--batch-size``, ``--stat-seeds`` and ``--per-target-stats`` for
        ``targets``: one 100-class set, or one set per target with its dataset's class count
        (``extras``: the extra statistics sets to load too)."""
        from autoprox.data.benchmark import target_classes

        classes = {t: (target_classes(t) if per_target_stats else 100) for t in targets}
        return cls(InputSpec.parse(input, batch_size, device), tuple(seeds), classes, tuple(extras))


#: Statistics sets are keyed by (initialisation seed, class count).
StatsKey = tuple[int, int]


def load_statistics(cache: StatisticsCache, plan: StatsPlan, archs: Sequence,
                    progress: Callable[[int, int], None] | None = None,
                    encoded: bool = True, mapped: bool = False) -> dict[StatsKey, list[list[BlockStats]]]:
    """Load (computing what is missing) every statistics set of ``plan`` for ``archs``.

    ``encoded`` (default): blocks held as stored (:class:`EncodedBlock`: float16 for a
    float16 cache, half the memory) and decoded to the same float32 tensors when read;
    false: float32 tensors held. ``mapped`` (with ``encoded``): the stored arrays are
    memory maps of the cache files (:class:`MappedArchive`): no copy in this process's
    memory and almost no loading time; the same tensors when read.
    """
    loaded: dict[StatsKey, list[list[BlockStats]]] = {key: [] for key in plan.keys()}
    total, done = len(archs) * len(loaded), 0
    for arch in archs:
        for seed, classes in plan.keys():
            loaded[(seed, classes)].append(cache.get(StatsRequest(arch, plan.spec, seed, classes, plan.extras),
                                                     encoded, mapped))
            done += 1
            if progress:
                progress(done, total)
    return loaded
