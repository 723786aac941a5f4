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

import errno
import hashlib
import json
import os
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

from autoprox.core.atomic import FULL_DISK_ERRNOS, atomic_open, disk_full_error
from autoprox.core.errors import CacheError, ConfigError, DiskFullError
from autoprox.core.parallel import Executor, as_executor
from autoprox.data.entries import (
    PRECISIONS,
    STATS_VERSION,
    CacheCorrupt,
    check_entry,
    decode_entry,
    encode_entry,
    merge_blocks,
)
from autoprox.data.extras import EXTRA_SETS, check_extras
from autoprox.networks.statistics import (
    BlockStats,
    InputSpec,
    compute_statistics,
)
from autoprox.spaces.architectures import arch_key, parse_arch

CACHE_DIR_ENV = "AUTOPROX_CACHE"


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


def _check_folder(root: Path) -> None:
    """CacheError unless ``root`` is, or can become, a folder: a file there (or above it), or a symbolic
    link to nowhere or in a loop, is refused at once rather than warned about on every write."""
    for folder in (root, *root.parents):
        if folder.is_dir():
            return
        if folder.exists() or folder.is_symlink():
            what = "a file" if folder.exists() else "a symbolic link to nothing or a loop of them"
            where = "" if folder == root else f" ({folder} is {what})"
            raise CacheError(f"statistics cache {root} cannot be a folder{where or f': it is {what}'}; "
                             "give --cache-dir a folder")


def _problem(path: Path, error: Exception) -> str:
    """Why the entry at ``path`` cannot be used: corrupt (:class:`CacheCorrupt`) or unreadable (an OSError)."""
    if isinstance(error, CacheCorrupt):
        return f"corrupt cache entry {path.name} ({error})"
    return f"unreadable cache entry {path.name} ({getattr(error, 'strerror', None) or error})"


