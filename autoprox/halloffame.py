"""The hall of fame of a search: the best distinct proxies it has ever evaluated.

The population only holds what survived; a good child that missed the acceptance
margin, or a member pushed out later, is still worth reading. The hall of fame
keeps, over every genome a search evaluated:

* ``entries``: the ``capacity`` best distinct valid genomes (distinct by canonical
  form), ranked by search-split JCM (ties: fewer nodes first, then the canonical
  string), each with its per-target Kendall tau, its complexity and the iteration it
  was first evaluated in;
* ``pareto``: the Pareto front of JCM against complexity over every valid genome
  seen (no other genome has a JCM at least as high with at most as many nodes, one
  of the two strictly), ordered by complexity.

Complexity is the node count (:func:`autoprox.genome.tree_size`) of the genome's
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

from autoprox.atomic import atomic_write_json
from autoprox.fitness import FitnessRecord
from autoprox.genome import GenomeError, canonical_string, genome_to_string, parse_genome, tree_size
from autoprox.rundir import RunDirError, RunDirectory, read_json

HALL_OF_FAME = "hall_of_fame.json"
FORMAT = "autoprox-hall-of-fame"
FORMAT_VERSION = 1
DEFAULT_CAPACITY = 20


@dataclass(frozen=True)
class Entry:
    """One proxy of the hall of fame (search-split figures)."""

    genome: str
    canonical: str
    jcm: float
    kendall: dict[str, float]
    complexity: int
    iteration: int

    def sort_key(self) -> tuple:
        return (-self.jcm, self.complexity, self.canonical)

    def dominates(self, other: "Entry") -> bool:
        """At least as good on both axes (higher JCM, fewer nodes), strictly on one."""
        return (self.jcm >= other.jcm and self.complexity <= other.complexity
                and (self.jcm > other.jcm or self.complexity < other.complexity))

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping) -> "Entry":
        """Read an entry from disk, checking every field (the genome is re-parsed, never evaluated)."""
        if not isinstance(data, Mapping):
            raise ValueError("a hall-of-fame entry must be an object")
        tree = parse_genome(data["genome"])
        jcm = float(data["jcm"])
        if not math.isfinite(jcm):
            raise ValueError("a hall-of-fame entry has no finite JCM")
        kendall = {str(t): float(v) for t, v in dict(data["kendall"]).items()}
        return cls(genome_to_string(tree), canonical_string(tree), jcm, kendall,
                   int(data["complexity"]), int(data["iteration"]))


def complexity_of(canonical: str) -> int:
    """Node count of a canonical genome string."""
    return tree_size(parse_genome(canonical))


@dataclass
class HallOfFame:
    """Best distinct proxies and the JCM/complexity Pareto front, updated one record at a time."""

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
        if not record.valid or record.jcm is None or not math.isfinite(record.jcm):
            return False
        self.valid += 1
        if not self.targets:
            self.targets = list(record.kendall)
        entry = Entry(record.genome, record.canonical, float(record.jcm), dict(record.kendall),
                      complexity_of(record.canonical), int(iteration))
        changed = self._enter_top(entry)
        changed = self._enter_front(entry) or changed
        return changed

    def _enter_top(self, entry: Entry) -> bool:
        if any(e.canonical == entry.canonical for e in self.entries):
            return False
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
        self.pareto.sort(key=lambda e: (e.complexity, -e.jcm, e.canonical))
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
        """Read a ``hall_of_fame.json`` object; ValueError/KeyError/TypeError/GenomeError when malformed."""
        if not isinstance(data, Mapping) or data.get("format") != FORMAT:
            raise ValueError("not a hall-of-fame file")
        if int(data.get("version", 0)) > FORMAT_VERSION:
            raise ValueError(f"hall-of-fame format version {data['version']} is newer than this autoprox")
        return cls(
            capacity=int(data["capacity"]),
            targets=[str(t) for t in data["targets"]],
            entries=[Entry.from_json(e) for e in data["entries"]],
            pareto=[Entry.from_json(e) for e in data["pareto"]],
            evaluated=int(data["evaluated"]),
            valid=int(data["valid"]),
            iteration=int(data["iteration"]),
        )

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


def write_hall_of_fame(run: RunDirectory, hall: HallOfFame) -> None:
    atomic_write_json(run.file(HALL_OF_FAME), hall.to_json())


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
    records = run.evaluations()
    path = run.file(HALL_OF_FAME)
    note = ""
    if path.is_file():
        try:
            hall = HallOfFame.from_json(read_json(path))
        except (RunDirError, ValueError, KeyError, TypeError, GenomeError) as exc:
            note = f"{HALL_OF_FAME} unreadable ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__}); "
        else:
            if hall.evaluated >= len(records) and (capacity is None or capacity == hall.capacity):
                return LoadedHall(hall, "file")
            if hall.evaluated < len(records):
                note = f"{HALL_OF_FAME} behind {Path(run.file('evaluations.jsonl')).name}; "
    hall = HallOfFame.from_evaluations(records, capacity=capacity or DEFAULT_CAPACITY)
    return LoadedHall(hall, "rebuilt", note + f"rebuilt from evaluations.jsonl ({len(records)} evaluations)")


# ---------------------------------------------------------------- autoprox show


def _tau(value) -> str:
    return "n/a" if value is None or (isinstance(value, float) and not math.isfinite(value)) else f"{value:+.3f}"


def _best_json(run: RunDirectory) -> dict | None:
    path = run.file("best.json")
    if not path.is_file():
        return None
    try:
        return read_json(path)
    except RunDirError:
        return None


#: Beyond-size table: (header, key in a beyond_size target block, width).
_BEYOND_COLUMNS = (("proxy", "kendall", 8), ("w/ params", "kendall_with_params", 11),
                   ("w/ depth", "kendall_with_depth", 10), ("partial|params", "partial_given_params", 16),
                   ("partial|depth", "partial_given_depth", 15))
BEYOND_SIZE_LEGEND = ("  Kendall tau-b; w/ params, w/ depth: the proxy's own Kendall with the parameter count, the depth; "
                      "partial|params, partial|depth: its partial Kendall with the target given them;\n"
                      "  bar: the best coarse descriptor for the target (params, depth, width, macs) on the same "
                      "architectures, the Kendall the proxy has to clear")


def format_beyond_size(blocks: Mapping[str, Mapping], label: str = "split") -> list[str]:
    """Lines of a beyond-size table: one row per (row label, target).

    ``blocks`` maps a row label (a split, a hall-of-fame rank) to a
    :func:`autoprox.descriptors.beyond_size` report ({target: figures}) or to
    ``{"invalid": reason}``.
    """
    width = max([len(label)] + [len(str(k)) for k in blocks])
    targets = [t for block in blocks.values() for t in block if t != "invalid"]
    target_width = max([6] + [len(t) for t in targets])
    header = f"  {label:<{width}}  {'target':<{target_width}}" + "".join(
        f"{name:>{w}}" for name, _, w in _BEYOND_COLUMNS) + f"  {'bar (tau)':<18}beats it?"
    lines = [header]
    for name, block in blocks.items():
        if "invalid" in block:
            lines.append(f"  {name:<{width}}  invalid: {block['invalid']}")
            continue
        for target, figures in block.items():
            bar = figures.get("bar") or {}
            bar_text = f"{bar.get('descriptor', '?')} ({_tau(bar.get('kendall'))})"
            beats = figures.get("beats_bar")
            lines.append(f"  {name:<{width}}  {target:<{target_width}}" + "".join(
                f"{_tau(figures.get(key)):>{w}}" for _, key, w in _BEYOND_COLUMNS)
                + f"  {bar_text:<18}{'n/a' if beats is None else ('yes' if beats else 'no')}")
    return lines


def hall_beyond_size(run: RunDirectory, entries: Iterable[Entry], targets: Iterable[str] = (),
                     progress: bool = True) -> tuple[dict[str, dict], int]:
    """:func:`autoprox.search.beyond_size_of` of each entry on the run's search split.

    The benchmark, the split and the statistics plan are the run's (``config.json``);
    scores come from the statistics cache (what is missing is computed first, with a
    progress line on stderr). Only the search split is read. Returns ({canonical genome:
    report}, number of search architectures).
    """
    import sys

    from autoprox.benchmark import BenchmarkError, load_benchmark, split_benchmark
    from autoprox.cache import StatisticsCache, build_cache
    from autoprox.progress import Progress
    from autoprox.proxies import Proxy
    from autoprox.search import SearchSettings, beyond_size_of, stats_plan

    config = run.config()
    try:
        settings = SearchSettings.from_json(config["settings"])
    except (KeyError, TypeError, ValueError) as exc:
        raise RunDirError(f"{run.file('config.json')}: no readable search settings ({exc})") from None
    bench = load_benchmark(settings.bench)
    recorded = (config.get("benchmark") or {}).get("sha256")
    if recorded and bench.sha256 != recorded:
        raise BenchmarkError(f"{settings.bench} changed since the run was made (sha256 differs)")
    targets = bench.check_targets(list(settings.targets) or list(targets) or bench.default_targets())
    indices = split_benchmark(len(bench), settings.split_seed, settings.search_fraction).search
    plan = stats_plan(settings, targets)
    cache = StatisticsCache(settings.cache_dir, settings.cache_precision)
    entries = list(entries)
    requests = plan.requests([bench.archs[i] for i in indices])
    missing = sum(not cache.contains(r) for r in requests)
    if missing:
        if progress:
            print(f"beyond size: computing {missing} missing statistics entries of the search split", file=sys.stderr)
        build_cache(cache, requests, workers=settings.workers,
                    progress=Progress("statistics", every=15) if progress else None)
    ticker = Progress(f"beyond size of {len(entries)} proxies, search split", every=5) if progress else None
    reports = {}
    if ticker:
        ticker(0, len(entries))
    for done, entry in enumerate(entries, start=1):
        proxy = Proxy(entry.genome, parse_genome(entry.genome))
        reports[entry.canonical] = beyond_size_of(proxy, bench, indices, targets, plan, cache)
        if ticker:
            ticker(done, len(entries))
    return reports, len(indices)


def show_run(path: str | Path, top: int = 10, simplify: bool = True, latex: bool = False,
             timeout: float | None = None, save: bool = False, beyond_size: bool = False) -> str:
    """The text ``autoprox show`` prints: the hall of fame as a table, its notes, the Pareto front, and
    the beyond-size report of ``best.json`` (``beyond_size``: also computed for each shown entry on the
    search split)."""
    from autoprox.simplify import DEFAULT_TIMEOUT, LEGEND, readable_formulas, statistics_for_check

    if top < 1:
        raise ValueError(f"--top must be at least 1, got {top}")
    run = RunDirectory(path)
    config = run.config()
    loaded = load_hall_of_fame(run)
    hall = loaded.hall
    if save:
        write_hall_of_fame(run, hall)
    best = _best_json(run)
    best_canonical = None
    if best and isinstance(best.get("genome"), str):
        best_canonical = canonical_string(parse_genome(best["genome"]))
    log = run.log()
    iterations = (config.get("settings", {}).get("evolution") or {}).get("iterations")
    done = log[-1].get("iteration", 0) if log else 0
    status = "finished" if best and best.get("finished") else "in progress or interrupted"
    lines = [f"run {run.path}: {config.get('space', '?')}, iteration {done} of {iterations} ({status}), "
             f"{hall.evaluated} genomes evaluated, {hall.valid} valid"]
    source = f"{HALL_OF_FAME}" if loaded.source == "file" else loaded.note
    rows = hall.entries[:top]
    if not rows:
        lines.append(f"hall of fame ({source}): empty, no valid genome evaluated yet")
        return "\n".join(lines) + "\n"
    front = [e for e in hall.pareto if all(e.canonical != r.canonical for r in rows)]
    check = statistics_for_check(config) if simplify else None
    formulas = readable_formulas([e.genome for e in rows + front], check_stats=check,
                                 timeout=timeout or DEFAULT_TIMEOUT, simplify=simplify)
    by_canonical = {e.canonical: f for e, f in zip(rows + front, formulas)}
    targets = hall.targets
    lines.append(f"hall of fame ({source}); top {len(rows)} of {len(hall.entries)} kept; "
                 "search-split figures; * = the proxy best.json holds")
    widths = [max(len(t), 6) for t in targets]
    header = f"{'rank':>5}  {'JCM':>6}  " + "  ".join(f"{t:>{w}}" for t, w in zip(targets, widths)) + "  nodes  formula"
    lines.append(header)
    first_rank: dict[str, int] = {}
    for rank, entry in enumerate(rows, start=1):
        mark = "*" if entry.canonical == best_canonical else " "
        taus = "  ".join(f"{_tau(entry.kendall.get(t)):>{w}}" for t, w in zip(targets, widths))
        text = by_canonical[entry.canonical].text
        same = f"   (same formula as #{first_rank[text]})" if text in first_rank else ""
        first_rank.setdefault(text, rank)
        lines.append(f"{rank:>4}{mark}  {entry.jcm:+.3f}  {taus}  {entry.complexity:>5}  {text}{same}")
    if best is not None and best_canonical is not None and all(r.canonical != best_canonical for r in rows):
        rank = hall.rank_of(best_canonical)
        where = f"rank {rank} of the hall of fame" if rank else "not in the hall of fame"
        lines.append(f"best.json holds {best['genome']} ({where})")
    elif best is None:
        lines.append("best.json not written yet (the run is in progress)")
    notes = []
    for rank, entry in enumerate(rows, start=1):
        formula = by_canonical[entry.canonical]
        if formula.outer:
            notes.append(f"  #{rank}: {formula.outer_text()}")
        if formula.note:
            notes.append(f"  #{rank}: {formula.note}")
    if notes:
        lines += ["notes:"] + notes
    lines.append("Pareto front of JCM against complexity (every valid genome seen):")
    for entry in hall.pareto:
        rank = hall.rank_of(entry.canonical)
        label = f"#{rank}" if rank and rank <= len(rows) else by_canonical[entry.canonical].text
        lines.append(f"  {entry.complexity:>3} nodes  JCM {entry.jcm:+.3f}  {label}")
    if latex:
        lines.append("LaTeX:")
        lines += [f"  #{rank}: {by_canonical[e.canonical].latex}" for rank, e in enumerate(rows, start=1)]
    lines.append(LEGEND)
    if best is not None:
        block = best.get("beyond_size")
        if isinstance(block, Mapping) and block:
            lines.append("beyond size of the proxy best.json holds (*), on the search split and the test split "
                         "(the test split chose nothing):")
            lines += format_beyond_size({name: block[name] for name in ("search", "test") if name in block})
            if not beyond_size:  # else once, after the hall of fame's block
                lines.append(BEYOND_SIZE_LEGEND)
        else:
            lines.append("best.json has no beyond-size report (written before it existed)"
                         + ("" if beyond_size else "; --beyond-size computes one for the hall of fame"))
    if beyond_size:
        reports, count = hall_beyond_size(run, rows, hall.targets)
        lines.append(f"beyond size of the hall of fame, computed now on the search split ({count} architectures, "
                     "the run's statistics):")
        labels = {}
        for rank, entry in enumerate(rows, start=1):
            mark = "*" if entry.canonical == best_canonical else ""
            labels[f"#{rank}{mark}"] = reports[entry.canonical]
        lines += format_beyond_size(labels, label="rank")
        lines.append(BEYOND_SIZE_LEGEND)
    return "\n".join(lines) + "\n"
