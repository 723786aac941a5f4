"""Transfer across targets: search on all targets but one, report the one held out.

A proxy searched jointly on several datasets is meant to rank architectures on a dataset
it never saw. :func:`run_transfer` measures that: for each target in turn it runs a whole
search (:func:`autoprox.search.engine.run_search`) on the other targets into
``OUT/holdout-<target>/`` and scores the discovered proxy on the held-out target, on the
search split and on the test split, beside the parameter count and the best coarse
descriptor for that target. The held-out target never enters the fitness, and nothing
is chosen on it.

``OUT/transfer.json`` holds the settings and, once folds finish, their figures. Run the
same command with ``--resume`` after an interruption: finished folds are kept, an
unfinished one resumes where it stopped. The study directory is locked while a process
writes it, as each fold's run directory is.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from autoprox import __version__
from autoprox.apps.protocols.runner import CutProtocol, now, run_cuts
from autoprox.core.atomic import atomic_write_json, check_new_folder, json_safe, make_directory
from autoprox.core.errors import ConfigError, RunDirError
from autoprox.core.numbers import format_float
from autoprox.core.parallel import Executor
from autoprox.data.benchmark import Benchmark, load_benchmark, locate_benchmark
from autoprox.genome.tree import InvalidProxy, parse_genome
from autoprox.proxies.proxy import Proxy
from autoprox.search.context import RunContext
from autoprox.search.engine import run_search
from autoprox.search.rundir import LOCK, RunDirectory, hold_lock, read_json
from autoprox.search.settings import SearchSettings

TRANSFER_FILE = "transfer.json"
#: How the name of a fold's run directory begins (:func:`fold_directory`).
FOLD_PREFIX = "holdout-"


def fold_directory(out: Path, held_out: str) -> Path:
    """Run directory of the search that holds ``held_out`` back."""
    return out / f"{FOLD_PREFIX}{held_out}"


def fold_settings(settings: SearchSettings, targets: Sequence[str], held_out: str) -> SearchSettings:
    """The search settings of one fold: every target but ``held_out``, weights restricted to them."""
    searched = tuple(t for t in targets if t != held_out)
    weights = {name: value for name, value in settings.weights.items() if name in searched}
    return replace(settings, targets=searched, weights=weights)


def held_out_report(best: Mapping, bench: Benchmark, held_out: str, settings: SearchSettings) -> dict:
    """Figures of a fold's best proxy on its held-out target, per split.

    Per split: the proxy's Kendall (and Spearman, Pearson) with the held-out target, the
    parameter count's Kendall on the same architectures, and the beyond-size block (Kendall
    with the parameter count and depth, partial Kendall given each, the best coarse
    descriptor as the bar).
    """
    context = RunContext.from_settings(replace(settings, targets=(held_out,), weights={}), bench=bench)
    proxy = Proxy(best["genome"], parse_genome(best["genome"]))
    params = Proxy("params")
    report = {}
    for part in ("search", "test"):
        try:
            scores = context.score(proxy, part)
        except InvalidProxy as exc:
            report[part] = {"invalid": str(exc)}
            continue
        proxy_figures = context.figures(scores, part)["targets"][held_out]
        params_figures = context.evaluate(params, part, workers=1)["targets"][held_out]
        beyond = context.beyond_size(scores, part)[held_out]
        report[part] = {
            "proxy": proxy_figures,
            "params": params_figures,
            "beyond_size": beyond,
            "beats_params": bool(proxy_figures["kendall"] > params_figures["kendall"]),
        }
    return report


def _fold_summary(best: Mapping, held_out: str, run_dir: Path, held: Mapping) -> dict:
    return {
        "held_out": held_out,
        "searched_on": list(best["targets"]),
        "run": str(run_dir),
        "genome": best["genome"],
        "searched": {"search_jcm": best["search"].get("jcm"), "test_jcm": best["test"].get("jcm")},
        "held_out_figures": held,
    }


def _check_fold_matches(run_dir: Path, expected: SearchSettings) -> None:
    """A fold directory left by an earlier run must hold the search this transfer would make."""
    recorded = RunDirectory(run_dir).config()["settings"]
    wanted = expected.to_json()
    differing = sorted(k for k in wanted if recorded.get(k) != wanted[k])
    if differing:
        raise RunDirError(f"{run_dir} holds a search with other settings ({', '.join(differing)}); "
                          f"use a new --out")


def _log(message: str, quiet: bool) -> None:
    if not quiet:
        print(message, file=sys.stderr, flush=True)


def recorded_study(out: str | Path) -> tuple[SearchSettings, str]:
    """The settings and the space a study's ``transfer.json`` records; RunDirError naming the file otherwise."""
    path = Path(out) / TRANSFER_FILE
    study = read_json(path)
    try:
        return SearchSettings.from_json(study["settings"]), str(study.get("space", ""))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise RunDirError(f"{path}: not a transfer study this autoprox can read ({type(exc).__name__}: {exc})") from None


