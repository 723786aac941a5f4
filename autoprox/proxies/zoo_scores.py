"""Computing the zoo's proxies (:mod:`autoprox.proxies.zoo`) on architectures: one raw value per
network, the scores of a ranked set, a cache of raw values on disk, several architectures in
parallel, and the zoo terminals' values (per-architecture scalars a genome can read).

This module registers the ``zoo`` and ``zoo_rest`` terminal sets (:data:`ZOO_TERMINAL_SET`,
:data:`ZOO_REST_TERMINAL_SET`) in :data:`autoprox.genome.terminals.TERMINAL_SETS`: the genome layer, below this
one, owns the registry and knows nothing of the zoo. Each set's terminals are those of
:data:`autoprox.proxies.zoo.ZOO_TERMINALS` registered in it, read live (one
:func:`~autoprox.proxies.zoo.register_zoo_terminal` adds one), and their values are computed here. The proxies
import this module (:mod:`autoprox.proxies.proxy`, :mod:`autoprox.proxies.scorers`), so whatever reads a proxy
has the set; a module that parses genomes and uses nothing else of the proxies (a Dask worker's shard) calls
:func:`zoo_terminal_set`.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from autoprox.core.atomic import load_json
from autoprox.core.parallel import as_executor
from autoprox.core.registry import LiveNames
from autoprox.genome.terminals import SCALAR, TERMINAL_SETS, TerminalSet, TerminalSource, register_terminal_set
from autoprox.networks.statistics import InputSpec, torch_threads
from autoprox.proxies.zoo import ZOO, ZOO_TERMINALS, ZOO_VERSION, ZooInputs, zoo_terminals_of
from autoprox.spaces.architectures import arch_key, arch_to_config, parse_arch

if TYPE_CHECKING:
    from torch import nn


#: What ``tvt`` says when no teacher is given.
NO_TEACHER_NOTE = ("no teacher given: TVT's teacher-aware term needs a ConvNet teacher (Python API: "
                   "teacher=nn.Module); computing its student-capability part alone (tvt_l2)")


def computed_name(name: str, teacher: nn.Module | None = None) -> str:
    """The zoo proxy actually computed for ``name``: without a teacher, a proxy that needs one
    is replaced by its teacher-free part (``tvt`` -> ``tvt_l2``)."""
    entry = ZOO[name]
    if entry.needs_teacher and teacher is None and entry.without_teacher:
        return entry.without_teacher
    return name


def raw_value(name: str, arch, spec: InputSpec, seed: int, num_classes: int,
              teacher: nn.Module | None = None):
    """The raw value of zoo proxy ``name`` on ``arch`` (a float, or a dict for set-level ones).

    Single-threaded; raises :class:`ProxyFailure` (any other exception from the
    computation is turned into one, naming its type).
    """
    from autoprox.proxies.zoo_measures import ProxyFailure  # needs torch, which reading the zoo's names does not

    if name not in ZOO:
        raise KeyError(f"unknown zoo proxy {name!r}")
    arch = parse_arch(arch)
    with torch_threads(1):
        try:
            return ZOO[name].raw(ZooInputs(arch, spec, seed, num_classes, teacher))
        except ProxyFailure:
            raise
        except Exception as exc:  # noqa: BLE001 - any failure is reported, the ranking goes on
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise ProxyFailure(f"{type(exc).__name__}: {first}"[:300]) from exc


def set_scores(name: str, raws: Sequence) -> np.ndarray:
    """Scores of the ranked set from its raw values (TVT's min-max normalisation happens here)."""
    return ZOO[name].set_scores(raws)


# ------------------------------------------------------------------ score cache


class ZooScoreCache:
    """Raw zoo values on disk (``root/zoo/<space>/<key[:2]>/<key>.json``), with their seconds.

    Keyed by :data:`ZOO_VERSION`, proxy, architecture, input, seed and class count;
    plain JSON, written atomically. TVT with a teacher is never cached (the teacher is
    not part of any key). An entry that cannot be read, or whose value is not finite
    (every zoo value is checked finite before it is stored), is corrupt: it is removed
    and the value computed again; a non-finite one is warned about once.
    """

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root) / "zoo"
        self._described: dict[InputSpec, dict] = {}  # an image folder's digest is read once
        self._warned_non_finite = False

    def key(self, name: str, arch, spec: InputSpec, seed: int, num_classes: int) -> str:
        if spec not in self._described:
            self._described[spec] = spec.describe()
        fields = {"version": ZOO_VERSION, "proxy": name, "space": arch.space, "arch": arch_key(arch),
                  "input": self._described[spec], "seed": seed, "classes": num_classes}
        return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()

    def path(self, name, arch, spec, seed, num_classes) -> Path:
        key = self.key(name, arch, spec, seed, num_classes)
        return self.root / arch.space / key[:2] / f"{key}.json"

    def load(self, name, arch, spec, seed, num_classes):
        """(raw, seconds) or None when absent or unreadable (an unreadable entry is removed)."""
        path = self.path(name, arch, spec, seed, num_classes)
        if not path.is_file():
            return None
        try:
            data = load_json(path.read_text(encoding="utf-8"))
            if data.get("key") != path.stem or data.get("version") != ZOO_VERSION:
                raise ValueError("key mismatch")
            raw = data["raw"]
            if not (isinstance(raw, float) or isinstance(raw, dict)):
                raise ValueError("bad value")
            if not _finite_raw(raw):
                self._warn_non_finite()
                raise ValueError("not finite")
            return raw, float(data["seconds"])
        except (ValueError, KeyError, TypeError, OSError):
            path.unlink(missing_ok=True)
            return None

    def _warn_non_finite(self) -> None:
        if not self._warned_non_finite:
            self._warned_non_finite = True
            warnings.warn(f"zoo score cache {self.root}: entries holding NaN or inf are corrupt (zoo values are "
                          "always finite); they are removed and computed again", stacklevel=3)

    def save(self, name, arch, spec, seed, num_classes, raw, seconds: float) -> None:
        from autoprox.core.atomic import atomic_write_text

        path = self.path(name, arch, spec, seed, num_classes)
        record = {"key": path.stem, "version": ZOO_VERSION, "proxy": name, "raw": raw, "seconds": seconds}
        atomic_write_text(path, json.dumps(record))