class StatisticsCache:
    """Statistics on disk under ``root/<space>/<key[:2]>/<key>.npz``."""

    def __init__(self, root: str | os.PathLike | None = None, precision: str = "float16") -> None:
        if precision not in PRECISIONS:
            raise ConfigError(f"unknown cache precision {precision!r}; use {' or '.join(PRECISIONS)}")
        self.root = Path(root) if root is not None else default_cache_dir()
        _check_folder(self.root)
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

    def damaged(self, request: StatsRequest) -> list[tuple[Path, str]]:
        """Each of ``request``'s entries on disk that is damaged, and why (none: an empty list), found cheaply by
        :func:`~autoprox.data.entries.check_entry` (the zip directory, the metadata and the arrays' headers;
        the arrays' CRCs are checked when an entry is read)."""
        found = []
        for extra in (None, *request.extras):
            path = self.path(request, extra)
            if path.is_file():
                try:
                    check_entry(path, self.key(request, extra), extra)
                except (CacheCorrupt, OSError) as exc:
                    found.append((path, _problem(path, exc)))
        return found

    def discard_damaged(self, request: StatsRequest) -> tuple[list[str], list[str]]:
        """Remove ``request``'s damaged entries (:meth:`damaged`), so that they are computed again; returns why
        each removed one was damaged, and why each one that could not be removed (a read-only cache) is; those
        stay, and are recomputed in memory where they are read."""
        removed, kept = [], []
        for path, problem in self.damaged(request):
            self._discard(path)
            (kept if path.exists() else removed).append(problem)
        return removed, kept

    def _read(self, request: StatsRequest, encoded: bool = False, mapped: bool = False,
              extra: str | None = None) -> tuple[list[BlockStats] | None, str]:
        """The entry's statistics (the eight, or with ``extra`` that set's), or None and why (empty
        when there is no entry); ``encoded`` and ``mapped`` as in :func:`decode_entry`."""
        path = self.path(request, extra)
        if not path.is_file():
            return None, ""
        try:
            return decode_entry(path, self.key(request, extra), encoded, mapped, extra), ""
        except (CacheCorrupt, OSError) as exc:  # unreadable (permissions, I/O error): treat as missing
            return None, _problem(path, exc)

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

    def write_problem(self, space: str) -> OSError | None:
        """Why entries of ``space`` cannot be written (None when they can), found by writing a probe file;
        it warns of nothing and records nothing (:meth:`writable` does both)."""
        folder = self.root / space
        try:
            folder.mkdir(parents=True, exist_ok=True)
            probe = folder / f".write-test-{os.getpid()}-{threading.get_ident()}"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            if exc.errno in FULL_DISK_ERRNOS:
                raise DiskFullError(f"statistics cache {self.root} is full: {disk_full_error(folder, exc, 0)}") from None
            if exc.errno in (errno.ENOTDIR, errno.EEXIST, errno.ELOOP):  # not a folder at all: nothing to warn about
                raise CacheError(f"statistics cache {self.root} cannot be a folder (it, or a folder above it, is a "
                                 f"file or a loop of symbolic links); give --cache-dir a folder") from None
            return exc
        return None

    def writable(self, space: str) -> bool:
        """Whether entries of ``space`` can be written; the first time not, one warning says why and
        :attr:`unwritable` then holds the reason."""
        if self.unwritable is not None:
            return False
        problem = self.write_problem(space)
        if problem is not None:
            self._warn_unwritable(problem)
        return problem is None

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
        fresh = self._compute(request)
        loaded = []
        for extra, (stats, problem) in found.items():
            loaded.append(stats if stats is not None else self._store(request, extra, fresh, problem, encoded, mapped))
        return merge_blocks(*loaded)

    def ensure(self, request: StatsRequest) -> None:
        """Compute and write ``request``'s missing entries, without reading them back.

        A worker's job (:func:`build_cache`): the caller reads the entries when it uses them, and
        an entry damaged on the way is found and recomputed then, as any damaged entry is.
        """
        missing = [extra for extra in (None, *request.extras) if not self.path(request, extra).is_file()]
        if not missing:
            return
        fresh = self._compute(request)
        for extra in missing:
            if self._write_entry(request, extra, fresh, stacklevel=3) is not None:
                return  # the cache cannot be written: the caller computes what it lacks in memory

    @staticmethod
    def _compute(request: StatsRequest) -> list[BlockStats]:
        """``request``'s statistics computed afresh: the eight and its extra sets, in one pass."""
        return compute_statistics(request.arch, request.spec, request.seed, request.num_classes,
                                  **{extra: True for extra in request.extras})

    def _write_entry(self, request: StatsRequest, extra: str | None, fresh: Sequence[BlockStats], problem: str = "",
                     stacklevel: int = 4) -> bytes | None:
        """Encode one entry of ``fresh`` and write it (replacing a damaged one, ``problem``): None when written,
        the encoded bytes when the cache cannot be written (said once, ``stacklevel`` frames up from here)."""
        payload = encode_entry(fresh, self.key(request, extra), self.precision, extra)
        path = self.path(request, extra)
        try:
            if problem:
                path.unlink(missing_ok=True)
            self._write(path, payload)
        except DiskFullError:
            raise
        except OSError as exc:  # read-only file system, no permission: keep going in memory
            self._warn_unwritable(exc, problem, stacklevel=stacklevel + 1)
            return payload
        return None

    def _store(self, request: StatsRequest, extra: str | None, fresh: Sequence[BlockStats], problem: str,
               encoded: bool, mapped: bool) -> list[BlockStats]:
        """Write one entry of ``fresh`` (replacing a damaged one, ``problem``) and read it back."""
        unwritten = self._write_entry(request, extra, fresh, problem, stacklevel=4)
        if unwritten is not None:
            return decode_entry(unwritten, self.key(request, extra), encoded, extra=extra)
        if problem:
            warnings.warn(f"{problem}; recomputed", CacheWarning, stacklevel=3)
        stats = self._load_entry(request, extra, encoded, mapped, 3)
        if stats is None:  # pragma: no cover - only if the disk lies
            raise CacheCorrupt(f"entry {self.path(request, extra)} unreadable right after writing")
        return stats

    def size_bytes(self, request: StatsRequest, extra: str | None = None) -> int:
        """Bytes of ``request``'s entry of the eight statistics, or with ``extra`` of that set's."""
        return self.path(request, extra).stat().st_size


