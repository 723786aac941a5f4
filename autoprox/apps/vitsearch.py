"""Training-free ViT search: sample architectures under a parameter budget, score them
with any proxy, keep the best (TF-TAS and Auto-Prox's use of a proxy).

Two modes:

* :func:`run_vit_search` samples ``samples`` distinct architectures of a space within a
  parameter budget, scores each (statistics on the fly through the statistics cache,
  in parallel), and writes the ranked top K. Scores are appended to
  ``scores.jsonl`` as they come, so a stopped search resumes without rescoring.
* :func:`pick_on_bench` chooses among a benchmark's architectures instead, and says
  how good the pick really is (its true accuracy beside the best, the median and the
  expected random pick).
"""

from __future__ import annotations

import csv
import datetime as _dt
import functools
import io
import json
import math
import random
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np

from autoprox.core.atomic import (
    atomic_write_json, atomic_write_text, check_new_folder, json_safe, load_json, make_directory,
)
from autoprox.core.errors import VitSearchError
from autoprox.core.numbers import format_float, format_millions
from autoprox.core.parallel import Executor
from autoprox.data.benchmark import Benchmark
from autoprox.data.cache import StatisticsCache, StatsPlan
from autoprox.genome.tree import InvalidProxy
from autoprox.networks.statistics import InputSpec
from autoprox.proxies.proxy import Proxy
from autoprox.proxies.scoring import ScoringProxy
from autoprox.search.options import OPTIONS
from autoprox.search.rundir import ARCHIVE, read_json
from autoprox.core.errors import RunDirError
from autoprox.spaces.architectures import (
    arch_key,
    arch_to_config,
    count_macs,
    count_params,
    param_range,
    parse_arch,
    sample_arch,
)
from autoprox.core.errors import ArchitectureError
from autoprox.spaces.base import SearchSpace
from autoprox.spaces.registry import get_space

#: The papers' parameter budgets, in millions (AutoFormer-Ti 4-9M; PiT 2-25M).
PAPER_BUDGETS = {"autoformer": (4.0, 9.0), "pit": (2.0, 25.0)}
CONFIG = "vit_search.json"
SCORES = "scores.jsonl"
TOP_JSON = "top.json"
TOP_CSV = "top.csv"
#: What ``vit-search --on-bench --out DIR`` writes into DIR.
PICKS_JSON = "picks.json"



#: The proxy of a space that has no labelled benchmark: searched on every labelled space, and chosen by
#: how it ranked spaces its search never saw (docs/results-new-space.md).
UNLABELLED_DEFAULT = "recommended:any/joint"


def default_proxy(space: str) -> str:
    """The proxy ``vit-search`` uses when none is given: the space's own recommended proxy where the
    space has a labelled benchmark (AutoFormer-Ti, PiT), else :data:`UNLABELLED_DEFAULT` (AutoFormer-S/B,
    space files, timm models)."""
    from autoprox.data.benchmark import BENCH_FILE_NAMES

    return f"recommended:{space}/joint" if space in BENCH_FILE_NAMES else UNLABELLED_DEFAULT


def parse_budget(text: str) -> tuple[float, float]:
    """``"4:9"`` (millions of parameters) -> (4e6, 9e6)."""
    lo, sep, hi = text.partition(":")
    try:
        low, high = float(lo) * 1e6, float(hi) * 1e6
    except ValueError:
        raise VitSearchError(f"parameter budget looks like MIN:MAX in millions (e.g. 4:9), got {text!r}") from None
    if not sep or math.isnan(low) or math.isnan(high) or low > high or low < 0:  # NaN compares false to all
        raise VitSearchError(f"parameter budget looks like MIN:MAX in millions with MIN <= MAX, got {text!r}")
    return low, high


def paper_budgets_text() -> str:
    """The papers' budgets as ``--params`` takes them: ``autoformer 4:9, pit 2:25``."""
    return ", ".join(f"{space} {low:g}:{high:g}" for space, (low, high) in PAPER_BUDGETS.items())


def default_budget(space: str, num_classes: int = 100) -> tuple[float, float]:
    """The parameter budget of a search of ``space`` given none: the paper's (:data:`PAPER_BUDGETS`), else
    the whole space's range."""
    if space in PAPER_BUDGETS:
        low, high = PAPER_BUDGETS[space]
        return low * 1e6, high * 1e6
    return param_range(space, num_classes)