def _finite_raw(raw) -> bool:
    """A raw value as the zoo stores it: a finite float, or a dict of finite floats (TVT's terms)."""
    values = raw.values() if isinstance(raw, dict) else [raw]
    return all(isinstance(v, float) and math.isfinite(v) for v in values)


# ----------------------------------------------------------- computing many values


@dataclass
class RawResult:
    """One proxy's outcome on one architecture: a raw value or a failure reason."""

    raw: object = None
    seconds: float = math.nan
    error: str = ""
    cached: bool = False

    @property
    def ok(self) -> bool:
        return not self.error


def _compute_arch(names: Sequence[str], config: dict, space: str, spec: dict, seed: int, num_classes: int,
                  teacher) -> dict[str, tuple]:
    """Worker body: every proxy of ``names`` on one architecture, each timed on its own."""
    from autoprox.proxies.zoo_measures import ProxyFailure  # needs torch, which reading the zoo's names does not

    arch = parse_arch(config, space)
    spec_obj = InputSpec(**spec)
    out = {}
    for name in names:
        start = time.perf_counter()
        try:
            raw = raw_value(name, arch, spec_obj, seed, num_classes, teacher)
            out[name] = (raw, time.perf_counter() - start, "")
        except ProxyFailure as exc:
            out[name] = (None, time.perf_counter() - start, str(exc))
    return out


def _compute_arch_keyed(index: int, *arguments) -> tuple[int, dict]:
    """``(index, _compute_arch(*arguments))``: a result that says which architecture it is of."""
    return index, _compute_arch(*arguments)


def compute_raw_values(names: Sequence[str], archs: Sequence, spec: InputSpec, seed: int, num_classes: int,
                       teacher: nn.Module | None = None, workers: int = 1,
                       score_cache: ZooScoreCache | None = None,
                       progress: Callable[[int, int], None] | None = None) -> dict[str, list[RawResult]]:
    """Raw values of zoo proxies ``names`` for ``archs`` (one seed, one class count).

    Values already in ``score_cache`` are read from it; the rest are computed (in
    parallel over architectures with ``workers`` > 1, each worker single-threaded) and
    stored. A failure is kept as its reason; it never stops the other proxies.
    """
    results = {name: [RawResult() for _ in archs] for name in names}
    todo: dict[int, list[str]] = {}
    for index, arch in enumerate(archs):
        for name in names:
            cacheable = score_cache is not None and ZOO[name].cacheable(teacher)
            hit = score_cache.load(name, arch, spec, seed, num_classes) if cacheable else None
            if hit is not None:
                results[name][index] = RawResult(hit[0], hit[1], cached=True)
            else:
                todo.setdefault(index, []).append(name)
    total, done = len(archs), len(archs) - len(todo)
    if progress:
        progress(done, total)
    if not todo:
        return results
    jobs = [(index, todo[index]) for index in sorted(todo)]
    spec_json = spec.to_json()

    def arguments(index, job_names):
        return (job_names, arch_to_config(archs[index]), archs[index].space, spec_json, seed, num_classes, teacher)

    # results as they arrive, so progress advances and each is cached at once
    outcomes = as_executor(workers).run_unordered(_compute_arch_keyed, [(i, *arguments(i, n)) for i, n in jobs])
    for index, outcome in outcomes:
        for name, (raw, seconds, error) in outcome.items():
            results[name][index] = RawResult(raw, seconds, error)
            cacheable = score_cache is not None and ZOO[name].cacheable(teacher)
            if not error and cacheable:
                score_cache.save(name, archs[index], spec, seed, num_classes, raw, seconds)
        done += 1
        if progress:
            progress(done, total)
    return results


