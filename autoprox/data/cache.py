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

import collections.abc
import hashlib
import io
import json
import math
import os
import struct
import threading
import time
import warnings
import zipfile
import zlib
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


class MappedArchive:
    """The arrays of an uncompressed ``.npz`` entry as read-only views of one memory map.

    Nothing is read into this process's memory: pages come from the page cache when a
    statistic is decoded (and the kernel may drop them again). Each member's zip CRC is
    checked once, when the archive is opened, as :func:`numpy.load` checks it on reading.
    """

    def __init__(self, path: Path) -> None:
        import mmap

        self._arrays: dict[str, np.ndarray] = {}
        with open(path, "rb") as handle:
            self._map = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_COPY)
            with zipfile.ZipFile(self._map) as archive:  # a bad offset is a ValueError, not the file's OSError
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


#: What reading a damaged entry raises (zip, zlib, the ``.npy`` header and the metadata
#: record fail in these ways: ``BadZipFile``, ValueError (``JSONDecodeError``, NumPy's
#: header checks, a seek out of range), KeyError (a missing member), NotImplementedError
#: (a flipped compression or version field), RuntimeError (a flipped "encrypted" flag). Only these mark an entry corrupt
#: (and so deleted); anything else, a TypeError of a bug for one, propagates.
DAMAGED_ENTRY_ERRORS = (zipfile.BadZipFile, ValueError, KeyError, EOFError, NotImplementedError, RuntimeError,
                        OverflowError, zlib.error, struct.error)


def decode_entry(source: Path | bytes, key: str, encoded: bool = False, mapped: bool = False) -> list[BlockStats]:
    """Read and check an entry (a file, or its bytes); raise :class:`CacheCorrupt` naming what is wrong.

    ``encoded``: keep each block as stored (an :class:`EncodedBlock`, decoded per read)
    instead of float32 tensors. ``mapped`` (with ``encoded``, for a file): the stored
    arrays are views of a memory map of the file (:class:`MappedArchive`), not copies.

    Only parsing the entry is guarded (:data:`DAMAGED_ENTRY_ERRORS` become
    :class:`CacheCorrupt`); an OSError reading the file propagates as such, and decoding
    the arrays runs outside the guard, so an error there is a bug and propagates instead
    of having a good entry deleted.
    """
    try:
        if mapped and encoded and not isinstance(source, bytes):
            with MappedArchive(source) as archive:
                stored = _read_archive(archive, key)
        else:
            # Read whole first: the file's own errors (OSError) stay apart from the format's.
            with io.BytesIO(source if isinstance(source, bytes) else Path(source).read_bytes()) as handle:
                if handle.read(4) not in ZIP_MAGIC:
                    raise CacheCorrupt("not a NumPy .npz archive: it does not start as a zip file does")
                handle.seek(0)
                with np.load(handle, allow_pickle=False) as archive:
                    stored = _read_archive(archive, key)
    except CacheCorrupt:
        raise
    except DAMAGED_ENTRY_ERRORS as exc:
        text = str(exc).splitlines()[0] if str(exc) else ""
        if "allow_pickle" in text:  # NumPy's advice to unpickle; the cache never holds pickles
            text = "it holds pickled objects, which the cache never writes"
        raise CacheCorrupt(f"{type(exc).__name__}: {text}"[:200]) from None
    if not stored:
        raise CacheCorrupt("entry holds no blocks")
    if encoded:
        return [EncodedBlock(arrays) for arrays in stored]
    return [{name: _decode(*pair) for name, pair in arrays.items()} for arrays in stored]


def _read_archive(archive, key: str) -> list[dict[str, tuple[np.ndarray, int]]]:
    """Each block's stored arrays and scale exponents, checked against the metadata record."""
    meta = json.loads(bytes(archive["meta"]).decode())
    if not isinstance(meta, dict) or meta.get("key") != key or meta.get("version") != STATS_VERSION:
        raise CacheCorrupt("metadata does not match its key")
    blocks, shapes, exponents = meta.get("blocks"), meta.get("shapes"), meta.get("exponents")
    if not isinstance(blocks, int) or not isinstance(shapes, dict) or not isinstance(exponents, dict):
        raise CacheCorrupt("metadata lacks its block count, shapes or exponents")
    stored = []
    for index in range(blocks):
        arrays = {}
        for name in STAT_NAMES:
            label = f"b{index}_{name}"
            array, exponent = archive[label], exponents.get(label)
            if list(array.shape) != shapes.get(label):
                raise CacheCorrupt(f"{label} has shape {list(array.shape)}")
            if not isinstance(exponent, int):
                raise CacheCorrupt(f"{label} has no scale exponent")
            arrays[name] = (array, exponent)
        stored.append(arrays)
    return stored


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

    def _read(self, request: StatsRequest, encoded: bool = False,
              mapped: bool = False) -> tuple[list[BlockStats] | None, str]:
        """The entry's statistics, or None and why (empty when there is no entry); ``encoded`` and
        ``mapped`` as in :func:`decode_entry`."""
        path = self.path(request)
        if not path.is_file():
            return None, ""
        try:
            return decode_entry(path, self.key(request), encoded, mapped), ""
        except CacheCorrupt as exc:
            return None, f"corrupt cache entry {path.name} ({exc})"
        except OSError as exc:  # unreadable (permissions, I/O error): treat as missing
            return None, f"unreadable cache entry {path.name} ({exc.strerror or exc})"

    def load(self, request: StatsRequest, encoded: bool = False, mapped: bool = False) -> list[BlockStats] | None:
        """The cached statistics, or None when absent or corrupt (a corrupt entry is removed).

        ``encoded``: blocks kept as stored (:class:`EncodedBlock`), decoded when read;
        ``mapped``: and memory-mapped from the file rather than read.
        """
        stats, problem = self._read(request, encoded, mapped)
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

    def get(self, request: StatsRequest, encoded: bool = False, mapped: bool = False) -> list[BlockStats]:
        """Cached statistics, computing and storing them when missing.

        What is returned is what the cache holds (decoded, or with ``encoded`` kept as
        stored and decoded per read), so a fresh computation and a later cache hit give
        the very same numbers. A cache that cannot be written gives the statistics
        decoded from the bytes it would have held.
        """
        stats, problem = self._read(request, encoded, mapped)
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
            return decode_entry(payload, key, encoded)
        if problem:
            warnings.warn(f"{problem}; recomputed", CacheWarning, stacklevel=2)
        stats = self.load(request, encoded, mapped)
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
                     per_target_stats: bool = False, device: str = "cpu") -> "StatsPlan":
        """The plan of ``--input``, ``--batch-size``, ``--stat-seeds`` and ``--per-target-stats`` for
        ``targets``: one 100-class set, or one set per target with its dataset's class count."""
        from autoprox.data.benchmark import target_classes

        classes = {t: (target_classes(t) if per_target_stats else 100) for t in targets}
        return cls(InputSpec.parse(input, batch_size, device), tuple(seeds), classes)


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
            loaded[(seed, classes)].append(cache.get(StatsRequest(arch, plan.spec, seed, classes), encoded, mapped))
            done += 1
            if progress:
                progress(done, total)
    return loaded