def check_budget(space: str, budget: tuple[float, float], num_classes: int) -> None:
    """Refuse a budget no architecture of ``space`` can meet, naming the feasible range."""
    lo, hi = param_range(space, num_classes)
    if budget[1] < lo or budget[0] > hi:
        raise VitSearchError(
            f"no {space} architecture has {format_millions(budget[0])} to {format_millions(budget[1])} parameters "
            f"({num_classes}-class head); the space spans {lo / 1e6:.2f}M to {hi / 1e6:.2f}M"
        )


#: A space with at most this many combinations of choices has its architectures within a budget counted
#: exactly before a search draws them (PiT: 4,320 in all); a larger one is drawn until :data:`STALL` draws
#: in a row find no new architecture.
COUNT_LIMIT = 200_000
#: Draws in a row that find no new architecture after which a larger space's budget is taken as exhausted.
STALL = 20_000
#: The most architectures one ViT search samples.
MAX_SAMPLES = 1_000_000


@functools.lru_cache(maxsize=16)
def _budget_archs(space: SearchSpace, budget: tuple[float, float], num_classes: int) -> int | None:
    archs = space.configurations(COUNT_LIMIT)
    if archs is None:
        return None
    return sum(budget[0] <= space.count_params(arch, num_classes) <= budget[1] for arch in archs)


def budget_archs(space: str, budget: tuple[float, float], num_classes: int = 100) -> int | None:
    """How many distinct architectures of ``space`` lie within ``budget`` (parameters, inclusive), counted
    exactly for a space of at most :data:`COUNT_LIMIT` combinations of choices; else None."""
    return _budget_archs(get_space(space), (float(budget[0]), float(budget[1])), num_classes)


def check_samples(space: str, count: int, budget: tuple[float, float], num_classes: int = 100) -> None:
    """VitSearchError (one line) unless ``count`` distinct architectures of ``space`` can be drawn within
    ``budget``: at least 1, at most :data:`MAX_SAMPLES`, and at most the budget holds where they are counted."""
    if count < 1:
        raise VitSearchError("the number of samples must be at least 1")
    if count > MAX_SAMPLES:
        raise VitSearchError(f"--samples {count} is more than a ViT search samples (at most {MAX_SAMPLES:,})")
    check_budget(space, budget, num_classes)
    held = budget_archs(space, budget, num_classes)
    if held is not None and count > held:
        raise VitSearchError(f"the budget holds only {held:,} distinct {space} architectures ({format_millions(budget[0])} "
                             f"to {format_millions(budget[1])} parameters): --samples at most {held}")


def sample_candidates(space: str, count: int, budget: tuple[float, float], seed: int,
                      num_classes: int = 100, max_draws_per_sample: int = 200) -> list:
    """``count`` distinct architectures within ``budget``, reproducible from ``seed``.

    VitSearchError before any draw when the budget holds fewer (:func:`check_samples`), or when the draws stop
    finding new ones (:data:`STALL` in a row) in a space too large to count."""
    check_samples(space, count, budget, num_classes)
    rng = random.Random(seed)
    chosen: dict[str, object] = {}
    draws = since_new = 0
    while len(chosen) < count:
        if draws >= count * max_draws_per_sample or since_new >= STALL:
            raise VitSearchError(
                f"only {len(chosen)} distinct {space} architectures found within "
                f"{format_millions(budget[0])} to {format_millions(budget[1])} parameters after {draws} draws "
                f"(the last {since_new} found no new one); widen the budget or ask fewer"
            )
        draws += 1
        try:
            arch = sample_arch(space, rng, budget, num_classes)
        except ArchitectureError as exc:
            raise VitSearchError(str(exc)) from None
        key = arch_key(arch)
        if key in chosen:
            since_new += 1
        else:
            chosen[key] = arch
            since_new = 0
    return list(chosen.values())


