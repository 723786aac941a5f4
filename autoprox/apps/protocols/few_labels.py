"""The sample-efficiency protocol: ``autoprox evaluate --few-labels 20,50,100 --repeats R --bench T.csv ...``.

For each proxy table, each k and each of R draws, k labelled rows are drawn (seeded by the protocol's seed, the
table's name, k and the draw; only rows whose target is a number are drawn) and every method is fitted on them
alone, then judged by Kendall tau-b on the table's other labelled rows. The methods (:data:`FEW_LABEL_METHODS`,
a registry) are given the table's proxy columns on every row and the labels of the k rows only:

* ``size``: the better of ``params`` and ``flops``, chosen by Kendall on the k rows;
* ``best-column``: the proxy column of the largest Kendall on the k rows, either sign;
* ``ridge``: ridge least squares of the labels' ranks on the columns' ranks (a column's rank over every row,
  scaled to (0, 1], an empty cell 0.5), the penalty among 12 from 0.01 to 1000 by leave-one-out;
* ``forest``: scikit-learn's random forest on the same ranks (300 trees, the draw's seed, other settings its
  defaults; the optional ``bench`` extra);
* ``engine``: the table search (:func:`autoprox.search.table_search.fit_table_proxy`, its defaults).

A table given with several targets is one entry per target, ``TABLE/TARGET`` (the same draws for each); a table
with one target is keyed by its name. For each (table, k) the record holds every draw's figures, the mean per method, and the engine's paired
difference to each other method (mean, a 95 % bootstrap interval over the draws, draws ahead; no interval, None,
from fewer than :data:`MIN_INTERVAL_DRAWS` draws). It is written
atomically after each table, and the same command goes on from it.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from autoprox.apps.protocols.runner import CutProtocol, check_recorded, run_cuts
from autoprox.core.atomic import atomic_write_json, check_new_folder, json_safe, load_json, read_json_file
from autoprox.core.correlation import kendall_or_zero
from autoprox.core.errors import AutoproxError, BenchmarkError, ConfigError, RunDirError, one_line
from autoprox.core.progress import Progress
from autoprox.core.registry import Registry
from autoprox.data.proxy_tables import ProxyTable
from autoprox.proxies.weighted_fit import usable_columns
from autoprox.search.conversions import distinct, sequence
from autoprox.search.table_search import MIN_LABELS

__all__ = ["DEFAULT_DRAWS", "FEW_LABELS_FILE", "FEW_LABEL_METHODS", "FewLabelMethod", "MIN_INTERVAL_DRAWS", "column_rank_matrix",
           "draws_interval", "entries_text", "entry_names", "largest_k", "register_few_label_method", "ridge_on_ranks", "run_few_labels"]

#: The record a few-label protocol writes in its folder.
FEW_LABELS_FILE = "few_labels.json"
FORMAT = "autoprox-few-labels/1"
#: Smallest k the protocol takes.
MIN_K = 5
#: Draws per (table, k) when ``evaluate --few-labels`` is not given ``--repeats``.
DEFAULT_DRAWS = 10
#: A k above this share of a table's labelled rows is skipped there (too few rows left to judge).
SKIP_SHARE = 0.6
#: Fewer draws than this give no bootstrap interval: the percentile bootstrap of 2 draws is their [min, max], often
#: of zero width, nothing like a 95 % interval.
MIN_INTERVAL_DRAWS = 5


@dataclass(frozen=True)
class FewLabelMethod:
    """A way of ranking a table's rows from k labels: ``fit(columns, labels, seed) -> scores`` (every row; labels
    NaN outside the k rows; higher: predicted better)."""

    name: str
    fit: Callable[[Mapping[str, np.ndarray], np.ndarray, int], np.ndarray]
    description: str


FEW_LABEL_METHODS: Registry[str, FewLabelMethod] = Registry("few-label method", unknown=ConfigError,
                                                            describe=lambda entry: entry.description)


def register_few_label_method(name: str, fit: Callable, description: str) -> FewLabelMethod:
    """Register a few-label method under ``name`` (a taken name is a RegistryError)."""
    return FEW_LABEL_METHODS.add(name, FewLabelMethod(name, fit, description))


def column_rank_matrix(columns: Mapping[str, np.ndarray]) -> np.ndarray:
    """Each usable column's rank over every row scaled to (0, 1], an empty cell 0.5 (rows by columns)."""
    from scipy.stats import rankdata  # on first use: --help imports this module

    ranked = []
    for name in usable_columns(columns):
        values = np.asarray(columns[name], dtype=np.float64)
        finite = np.isfinite(values)
        out = np.full(len(values), 0.5)
        out[finite] = rankdata(values[finite]) / finite.sum()
        ranked.append(out)
    return np.column_stack(ranked)