# ------------------------------------------------------------- zoo proxies as terminals

def _terminal_value(raw: float, transform: str) -> float:
    if transform == "log":
        return math.log(raw) if raw > 0 else math.nan
    return float(raw)


def zoo_terminal_table(archs: Sequence, spec: InputSpec, seed: int, num_classes: int,
                       cache_root: str | os.PathLike | None = None, workers=1,
                       progress: Callable[[int, int], None] | None = None,
                       names: Sequence[str] | None = None) -> list[dict[str, float]]:
    """Per architecture, the value of each of :data:`ZOO_TERMINALS` (or of those of ``names`` among
    them): its zoo proxy's raw value on the network and batch of ``seed`` (:func:`compute_raw_values`,
    read from and kept in the score cache under ``cache_root`` when it is given). A proxy that fails
    on an architecture gives NaN there (a genome reading it is then invalid on that architecture, as
    on any non-finite value)."""
    wanted = {name: ZOO_TERMINALS[name] for name in ZOO_TERMINALS if names is None or name in names}
    proxies = list(dict.fromkeys(terminal.proxy for terminal in wanted.values()))
    raws = compute_raw_values(proxies, archs, spec, seed, num_classes, workers=workers,
                              score_cache=ZooScoreCache(cache_root) if cache_root is not None else None,
                              progress=progress)
    return [{name: _terminal_value(raws[t.proxy][i].raw, t.transform) if raws[t.proxy][i].ok else math.nan
             for name, t in wanted.items()} for i in range(len(archs))]


def _zoo_table(terminal_set: str) -> Callable[[Sequence, TerminalSource], list[dict[str, float]]]:
    def table(archs: Sequence, source: TerminalSource) -> list[dict[str, float]]:
        held = zoo_terminals_of(terminal_set)
        names = held if source.names is None else tuple(name for name in held if name in source.names)
        return zoo_terminal_table(archs, source.spec, source.seed, source.num_classes, source.cache_root,
                                  source.workers, source.progress, names)
    return table


def _zoo_set(name: str, description: str) -> TerminalSet:
    return TerminalSet(name, LiveNames(lambda: zoo_terminals_of(name)), SCALAR,
                       description + " ({names}), computed on its network with the statistics' input and seed and "
                       "kept in the zoo score cache", table=_zoo_table(name))


#: The ``zoo`` terminal set: the zoo terminals registered in it (:data:`autoprox.proxies.zoo.ZOO_TERMINALS`),
#: read live.
ZOO_TERMINAL_SET = register_terminal_set(_zoo_set("zoo", "zoo proxies' values of each architecture"))
#: The ``zoo_rest`` terminal set: the rest of the zoo's scalar proxies, read live in the same way.
ZOO_REST_TERMINAL_SET = register_terminal_set(_zoo_set(
    "zoo_rest", "the other zoo proxies' values of each architecture, which --terminals zoo does not draw"))


def zoo_terminal_set() -> TerminalSet:
    """The ``zoo`` terminal set, registered in the genome layer's :data:`~autoprox.genome.terminals.TERMINAL_SETS`
    (again, where a plug-in or a test withdrew it, and with it the ``zoo_rest`` set): what a module that parses
    genomes reading zoo terminals, and imports nothing else of the proxies, calls."""
    for terminal_set in (ZOO_TERMINAL_SET, ZOO_REST_TERMINAL_SET):
        if TERMINAL_SETS.get(terminal_set.name) is not terminal_set:
            register_terminal_set(terminal_set)
    return ZOO_TERMINAL_SET

__all__ = ["NO_TEACHER_NOTE", "RawResult", "ZOO_REST_TERMINAL_SET", "ZOO_TERMINALS", "ZOO_TERMINAL_SET", "ZooScoreCache",
           "compute_raw_values",
           "computed_name", "raw_value", "set_scores", "zoo_terminal_set", "zoo_terminal_table"]