@dataclass(frozen=True)
class VitSearchSettings:
    """A sampled training-free search, as recorded in ``vit_search.json`` (the statistics settings' defaults are
    the option table's)."""

    space: str
    proxy: str
    samples: int = 400
    #: In parameters; None is the space's default (:func:`default_budget`).
    budget: tuple[float, float] | None = None
    classes: int = 100
    top: int = 5
    seed: int = 0
    input: str = OPTIONS["input"].default
    batch_size: int = OPTIONS["batch_size"].default
    stat_seeds: tuple[int, ...] = OPTIONS["stat_seeds"].default
    cache_dir: str | None = None
    cache_precision: str = OPTIONS["cache_precision"].default
    keep_statistics: bool = True
    workers: int = OPTIONS["workers"].default
    #: The target whose members score an ensemble proxy (None: a joint ensemble, or any other proxy).
    target: str | None = None

    def __post_init__(self) -> None:
        if self.budget is None:
            object.__setattr__(self, "budget", default_budget(self.space, self.classes))

    def to_json(self) -> dict:
        data = asdict(self)
        data["budget"] = list(self.budget)
        data["stat_seeds"] = list(self.stat_seeds)
        if self.target is None:  # as recorded before ensembles, so that older searches resume
            data.pop("target")
        return data

    def identity(self) -> dict:
        """The fields that decide which scores a run holds (a resume must agree on them)."""
        data = self.to_json()
        for name in ("top", "workers", "cache_dir"):
            data.pop(name)
        return data


def _identity_differences(recorded: object, given: dict) -> str:
    """What a resume's settings change of the recorded search, in words: ``records samples 30 (given 31)``, each
    field that differs by its option's name; ``differs`` for a record that holds no such fields."""
    if not isinstance(recorded, dict):
        return "differs"
    parts = [f"{_option(name)} {_shown(recorded.get(name), name)} (given {_shown(value, name)})"
             for name, value in given.items() if recorded.get(name) != value]
    parts += [f"{_option(name)} {_shown(value, name)} (not given)" for name, value in recorded.items()
              if name not in given]
    return "records " + ", ".join(parts) if parts else "differs"


def _option(name: str) -> str:
    """The option of a recorded field (``budget`` is ``--params``)."""
    return "params" if name == "budget" else name.replace("_", "-")