def _previous_folds(study: Mapping, path: Path) -> dict[str, dict]:
    """Finished folds recorded in ``transfer.json``, by held-out target; RunDirError when malformed."""
    folds = study.get("folds", [])
    if not isinstance(folds, list) or not all(isinstance(f, dict) and isinstance(f.get("held_out"), str)
                                              and isinstance(f.get("genome"), str) for f in folds):
        raise RunDirError(f"{path}: its 'folds' are not a list of finished folds this autoprox can read")
    return {fold["held_out"]: fold for fold in folds}


def run_transfer(settings: SearchSettings | None, out: str | Path, resume: bool = False,
                 quiet: bool = False, executor: Executor | None = None) -> dict:
    """Run (or resume) a transfer study into ``out``; return the content of ``transfer.json``.

    ``settings`` are a joint search's settings; its targets (default: the benchmark's
    default targets, at least two) are held out one at a time.
    """
    out = Path(out)
    if resume:
        read_json(out / TRANSFER_FILE)  # RunDirError when there is no study to resume
    elif settings is None:
        raise ConfigError("settings are needed for a new transfer study")
    elif not (out / TRANSFER_FILE).exists():
        _check_new_study(out)
    new = not (out.exists() or out.is_symlink())
    make_directory(out)
    try:
        with hold_lock(out / LOCK, f"{out} is being written by another autoprox process"):
            return _run_transfer(settings, out, resume, quiet, executor)
    except BaseException:
        if new:  # refused before anything was written (too few targets, ...): leave no folder behind, as evaluate
            try:
                out.rmdir()  # takes only an empty folder
            except OSError:
                pass
        raise


def _check_new_study(out: Path) -> None:
    """RunDirError, before any work, unless a new study can start in ``out``: a new or empty folder, or one
    holding only fold run directories (``holdout-<target>`` with a ``config.json``, taken up and checked
    against the study's settings) and the lock file. Anything else there is the user's, left as it is."""
    folds = ()
    if out.is_dir():
        folds = [p.name for p in out.iterdir()
                 if p.name.startswith(FOLD_PREFIX) and p.is_dir() and RunDirectory(p).exists()]
    check_new_folder(out, f"transfer study ({TRANSFER_FILE})", ignore=(LOCK, *folds))


def _run_transfer(settings: SearchSettings | None, out: Path, resume: bool, quiet: bool,
                  executor: Executor | None = None) -> dict:
    path = out / TRANSFER_FILE
    if resume:
        previous = read_json(path)
        settings, _ = recorded_study(out)
        reported = _previous_folds(previous, path)
    else:
        if settings is None:
            raise ConfigError("settings are needed for a new transfer study")
        if path.exists():
            raise RunDirError(f"{out} already holds a transfer study; continue it with --resume or choose another --out")
    if resume:
        bench = load_benchmark(locate_benchmark(settings.bench, previous.get("benchmark_sha256"), near=out))
    else:
        bench = load_benchmark(settings.bench)
    context = RunContext.from_settings(settings, bench=bench)
    settings, targets = context.settings, list(context.targets)
    if len(targets) < 2:
        raise ConfigError(f"transfer holds one target out of several: give at least two targets, got {len(targets)}")

    study = {
        "autoprox_version": __version__,
        "created": previous.get("created") if resume else now(),
        "command": [Path(sys.argv[0]).name, *sys.argv[1:]],
        "space": bench.space,
        "benchmark_sha256": bench.sha256,
        "settings": settings.to_json(),
        "targets": list(targets),
        "folds": [],
        "finished": False,
    }
    # Held-out figures of folds finished before a resume are kept, not scored again.
    held_out = _HeldOutTargets(out, bench, settings, reported if resume else {}, quiet, executor)
    return json_safe(run_cuts(out, held_out, study, lambda message: _log(message, quiet)))