def ridge_on_ranks(features: np.ndarray, targets: np.ndarray, alphas=tuple(np.logspace(-2, 3, 12))
                   ) -> Callable[[np.ndarray], np.ndarray]:
    """Ridge of ``targets`` on ``features`` (no standardisation), the penalty of ``alphas`` with the least
    closed-form leave-one-out error; returns the fitted predictor."""
    mean, target_mean = features.mean(axis=0), targets.mean()
    centred, centred_targets = features - mean, targets - target_mean
    best = None
    for alpha in alphas:
        hat = centred @ np.linalg.solve(centred.T @ centred + alpha * np.eye(features.shape[1]), centred.T)
        residual = (centred_targets - hat @ centred_targets) / (1 - np.diag(hat) + 1e-12)
        error = float(residual @ residual)
        if best is None or error < best[0]:
            best = (error, alpha)
    weights = np.linalg.solve(centred.T @ centred + best[1] * np.eye(features.shape[1]), centred.T @ centred_targets)
    return lambda other: (other - mean) @ weights


def _labelled(labels: np.ndarray) -> np.ndarray:
    return np.flatnonzero(np.isfinite(labels))


def _size(columns, labels, seed):
    rows = _labelled(labels)
    present = [c for c in ("params", "flops") if c in columns]
    if not present:
        raise ConfigError("the table has neither params nor flops")
    best = max(present, key=lambda c: (kendall_or_zero(columns[c][rows], labels[rows]), -present.index(c)))
    return np.asarray(columns[best], dtype=np.float64)


def _best_column(columns, labels, seed):
    rows = _labelled(labels)
    names = usable_columns(columns)
    figures = {c: kendall_or_zero(columns[c][rows], labels[rows]) for c in names}
    best = max(names, key=lambda c: (abs(figures[c]), -names.index(c)))
    return np.sign(figures[best] or 1.0) * np.asarray(columns[best], dtype=np.float64)


def _ridge(columns, labels, seed):
    from scipy.stats import rankdata  # on first use: --help imports this module

    rows = _labelled(labels)
    features = column_rank_matrix(columns)
    return ridge_on_ranks(features[rows], rankdata(labels[rows]))(features)


def _forest(columns, labels, seed):
    from scipy.stats import rankdata  # on first use: --help imports this module

    try:
        from sklearn.ensemble import RandomForestRegressor
    except ImportError:
        raise ConfigError("the forest baseline needs scikit-learn: pip install 'autoprox[bench]' (in a clone: "
                          "pip install -e '.[bench]')") from None
    rows = _labelled(labels)
    features = column_rank_matrix(columns)
    forest = RandomForestRegressor(n_estimators=300, random_state=seed, n_jobs=1)
    forest.fit(features[rows], rankdata(labels[rows]))
    return forest.predict(features)


def _engine(columns, labels, seed):
    from autoprox.search.table_search import fit_table_proxy

    return fit_table_proxy(columns, labels, seed=seed)


register_few_label_method("size", _size, "the better of params and flops on the labelled rows")
register_few_label_method("best-column", _best_column, "the column of the largest Kendall on the labelled rows, "
                                                       "either sign")
register_few_label_method("ridge", _ridge, "ridge on the columns' ranks, the penalty by leave-one-out")
register_few_label_method("forest", _forest, "a random forest on the columns' ranks (scikit-learn, 300 trees)")
register_few_label_method("engine", _engine, "the table search: a weighted formula (search --bench TABLE.csv)")


def draw_rows(labelled: np.ndarray, k: int, seed: int, table: str, draw: int) -> np.ndarray:
    """The k labelled rows of one draw: a permutation seeded by the protocol's seed, the table, k and the draw."""
    key = [seed, zlib.crc32(table.encode()), k, draw]
    return np.sort(np.random.default_rng(key).permutation(labelled)[:k])