def _shown(value: object, name: str = "") -> str:
    """A recorded setting as the command line writes it: the budget as ``--params`` does (MIN:MAX in millions), a
    list as a comma list, a number without a '.0'."""
    if name == "budget" and isinstance(value, list) and len(value) == 2 and all(
            isinstance(v, (int, float)) for v in value):
        return ":".join(f"{v / 1e6:g}" for v in value)
    if isinstance(value, list):
        return ",".join(_shown(v) for v in value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def raw_scores(proxy: ScoringProxy, archs: Sequence, settings: VitSearchSettings, spec: InputSpec,
               teacher=None, executor: Executor | None = None) -> list[tuple[object, float, str]]:
    """(raw value, seconds, error) for each architecture; failures never stop the others.

    The proxy's :meth:`~autoprox.proxies.scoring.ScoringProxy.candidate_scores` (the scoring core's raw values,
    one call per statistics seed), with what is the ViT search's own: the head and the statistics have
    ``settings.classes`` classes, statistics are kept in the cache only with ``settings.keep_statistics``, and
    an ensemble scores with ``settings.target``'s members (None: its joint ones). What an architecture's record
    holds: for a set-level proxy (TVT), its raw value per seed, combined over the whole candidate set at the end
    (:func:`final_scores`); for any other, its score, the mean over seeds.
    """
    cache = StatisticsCache(settings.cache_dir, settings.cache_precision)
    workers = executor if executor is not None else settings.workers
    return proxy.candidate_scores(archs, spec, settings.stat_seeds, cache, settings.target, workers=workers,
                                  keep_statistics=settings.keep_statistics, head_classes=settings.classes,
                                  teacher=teacher)


def final_scores(proxy: Proxy, raws: Sequence, teacher=None) -> np.ndarray:
    """Scores from the records' raw values: a set-level proxy's normalised over the whole
    candidate set, seed by seed, then averaged over seeds; any other's as recorded."""
    if proxy.set_level:
        seeds = len(raws[0])
        return np.mean([proxy.set_scores([r[s] for r in raws]) for s in range(seeds)], axis=0)
    # a list is a record written before scores were averaged per architecture (zoo proxies)
    return np.asarray([np.mean(r) if isinstance(r, list) else r for r in raws], dtype=np.float64)


def check_vit_search_out(out: str | Path) -> None:
    """RunDirError (one line, before any work) unless a ViT search can be written into ``out``: a folder holding
    one (its ``vit_search.json``: resumed, or refused if its settings differ), or a new or empty folder.
    A folder holding anything else is the user's: its files are left as they are, as ``search --out`` leaves them.
    """
    if not (Path(out) / CONFIG).is_file():
        check_new_folder(out, f"ViT search ({CONFIG})")


def run_vit_search(settings: VitSearchSettings, proxy: ScoringProxy, out: str | Path, teacher=None,
                   progress: Callable[[int, int], None] | None = None, chunk: int | None = None,
                   stop_after: int | None = None, executor: Executor | None = None,
                   log: Callable[[str], None] | None = None) -> dict:
    """Sample, score and rank; resumable. Returns the summary (also written to ``top.json``).

    ``out`` holding a ViT search (its ``vit_search.json``) of the same settings is resumed; a new search
    starts only in a new or empty folder (RunDirError for one holding other files, which are left as they are).
    ``log`` is given one line when a search is resumed (how many architectures it had scored).

    ``stop_after`` stops once that many architectures are scored (as an interruption would).
    ``executor`` (a Dask cluster, ``--scheduler``) scores architectures instead of
    ``settings.workers`` local processes; the scores do not depend on it.
    """
    out = Path(out)
    config_path = out / CONFIG
    check_vit_search_out(out)
    spec = InputSpec.parse(settings.input, settings.batch_size)
    candidates = sample_candidates(settings.space, settings.samples, settings.budget, settings.seed, settings.classes)
    resumed = config_path.is_file()
    if resumed:
        recorded = read_json(config_path)
        if recorded.get("identity") != json_safe(settings.identity()):
            raise RunDirError(f"{out} holds a different ViT search ({config_path.name} "
                              f"{_identity_differences(recorded.get('identity'), json_safe(settings.identity()))}); "
                              "choose another --out, or give its settings to resume it")
        if (out / ARCHIVE).is_file() and not (out / SCORES).exists():  # a committed search, packed (runs/README.md)
            raise RunDirError(f"{out}: its {SCORES} is packed in {out / ARCHIVE}; unpack it first: "
                              f"python scripts/runs_archive.py unpack {out}")
    else:
        make_directory(out)
        atomic_write_json(config_path, {
            "settings": settings.to_json(), "identity": json_safe(settings.identity()), "proxy": proxy.name,
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), "command": sys.argv,
        })
    done = read_scores(out / SCORES, candidates, proxy.set_level, len(settings.stat_seeds))
    if resumed and log:
        log(f"resuming with {len(done)} of {len(candidates)} architectures scored in {out}")
    todo = [i for i in range(len(candidates)) if i not in done]
    step = chunk or max(8, 4 * (executor.workers if executor is not None else settings.workers))
    if progress:
        progress(len(done), len(candidates))
    with open(out / SCORES, "a", encoding="utf-8") as scores_file:
        for start in range(0, len(todo), step):
            if stop_after is not None and len(done) >= stop_after:
                break
            indices = todo[start:start + step]
            began = time.perf_counter()
            outcomes = raw_scores(proxy, [candidates[i] for i in indices], settings, spec, teacher, executor)
            wall = time.perf_counter() - began
            for index, (raw, seconds, error) in zip(indices, outcomes):
                record = {"index": index, "arch": arch_to_config(candidates[index]), "raw": raw,
                          "seconds": seconds, "wall": wall / len(indices), "error": error}
                scores_file.write(json.dumps(json_safe(record)) + "\n")
                done[index] = record
            scores_file.flush()
            if progress:
                progress(len(done), len(candidates))
    finished = len(done) == len(candidates)
    summary = summarise(settings, proxy, candidates, done, finished, teacher)
    atomic_write_json(out / TOP_JSON, summary)
    atomic_write_text(out / TOP_CSV, top_csv(summary["top"]))
    return summary