class _HeldOutTargets(CutProtocol):
    """The transfer study over the one runner: a cut per target, held out of the search on the others.

    Every fold's run directory is opened again on resume (a finished search is kept, an unfinished one resumes),
    and a fold whose search chose the genome ``transfer.json`` records keeps its held-out figures."""

    def __init__(self, out: Path, bench: Benchmark, settings: SearchSettings, reported: Mapping[str, dict],
                 quiet: bool, executor: Executor | None) -> None:
        self.out, self.bench, self.settings, self.reported = out, bench, settings, reported
        self.quiet, self.executor = quiet, executor
        self.resume_command = f"autoprox transfer --resume --out {shlex.quote(str(out))}"

    def cuts(self, record: Mapping) -> list[str]:
        return list(record["targets"])

    def done(self, record: Mapping, cut: str) -> bool:
        return any(fold["held_out"] == cut for fold in record["folds"])

    def run(self, record: dict, pending: list[str]) -> Iterable[tuple[str, Any]]:
        targets = record["targets"]
        for held_out in pending:
            number = targets.index(held_out) + 1
            run_dir = fold_directory(self.out, held_out)
            one = fold_settings(self.settings, targets, held_out)
            _log(f"transfer fold {number}/{len(targets)}: search on {', '.join(one.targets)}, hold out {held_out}",
                 self.quiet)
            if RunDirectory(run_dir).exists():  # left by an earlier start, or by a plain search with these settings
                _check_fold_matches(run_dir, one)
                best = RunDirectory(run_dir).best()
                if best is None or not best.get("finished"):
                    best = run_search(None, run_dir, resume=True, quiet=self.quiet, resume_command=self.resume_command,
                                      executor=self.executor)
            else:
                best = run_search(one, run_dir, quiet=self.quiet, resume_command=self.resume_command,
                                  executor=self.executor)
            if not best.get("finished"):
                _log(f"transfer stopped in fold {number}; continue with: {self.resume_command}", self.quiet)
                yield held_out, None
                return
            earlier = self.reported.get(held_out)
            if earlier is None or earlier["genome"] != best["genome"]:
                earlier = _fold_summary(best, held_out, run_dir, held_out_report(best, self.bench, held_out, one))
            yield held_out, earlier

    def keep(self, record: dict, cut: str, outcome: Any) -> bool:
        if outcome is None:
            return False
        record["folds"].append(outcome)
        return True

    def summarise(self, record: dict) -> None:
        """A study's figures are its folds': no summary beside them."""

    def write(self, folder: Path, record: dict) -> None:
        atomic_write_json(folder / TRANSFER_FILE, json_safe(record))


def format_transfer(study: Mapping, split: str = "test") -> str:
    """Plain-text table of a transfer study's held-out figures on ``split``."""
    header = (f"{'held out':<16}{'searched on':<42}{'tau':>8}{'params':>8}{'bar':>18}"
              f"{'beats params':>14}{'beats bar':>11}{'searched JCM':>14}")
    lines = [f"held-out target, {split} split ({study.get('space', '?')}): tau is the Kendall of the proxy searched "
             f"without it, params the parameter count's, bar the best coarse descriptor's; searched JCM is the "
             f"proxy's JCM on the targets it was searched on", header]
    for fold in study["folds"]:
        figures = fold["held_out_figures"].get(split, {})
        if "invalid" in figures:
            lines.append(f"{fold['held_out']:<16}{', '.join(fold['searched_on']):<42}  invalid: {figures['invalid']}")
            continue
        bar = figures["beyond_size"]["bar"]
        searched_jcm = fold["searched"].get(f"{split}_jcm")
        lines.append(
            f"{fold['held_out']:<16}{', '.join(fold['searched_on']):<42}"
            f"{format_float(figures['proxy']['kendall']):>8}{format_float(figures['params']['kendall']):>8}"
            f"{bar['descriptor'] + ' ' + format_float(bar['kendall']):>18}"
            f"{'yes' if figures['beats_params'] else 'no':>14}"
            f"{'yes' if figures['beyond_size']['beats_bar'] else 'no':>11}{format_float(searched_jcm):>14}"
        )
    if not study.get("finished"):
        lines.append(f"({len(study['folds'])} of {len(study['targets'])} folds finished)")
    return "\n".join(lines) + "\n"


__all__ = ["TRANSFER_FILE", "fold_directory", "fold_settings", "format_transfer", "held_out_report", "run_transfer"]