def largest_k(table: ProxyTable, target: str) -> int:
    """The largest k the protocol runs on ``table`` (not above :data:`SKIP_SHARE` of its labelled rows)."""
    return math.floor(SKIP_SHARE * len(_labelled(table.accuracies[target])))


def constant_draw(table: ProxyTable, target: str, ks: Sequence[int], repeats: int, seed: int) -> str | None:
    """Why a draw of the protocol cannot be fitted, or None: the first (k, draw) whose k labelled rows all hold one
    value of ``target`` (found from the seeded draws alone, before any method runs)."""
    truth = table.accuracies[target]
    labelled = _labelled(truth)
    for k in ks:
        if k > largest_k(table, target):
            continue
        for draw in range(repeats):
            drawn = truth[draw_rows(labelled, k, seed, table.name, draw)]
            if np.all(drawn == drawn[0]):
                return (f"{table.name}: the {k} labelled rows of draw {draw} all have {target} = {drawn[0]:g}, which "
                        "no method can fit; give another --protocol-seed or a larger k")
    return None


def entry_names(tables: Sequence[tuple[ProxyTable, str]]) -> list[str]:
    """The record's key of each (table, target): the table's name, ``NAME/TARGET`` where the table is given with
    more than one target."""
    names = [table.name for table, _ in tables]
    return [f"{table.name}/{target}" if names.count(table.name) > 1 else table.name for table, target in tables]


def _one_draw(columns, truth, k, seed, name, draw, methods) -> dict:
    labelled = _labelled(truth)
    rows = draw_rows(labelled, k, seed, name, draw)
    labels = np.full(len(truth), np.nan)
    labels[rows] = truth[rows]
    judged = np.setdiff1d(labelled, rows)
    figures = {}
    for method in methods:
        try:
            scores = FEW_LABEL_METHODS[method].fit(columns, labels, draw)
        except AutoproxError as exc:  # a draw its method cannot fit (k labels all equal): say which
            raise type(exc)(f"{name} k={k}, draw {draw}, {method}: {one_line(exc)}") from None
        figures[method] = kendall_or_zero(np.asarray(scores, dtype=np.float64)[judged], truth[judged])
    return figures


def _bootstrap(values: np.ndarray, seed: int = 0, samples: int = 2000) -> list[float]:
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), (samples, len(values)))].mean(axis=1)
    return [float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))]


def summarise(draws: Sequence[Mapping[str, float]], reference: str = "engine") -> dict:
    """The mean per method over the draws and the reference's paired difference to every other method."""
    methods = list(draws[0])
    mean = {m: float(np.mean([d[m] for d in draws])) for m in methods}
    difference = {}
    if reference in methods:
        for other in methods:
            if other == reference:
                continue
            diff = np.array([d[reference] - d[other] for d in draws])
            interval = _bootstrap(diff) if len(diff) >= MIN_INTERVAL_DRAWS else None
            difference[other] = {"mean": float(diff.mean()), "interval": interval,
                                 "ahead": int((diff > 0).sum()), "draws": len(diff)}
    return {"mean": mean, "difference": difference}