def read_scores(path: Path, candidates: Sequence, set_level: bool, seeds: int) -> dict[int, dict]:
    """The records of a ViT search's ``scores.jsonl`` by architecture index (a later record of an index replaces an
    earlier one). A line that does not parse is skipped (a write cut short, which a resume appends after), and its
    architecture is scored again; a record that parses but is not what the search writes (an index that is not one of
    ``candidates``, another architecture than the index's, a score that is no number: a hand edit, a file of another
    search) is refused with RunDirError naming the line, never read as what it is not."""
    done: dict[int, dict] = {}
    if not path.is_file():
        return done
    with open(path, encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = load_json(line)
            except ValueError:
                continue
            problem = _score_record_problem(record, candidates, set_level, seeds)
            if problem:
                raise RunDirError(f"{path}: line {number}: {problem}; remove the line to score that architecture "
                                  "again")
            done[record["index"]] = record
    return done


def _is_score(value) -> bool:
    """A recorded raw value: a number, or None (a NaN the proxy gave, as JSON records it)."""
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))


def _score_record_problem(record, candidates: Sequence, set_level: bool, seeds: int) -> str | None:
    """What is wrong with one ``scores.jsonl`` record, or None."""
    if not isinstance(record, dict):
        return f"not a score record (a JSON object), got {record!r:.60}"
    index, error, raw = record.get("index"), record.get("error", ""), record.get("raw")
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(candidates):
        return f"'index' must be an architecture index, 0 to {len(candidates) - 1}, got {index!r:.60}"
    if json.loads(json.dumps(arch_to_config(candidates[index]))) != record.get("arch"):
        return f"its 'arch' is not architecture {index} of this search (a record of another search?)"
    if not isinstance(error, str):
        return f"'error' must be a string, got {error!r:.60}"
    wall = record.get("wall")
    if wall is not None and not (_is_score(wall) and math.isfinite(wall) and wall >= 0):
        return f"'wall' must be a number of seconds, got {wall!r:.60}"
    if error:
        return None
    if set_level:
        if not (isinstance(raw, list) and len(raw) == seeds and all(_is_score(v) for v in raw)):
            return f"'raw' must hold one value per statistics seed ({seeds}), got {raw!r:.60}"
    elif not (_is_score(raw) or (isinstance(raw, list) and raw and all(_is_score(v) for v in raw))):
        return f"'raw' must be the proxy's score (a number), got {raw!r:.60}"
    return None


def summarise(settings: VitSearchSettings, proxy: ScoringProxy, candidates: Sequence, done: Mapping[int, dict],
              finished: bool, teacher=None) -> dict:
    """Rank what is scored so far; the top K with parameters, MACs, score and config."""
    scored = sorted(i for i, r in done.items() if not r.get("error"))
    failures = [{"index": i, "arch": done[i]["arch"], "error": done[i]["error"]} for i in sorted(done) if done[i].get("error")]
    scores = final_scores(proxy, [done[i]["raw"] for i in scored], teacher) if scored else np.array([])
    order = sorted(range(len(scored)), key=lambda k: (-scores[k], scored[k]))
    top = []
    for rank, k in enumerate(order[: settings.top], 1):
        arch = candidates[scored[k]]
        top.append({"rank": rank, "index": scored[k], "score": float(scores[k]),
                    "params": count_params(arch, settings.classes), "macs": count_macs(arch, settings.classes),
                    "arch": arch_to_config(arch)})
    total = sum(float(r.get("wall") or 0.0) for r in done.values())
    return json_safe({
        "space": settings.space, "proxy": proxy.name, "samples": len(candidates), "scored": len(scored),
        "failed": len(failures), "finished": finished,
        "budget_millions": [settings.budget[0] / 1e6, settings.budget[1] / 1e6],
        "search_seconds": total, "seconds_per_architecture": total / len(done) if done else None,
        "top": top, "failures": failures,
    })


def top_csv(top: Sequence[Mapping]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["rank", "score", "params", "macs", "arch"])
    for row in top:
        writer.writerow([row["rank"], f"{row['score']:.10g}", row["params"], row["macs"], json.dumps(row["arch"])])
    return buffer.getvalue()


# ------------------------------------------------------------------ choosing on a benchmark


@dataclass
class BenchPick:
    """How good one proxy's pick among a benchmark's architectures really is."""

    proxy: str
    index: int | None
    arch: dict | None
    targets: dict = field(default_factory=dict)
    error: str = ""