def compute_into_cache(root: str, precision: str, space: str, config: dict, spec: dict,
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
        cache.ensure(request)
    return time.perf_counter() - start, [str(w.message) for w in caught]


def request_job(cache: StatisticsCache, request: StatsRequest) -> tuple:
    """The plain arguments of :func:`compute_into_cache` that compute ``request``'s entry into ``cache``."""
    from autoprox.spaces.architectures import arch_to_config

    return (str(cache.root), cache.precision, request.arch.space, arch_to_config(request.arch), request.spec.to_json(),
            request.seed, request.num_classes, list(request.extras))


def build_cache(cache: StatisticsCache, requests: Sequence[StatsRequest], workers: int | Executor = 1,
                progress: Callable[[int, int], None] | None = None) -> dict:
    """Compute every missing entry of ``requests`` in parallel: ``workers`` local processes, or
    an :class:`~autoprox.core.parallel.Executor` (a Dask cluster writing to a cache path the
    workers share).

    Each task writes its entry to disk itself, so only a float comes back, and a task lost
    with its worker loses nothing already written. A cache that cannot be written is left
    alone (one warning): what it lacks is computed in memory where it is used. An entry on disk
    is checked cheaply (:meth:`StatisticsCache.damaged`); a damaged one is removed, said in a
    warning, and computed again. Returns counts (``replaced``: the damaged entries' requests)
    and timings.
    """
    replaced = 0
    for request in requests:
        removed, _ = cache.discard_damaged(request)  # one a read-only cache keeps is named where it is read
        for problem in removed:
            warnings.warn(f"{problem}; recomputing", CacheWarning, stacklevel=2)
        replaced += bool(removed)
    missing = [r for r in requests if not cache.contains(r)]
    done = len(requests) - len(missing)
    if progress:
        progress(done, len(requests))
    seconds: list[float] = []
    if missing and not cache.writable(missing[0].arch.space):
        return {"requests": len(requests), "computed": 0, "seconds": seconds, "unwritable": cache.unwritable,
                "replaced": replaced}
    if missing:
        jobs = [request_job(cache, r) for r in missing]
        try:
            for elapsed, caught in as_executor(workers).run_unordered(compute_into_cache, jobs):
                for message in dict.fromkeys(caught):
                    warnings.warn(message, CacheWarning, stacklevel=2)
                seconds.append(elapsed)
                done += 1
                if progress:
                    progress(done, len(requests))
        except BaseException as exc:
            remove_partial_writes(cache, missing)
            if isinstance(exc, DiskFullError):
                raise DiskFullError(f"{exc} ({len(seconds)} entries written by this command before it filled)") \
                    from None
            raise
    return {"requests": len(requests), "computed": len(missing), "seconds": seconds, "replaced": replaced}


def remove_partial_writes(cache: StatisticsCache, requests: Sequence[StatsRequest]) -> None:
    """The temporary files of ``requests``' entries that workers stopped mid-write left beside them
    (:func:`~autoprox.core.atomic.atomic_open` names them ``.ENTRY.npz.*.tmp``): when one task fails,
    the local executor ends the other workers, and a worker ended while writing cannot remove its own."""
    for request in requests:
        for extra in (None, *request.extras):
            path = cache.path(request, extra)
            for partial in path.parent.glob(f".{path.name}.*.tmp") if path.parent.is_dir() else ():
                try:
                    partial.unlink()
                except OSError:
                    pass


#: The initialisation seeds of a plan not told otherwise (``--stat-seeds``' default).
DEFAULT_STAT_SEEDS: tuple[int, ...] = (0,)


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
    def default(cls, targets: Sequence[str] = ("c100_kd",)) -> "StatsPlan":
        """The plan of the command line's defaults for ``targets``: :class:`InputSpec`'s minibatch,
        :data:`DEFAULT_STAT_SEEDS` and one 100-class set."""
        spec = InputSpec()
        return cls(spec, DEFAULT_STAT_SEEDS, {target: 100 for target in targets})

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
