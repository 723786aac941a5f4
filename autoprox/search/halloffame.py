"""The hall of fame of a search: the best distinct proxies it has ever evaluated.

The population only holds what survived; a good child that missed the acceptance
margin, or a member pushed out later, is still worth reading. The hall of fame
keeps, over every genome a search evaluated:

* ``entries``: the ``capacity`` best distinct valid genomes, ranked by search-split fitness
  (a record's ``fitness``: the JCM in the paper's setting; ties: fewer nodes first, then the
  canonical string), each with its fitness, its plain JCM, its per-target Kendall tau, its
  complexity and the iteration it was first evaluated in. Distinct
  means distinct in behaviour: genomes with the same canonical form, or with the same
  Kendall tau on every target of the search split (the same ranking of the search
  architectures, in practice: a width term written six ways), count once, by the
  simplest of them (fewest nodes, then the canonical string). A hall of fame read
  from a file written before this rule is brought to it on reading;
* ``pareto``: the Pareto front of fitness against complexity over every valid genome
  seen (no other genome has a fitness at least as high with at most as many nodes, one
  of the two strictly), ordered by complexity.

``hall_of_fame.json`` version 2 records each entry's ``fitness`` and ``jcm``; a version-1 file (runs
made before the two were kept apart) is converted on reading (:meth:`RunDirectory.hall_of_fame`).

Complexity is the node count (:func:`autoprox.genome.tree.tree_size`) of the genome's
canonical form: ``no_op`` nodes do nothing and are not counted, so the paper's
template genomes range from 5 to 9 nodes instead of all counting 9.

Everything here is a function of the set of evaluation records alone, not of their
order, so a hall of fame rebuilt from ``evaluations.jsonl`` is the one the search
kept as it went, and a resumed search ends with the same one as an uninterrupted
search. The search writes ``hall_of_fame.json`` atomically whenever it changes and
after every iteration; a run without the file (made before it existed) or whose
file lags behind its evaluations is rebuilt from ``evaluations.jsonl``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

from autoprox.core.errors import RunDirError
from autoprox.genome.kinds import genome_forms
from autoprox.core.errors import GenomeError
from autoprox.search.fitness import FitnessRecord
from autoprox.search.rundir import EVALUATIONS, HALL_OF_FAME, RunDirectory
FORMAT = "autoprox-hall-of-fame"
FORMAT_VERSION = 2
DEFAULT_CAPACITY = 20


@dataclass(frozen=True)
class Entry:
    """One proxy of the hall of fame (search-split figures): ``fitness`` (what the hall ranks by; None
    given: the plain JCM) and ``jcm``, the plain JCM."""

    genome: str
    canonical: str
    jcm: float
    kendall: dict[str, float]
    complexity: int
    iteration: int
    fitness: float | None = None

    def __post_init__(self) -> None:
        if self.fitness is None:
            object.__setattr__(self, "fitness", self.jcm)

    def sort_key(self) -> tuple:
        return (-self.fitness, self.complexity, self.canonical)

    @property
    def signature(self) -> tuple:
        """What the entry does on the search split: its Kendall tau per target."""
        return tuple(sorted(self.kendall.items()))

    def dominates(self, other: "Entry") -> bool:
        """At least as good on both axes (higher fitness, fewer nodes), strictly on one."""
        return (self.fitness >= other.fitness and self.complexity <= other.complexity
                and (self.fitness > other.fitness or self.complexity < other.complexity))

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping) -> "Entry":
        """Read an entry from disk, checking every field (the genome is re-parsed, never evaluated)."""
        if not isinstance(data, Mapping):
            raise RunDirError("a hall-of-fame entry must be an object")
        if not isinstance(data["genome"], str):
            raise RunDirError("a hall-of-fame entry's genome must be a string")
        text, canonical, _ = genome_forms(data["genome"])
        kendall = {str(t): float(v) for t, v in dict(data["kendall"]).items()}
        fitness, jcm = float(data["fitness"]), float(data["jcm"])
        if not (math.isfinite(fitness) and math.isfinite(jcm)):
            raise RunDirError("a hall-of-fame entry has no finite fitness and JCM")
        return cls(text, canonical, jcm, kendall,
                   int(data["complexity"]), int(data["iteration"]), fitness)


def complexity_of(canonical: str) -> int:
    """Node count of a canonical genome string."""
    return genome_forms(canonical)[2]


@dataclass
class HallOfFame:
    """Best distinct proxies and the fitness/complexity Pareto front, updated one record at a time."""

    capacity: int = DEFAULT_CAPACITY
    targets: list[str] = field(default_factory=list)
    entries: list[Entry] = field(default_factory=list)
    pareto: list[Entry] = field(default_factory=list)
    evaluated: int = 0
    valid: int = 0
    iteration: int = 0

    def __post_init__(self) -> None:
        if self.capacity < 1:
            raise ValueError(f"hall-of-fame capacity must be at least 1, got {self.capacity}")

    def consider(self, record: FitnessRecord | Mapping, iteration: int) -> bool:
        """Take one evaluation record into account; True when the entries or the front changed."""
        if not isinstance(record, FitnessRecord):
            record = FitnessRecord.from_json({k: v for k, v in record.items() if k != "iteration"})
        self.evaluated += 1
        self.iteration = max(self.iteration, int(iteration))
        if not record.valid or record.fitness is None or not math.isfinite(record.fitness):
            return False
        self.valid += 1
        if not self.targets:
            self.targets = list(record.kendall)
        entry = Entry(record.genome, record.canonical, float(record.jcm), dict(record.kendall),
                      complexity_of(record.canonical), int(iteration), float(record.fitness))
        changed = self._enter_top(entry)
        changed = self._enter_front(entry) or changed
        return changed

    def _enter_top(self, entry: Entry) -> bool:
        if any(e.canonical == entry.canonical for e in self.entries):
            return False
        alike = next((e for e in self.entries if e.signature == entry.signature), None)
        if alike is not None:
            if alike.sort_key() <= entry.sort_key():
                return False
            self.entries.remove(alike)  # the simpler genome of the same behaviour takes its place
        if len(self.entries) >= self.capacity and entry.sort_key() >= self.entries[-1].sort_key():
            return False
        self.entries.append(entry)
        self.entries.sort(key=Entry.sort_key)
        del self.entries[self.capacity:]
        return True

    def _enter_front(self, entry: Entry) -> bool:
        if any(e.canonical == entry.canonical or e.dominates(entry) for e in self.pareto):
            return False
        self.pareto = [e for e in self.pareto if not entry.dominates(e)] + [entry]
        self.pareto.sort(key=lambda e: (e.complexity, -e.fitness, e.canonical))
        return True

    def rank_of(self, canonical: str) -> int | None:
        """1-based rank of a canonical genome among the entries, or None."""
        for rank, entry in enumerate(self.entries, start=1):
            if entry.canonical == canonical:
                return rank
        return None

    def to_json(self) -> dict:
        return {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "capacity": self.capacity,
            "targets": list(self.targets),
            "evaluated": self.evaluated,
            "valid": self.valid,
            "iteration": self.iteration,
            "entries": [{"rank": rank, **e.to_json()} for rank, e in enumerate(self.entries, start=1)],
            "pareto": [e.to_json() for e in self.pareto],
        }

    @classmethod
    def from_json(cls, data: Mapping) -> "HallOfFame":
        """Read a ``hall_of_fame.json`` object (version 2: :meth:`RunDirectory.hall_of_fame` converts an older
        one); RunDirError saying what is wrong when it is malformed."""
        if not isinstance(data, Mapping) or data.get("format") != FORMAT:
            raise RunDirError("not a hall-of-fame file")
        try:
            version = int(data.get("version", 0))
            if version > FORMAT_VERSION:
                raise RunDirError(f"hall-of-fame format version {data['version']} is newer than this autoprox")
            return cls(
                capacity=int(data["capacity"]),
                targets=[str(t) for t in data["targets"]],
                entries=distinct_entries(Entry.from_json(e) for e in data["entries"]),
                pareto=[Entry.from_json(e) for e in data["pareto"]],
                evaluated=int(data["evaluated"]),
                valid=int(data["valid"]),
                iteration=int(data["iteration"]),
            )
        except RunDirError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:  # GenomeError included
            detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise RunDirError(f"malformed hall of fame ({type(exc).__name__}: {detail})"[:200]) from None

    @classmethod
    def from_evaluations(cls, records: Iterable[Mapping], capacity: int = DEFAULT_CAPACITY) -> "HallOfFame":
        """The hall of fame of a sequence of ``evaluations.jsonl`` records."""
        hall = cls(capacity=capacity)
        for number, record in enumerate(records, start=1):
            try:
                hall.consider(record, int(record.get("iteration", 0)))
            except (AttributeError, TypeError, KeyError, ValueError) as exc:
                detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                raise RunDirError(f"evaluation record {number} is malformed: {detail}") from None
        return hall


def distinct_entries(entries: Iterable[Entry]) -> list[Entry]:
    """``entries`` ranked, one per behaviour (:attr:`Entry.signature`): the simplest of each."""
    kept: dict[tuple, Entry] = {}
    for entry in entries:
        other = kept.get(entry.signature)
        if other is None or entry.sort_key() < other.sort_key():
            kept[entry.signature] = entry
    return sorted(kept.values(), key=Entry.sort_key)


def search_kendall(best: Mapping | None) -> dict[str, float] | None:
    """The search-split Kendall per target a ``best.json`` records, or None when it has none."""
    search = (best or {}).get("search")
    targets = search.get("targets") if isinstance(search, Mapping) else None
    if not isinstance(targets, Mapping) or not targets:
        return None
    values = {t: (m or {}).get("kendall") for t, m in targets.items() if isinstance(m, Mapping)}
    return values if values and all(isinstance(v, (int, float)) for v in values.values()) else None


def holds_proxy(entry: Entry, canonical: str | None, kendall: Mapping[str, float] | None) -> bool:
    """Whether ``entry`` stands for the proxy of canonical form ``canonical`` and search Kendall ``kendall``
    (a run's ``best.json``): that genome, or the simpler one of the same behaviour the hall keeps."""
    if canonical is not None and entry.canonical == canonical:
        return True
    return kendall is not None and set(entry.kendall) == set(kendall) and all(
        abs(float(entry.kendall[t]) - float(kendall[t])) <= 1e-12 for t in kendall)


def write_hall_of_fame(run: RunDirectory, hall: HallOfFame) -> None:
    run.write_hall_of_fame(hall.to_json())


@dataclass
class LoadedHall:
    """A run's hall of fame and where it came from (``file`` or ``rebuilt``)."""

    hall: HallOfFame
    source: str
    note: str = ""


def load_hall_of_fame(run: RunDirectory | str | Path, capacity: int | None = None) -> LoadedHall:
    """The hall of fame of a run (finished or still going).

    ``hall_of_fame.json`` when present, readable and up to date with
    ``evaluations.jsonl``; otherwise rebuilt from ``evaluations.jsonl`` (a torn last
    line, as a run in progress can leave, is skipped). RunDirError when ``run`` is
    not a run directory.
    """
    run = run if isinstance(run, RunDirectory) else RunDirectory(run)
    run.config()  # RunDirError when this is not a run directory
    note, hall = "", None
    if run.file(HALL_OF_FAME).is_file():
        try:
            hall = HallOfFame.from_json(run.hall_of_fame())
        except (RunDirError, ValueError, KeyError, TypeError, GenomeError) as exc:
            note = f"{HALL_OF_FAME} unreadable ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__}); "
    try:
        records = run.evaluations()
    except RunDirError as exc:  # a bad line: the file's hall of fame still stands, else nothing can be rebuilt
        if hall is not None and (capacity is None or capacity == hall.capacity):
            return LoadedHall(hall, "file", f"{exc}; {HALL_OF_FAME} shown as it is")
        raise
    if hall is not None:
        if hall.evaluated >= len(records) and (capacity is None or capacity == hall.capacity):
            return LoadedHall(hall, "file")
        if hall.evaluated < len(records):
            note = f"{HALL_OF_FAME} behind {EVALUATIONS}; "
    hall = HallOfFame.from_evaluations(records, capacity=capacity or DEFAULT_CAPACITY)
    return LoadedHall(hall, "rebuilt", note + f"rebuilt from {EVALUATIONS} ({len(records)} evaluations)")


# ---------------------------------------------------------------- autoprox show