def run_few_labels(tables: Sequence[tuple[ProxyTable, str]], ks: Sequence[int], repeats: int | None, out: str | Path,
                   methods: Sequence[str] | None = None, seed: int = 0, workers: int = 1, resume: bool = False,
                   say: Callable[[str], None] = print, progress: bool = False,
                   resume_command: str | None = None) -> dict:
    """Run (or go on with) the protocol into ``out`` (:data:`FEW_LABELS_FILE`); returns the record. Every refusal
    (options, a target that cannot rank, a folder that is a file or holds other files) comes before anything is
    written.

    Parameters
    ----------
    tables : sequence of (ProxyTable, target)
        A table may come with several targets: each (table, target) is its own entry (:func:`entry_names`).
    ks : sequence of int
        Labelled rows per draw; a k above 60 % of a table's labelled rows is skipped there (and said).
    repeats : int or None
        Draws per (table, k). None: the recorded number when ``resume`` finds a record, else
        :data:`DEFAULT_DRAWS`. With ``resume``, a number larger than the recorded one extends every (table, k) by the
        new draws, to the figures a protocol of that many draws gives.
    methods : sequence of str, optional
        Keys of :data:`FEW_LABEL_METHODS`, at least one, none twice (default: all; ``forest`` left out with a warning without scikit-learn).
    progress : bool
        Show each (table, k)'s draws as a progress line on stderr.
    resume_command : str, optional
        The command that goes on with the protocol, printed (``continue with: ...``) when it is interrupted.

    Raises
    ------
    ConfigError, BenchmarkError, RunDirError
        In one line, before anything is written.
    """
    if not ks or min(ks) < MIN_K:
        raise ConfigError(f"--few-labels takes labelled-row counts of at least {MIN_K}, got {', '.join(map(str, ks))}")
    if repeats is None:
        repeats = (_recorded_repeats(Path(out)) if resume else None) or DEFAULT_DRAWS
    if repeats < 1:
        raise ConfigError(f"--repeats must be at least 1 (draws per table and k), got {repeats}")
    chosen = methods is not None
    try:  # the rule of every list option: none given twice, an empty list is no default
        methods = list(FEW_LABEL_METHODS.names() if methods is None else distinct(sequence(methods)))
    except ConfigError as exc:
        raise ConfigError(f"--methods: {exc}") from None
    if "engine" in methods and min(ks) < MIN_LABELS:
        raise ConfigError(f"--few-labels {min(ks)}: the engine's search needs at least {MIN_LABELS} labelled rows; give "
                          f"k of {MIN_LABELS} or more, or leave engine out of --methods")
    for table, target in tables:  # a target that cannot rank would fail in the first draw, after the record is written
        problem = table.measured_problem(target)
        if problem:
            raise BenchmarkError(f"{problem}; choose another target (--targets) or table")
        problem = constant_draw(table, target, ks, repeats, seed)
        if problem:
            raise BenchmarkError(problem)
    names = entry_names(tables)
    if tables and all(min(ks) > largest_k(table, target) for table, target in tables):
        raise ConfigError(f"--few-labels {','.join(map(str, ks))}: no table has enough labelled rows for any k (a k "
                          f"above {SKIP_SHARE * 100:g} % of a table's labelled rows is skipped); the largest k: "
                          + ", ".join(f"{name} {largest_k(table, target)}" for name, (table, target)
                                      in zip(names, tables)))
    for name in methods:
        FEW_LABEL_METHODS.lookup(name)
    if "forest" in methods:
        try:
            import sklearn  # noqa: F401
        except ImportError:
            install = "pip install 'autoprox[bench]'; in a clone: pip install -e '.[bench]'"
            if chosen:  # asked for by name: left out, the protocol would compare nothing it was asked to
                raise ConfigError(f"--methods forest needs scikit-learn, which is not installed ({install}); or "
                                  "leave forest out of --methods") from None
            say(f"few labels: scikit-learn is not installed, so the forest baseline is left out ({install})")
            methods.remove("forest")
    if len(set(names)) != len(names):
        twice = next(n for n in names if names.count(n) > 1)
        raise ConfigError(f"table {twice!r} is given twice" + (" with the same target" if "/" in twice else ""))
    out = Path(out)
    path = out / FEW_LABELS_FILE
    spec = {"ks": list(ks), "repeats": repeats, "seed": seed, "methods": methods,
            "tables": [{"name": t.name, "sha256": t.sha256, "target": target, "rows": len(t)} for t, target in tables]}
    if out.exists() and not out.is_dir():
        check_new_folder(out, FEW_LABELS_FILE)
    if path.is_file():
        record = read_json_file(path, "a few-label protocol record", RunDirError)
        if not resume:
            raise RunDirError(f"{out} already holds a few-label protocol; go on with --resume or choose another --out")
        recorded = record.get("spec", {})
        more = isinstance(recorded.get("repeats"), int) and repeats > recorded["repeats"]
        check_recorded(path, {"protocol options": [key for key in spec if recorded.get(key) != spec[key]
                                                   and not (key == "repeats" and more)]},
                       "choose another --out (a larger --repeats extends it)")
        if more:  # each finished (table, k) goes on from its draws: a draw is seeded by its table, k and number
            say(f"few labels: {recorded['repeats']} draws per table and k recorded, extended to {repeats}")
            record["spec"] = {**recorded, "repeats": repeats}
    else:
        check_new_folder(out, FEW_LABELS_FILE)
        out.mkdir(parents=True, exist_ok=True)
        record = {"format": FORMAT, "spec": spec, "results": {}}
    return run_cuts(out, _FewLabelCells(tables, methods, workers, out, say, progress, resume_command), record, say)