def is_picks_file(head: bytes, tail: bytes = b"") -> bool:
    """Whether a file beginning with ``head`` is a :data:`PICKS_JSON` ``vit-search --on-bench`` wrote (a JSON
    list of :class:`BenchPick`, written with an indent of 2)."""
    return head.startswith(b'[\n  {\n    "proxy": ') or head.strip() == b"[]"


def pick_quality(accuracies: np.ndarray, pick: int) -> dict:
    """The pick's accuracy beside the best, median and expected random pick, and its percentile.

    The percentile is the share of architectures (with a measured accuracy) whose accuracy
    is at most the pick's: 100 means the pick is the best one.
    """
    measured = accuracies[~np.isnan(accuracies)]
    value = float(accuracies[pick])
    if math.isnan(value) or not len(measured):
        return {"pick": None, "best": float(measured.max()) if len(measured) else None,
                "median": float(np.median(measured)) if len(measured) else None,
                "random": float(measured.mean()) if len(measured) else None, "percentile": None}
    return {"pick": value, "best": float(measured.max()), "median": float(np.median(measured)),
            "random": float(measured.mean()), "percentile": float(100.0 * np.mean(measured <= value))}


def proxy_label(proxy: ScoringProxy) -> str:
    """A short name for tables: the file a proxy came from, else its name."""
    return str(proxy.provenance.get("file") or proxy.name) if proxy.provenance else proxy.name


def pick_on_bench(proxies: Sequence[ScoringProxy], bench: Benchmark, indices: Sequence[int],
                  targets: Sequence[str], plan: StatsPlan, cache: StatisticsCache, workers: int = 1, teacher=None,
                  progress_factory: Callable[[str], Callable[[int, int], None]] | None = None,
                  target: str | None = None) -> list[BenchPick]:
    """For each proxy, the benchmark architecture it scores highest, and how good it really is.

    An ensemble scores with its joint members, or ``target``'s (ProxyError when it needs one)."""
    archs = [bench.archs[i] for i in indices]
    picks = []
    for proxy in proxies:
        progress = progress_factory(proxy.name) if progress_factory else None
        try:
            # --target chooses a per-target ensemble's members; any other proxy scores as without it
            values = proxy.scores(archs, cache, proxy.scoring_plan(plan), target if proxy.targets else None,
                                  workers=workers, progress=progress, teacher=teacher)
        except InvalidProxy as exc:
            picks.append(BenchPick(proxy_label(proxy), None, None, error=str(exc)))
            continue
        best = int(np.argmax(values))
        chosen = indices[best]
        picks.append(BenchPick(proxy_label(proxy), chosen, arch_to_config(bench.archs[chosen]), {
            t: pick_quality(bench.accuracies[t][list(indices)], best) for t in targets
        }))
    return picks


def picks_table(picks: Sequence[BenchPick], targets: Sequence[str]) -> str:
    """Markdown: per proxy, the pick's accuracy and percentile per target (Auto-Prox Table 3's form)."""
    header = "| proxy | params of pick | " + " | ".join(f"{t} acc (pct)" for t in targets) + " |"
    lines = [header, "|" + "---|" * (2 + len(targets))]
    reference = next((p for p in picks if not p.error), None)
    for pick in picks:
        if pick.error:
            lines.append(f"| {pick.proxy} | failed: {pick.error[:60]} |" + " |" * len(targets))
            continue
        params = count_params(parse_arch(pick.arch)) / 1e6
        cells = []
        for t in targets:
            q = pick.targets[t]
            accuracy = format_float(q["pick"], 2, signed=False)
            cells.append(accuracy if q["pick"] is None else f"{accuracy} ({q['percentile']:.0f})")
        lines.append(f"| {pick.proxy} | {params:.2f}M | " + " | ".join(cells) + " |")
    if reference:
        for label in ("best", "median", "random"):
            cells = [format_float(reference.targets[t][label], 2, signed=False) for t in targets]
            name = {"best": "best architecture", "median": "median architecture",
                    "random": "random pick (expected)"}[label]
            lines.append(f"| *{name}* | | " + " | ".join(cells) + " |")
    return "\n".join(lines)