def _recorded_repeats(out: Path) -> int | None:
    """The draws per (table, k) of the record in ``out``, or None (none there, or unreadable: the resume's own
    reading of it then says what is wrong)."""
    try:
        repeats = load_json((out / FEW_LABELS_FILE).read_text(encoding="utf-8"))["spec"]["repeats"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return repeats if isinstance(repeats, int) and not isinstance(repeats, bool) and repeats >= 1 else None


class _FewLabelCells(CutProtocol):
    """The few-label protocol over the one runner: a cut per (table, k), ``TABLE k=K``, its draws run side by side;
    its record (``few_labels.json``) is written after each and summarised per k (:func:`overall`). The draws of the
    cut that runs are written as each finishes too (the record's ``partial``), so a resume after a Ctrl-C computes
    only the draws that were not finished: a draw is seeded by its table, k and number alone."""

    def __init__(self, tables: Sequence[tuple[ProxyTable, str]], methods: Sequence[str], workers: int, folder: Path,
                 say: Callable[[str], None], progress: bool = False, resume_command: str | None = None) -> None:
        self.tables = dict(zip(entry_names(tables), tables))
        self.methods, self.workers, self.say, self.progress = list(methods), workers, say, progress
        self.folder = folder
        self.resume_command = resume_command

    @staticmethod
    def _cell(cut: str) -> tuple[str, str]:
        name, k = cut.rsplit(" k=", 1)
        return name, k

    def cuts(self, record: Mapping) -> list[str]:
        return [f"{name} k={k}" for name in self.tables for k in record["spec"]["ks"]]

    def done(self, record: Mapping, cut: str) -> bool:
        """Whether the cut is skipped or holds every draw of the spec (a resume with a larger ``repeats`` extends
        the others)."""
        name, k = self._cell(cut)
        outcome = record["results"].get(name, {}).get(k)
        return outcome is not None and ("skipped" in outcome
                                        or len(outcome.get("draws", ())) >= record["spec"]["repeats"])

    def run(self, record: dict, pending: list[str]) -> Iterable[tuple[str, Any]]:
        from joblib import Parallel, delayed

        spec = record["spec"]
        for cut in pending:
            name, k = self._cell(cut)
            table, target = self.tables[name]
            truth = table.accuracies[target]
            labelled = _labelled(truth)
            if int(k) > largest_k(table, target):
                yield cut, {"skipped": f"k={k} is more than {SKIP_SHARE * 100:g} % of the {len(labelled)} labelled rows"}
                continue
            partial = record.setdefault("partial", {})
            finished = record["results"].get(name, {}).get(k, {}).get("draws", [])
            draws = list(partial.get(cut) or finished)
            if draws:
                self.say(f"resuming {cut} at draw {len(draws) + 1} of {spec['repeats']}")
            line = Progress(f"{name} k={k} draws", every=10) if self.progress else None
            if line:
                line(len(draws), spec["repeats"])
            for draw in Parallel(n_jobs=self.workers, return_as="generator")(
                    delayed(_one_draw)(table.proxies, truth, int(k), spec["seed"], table.name, draw, self.methods)
                    for draw in range(len(draws), spec["repeats"])):
                draws.append(draw)
                partial[cut] = draws
                self.write(self.folder, record)
                if line:
                    line(len(draws), spec["repeats"])
            yield cut, {"draws": draws, **summarise(draws)}

    def keep(self, record: dict, cut: str, outcome: Any) -> bool:
        name, k = self._cell(cut)
        record["results"].setdefault(name, {})[k] = outcome
        partial = record.get("partial", {})
        partial.pop(cut, None)
        if not partial:
            record.pop("partial", None)
        if "skipped" in outcome:
            self.say(f"{name}: k={k} skipped ({outcome['skipped']})")
        else:
            self.say(f"{name} k={k}: " + ", ".join(f"{m} {outcome['mean'][m]:+.3f}" for m in self.methods))
        return True

    def summarise(self, record: dict) -> None:
        record["summary"] = overall(record)

    def write(self, folder: Path, record: dict) -> None:
        atomic_write_json(folder / FEW_LABELS_FILE, json_safe(record))

    def close(self, record: dict, finished: bool) -> None:
        """A few-label record marks no end: every (table, k) holds its figures or why it was skipped."""


def overall(record: Mapping) -> dict:
    """Per k, over the tables that ran it: the mean of each method's mean, and on how many tables the engine is
    ahead of the size count and at or above ridge."""
    summary = {}
    for k in record["spec"]["ks"]:
        rows = [r[str(k)] for r in record["results"].values() if str(k) in r and "mean" in r[str(k)]]
        if not rows:
            continue
        methods = list(rows[0]["mean"])
        entry = {"tables": len(rows), "mean": {m: float(np.mean([r["mean"][m] for r in rows])) for m in methods}}
        if "engine" in methods:
            for other in ("size", "ridge", "forest", "best-column"):
                if other in methods:
                    entry[f"engine_ahead_of_{other}"] = sum(r["mean"]["engine"] > r["mean"][other] for r in rows)
                    entry[f"engine_at_or_above_{other}"] = sum(r["mean"]["engine"] >= r["mean"][other] for r in rows)
        summary[str(k)] = entry
    return summary


def draws_interval(difference: Mapping) -> str:
    """A paired difference's bootstrap interval as the reports show it: ``[low, high]``, or n/a saying why from
    fewer than :data:`MIN_INTERVAL_DRAWS` draws (a record written before they were left out holds [min, max])."""
    if difference.get("interval") is None or difference["draws"] < MIN_INTERVAL_DRAWS:
        return f"n/a ({difference['draws']} draws; needs --repeats {MIN_INTERVAL_DRAWS}+)"
    low, high = difference["interval"]
    return f"[{low:+.3f}, {high:+.3f}]"


def entries_text(spec: Mapping, count: int | None = None) -> str:
    """``count`` entries of the protocol (default: all of ``spec``'s) in words: tables, or (table, target) pairs
    where a table is given with several targets (one table with two targets is not two tables)."""
    entries = spec["tables"]
    count = len(entries) if count is None else count
    tables = len({entry["name"] for entry in entries})
    if tables == len(entries):
        return f"{count} table{'' if count == 1 else 's'}"
    if count == len(entries):
        return (f"{tables} table{'' if tables == 1 else 's'}, {count} (table, target) pair"
                f"{'' if count == 1 else 's'}")
    return f"{count} (table, target) pair{'' if count == 1 else 's'}"


def format_few_labels(record: Mapping) -> str:
    """The protocol's record as a table: per table and k, the mean Kendall of each method and the engine's paired
    difference to ridge and to the size count; then the summary per k."""
    methods = record["spec"]["methods"]
    lines = [f"{'table':<30}{'k':>5}" + "".join(f"{m:>13}" for m in methods)
             + (f"{'engine-ridge':>28}" if "ridge" in methods and "engine" in methods else "")]
    for name, per_k in record["results"].items():
        for k, entry in per_k.items():
            if "mean" not in entry:
                lines.append(f"{name:<30}{k:>5}  {entry.get('skipped', '')}")
                continue
            line = f"{name:<30}{k:>5}" + "".join(f"{entry['mean'][m]:>+13.3f}" for m in methods)
            diff = entry["difference"].get("ridge")
            if diff:
                line += f"   {diff['mean']:+.3f} {draws_interval(diff)} {diff['ahead']}/{diff['draws']}"
            lines.append(line)
    for k, entry in (record.get("summary") or overall(record)).items():
        lines.append(f"k={k} over {entries_text(record['spec'], entry['tables'])}: " + ", ".join(f"{m} {v:+.3f}" for m, v in entry["mean"].items())
                     + "".join(f"; engine ahead of {o} on {entry[f'engine_ahead_of_{o}']}" for o in ("size",)
                               if f"engine_ahead_of_{o}" in entry)
                     + "".join(f"; engine at or above {o} on {entry[f'engine_at_or_above_{o}']}" for o in ("ridge", "forest")
                               if f"engine_at_or_above_{o}" in entry))
    return "\n".join(lines) + "\n"
