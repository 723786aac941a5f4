"""A table search as a run directory: ``autoprox search --bench TABLE.csv --targets T --out RUN``.

The run directory holds what a search of the statistics holds (:mod:`autoprox.search.rundir`): ``config.json``
(the table by path and sha256, the target, the settings, the genome space), ``log.jsonl`` (one line per
iteration of the evolution), ``evaluations.jsonl`` (every genome evaluated), ``hall_of_fame.json``,
``checkpoint.json`` (the evolution's state after each iteration, and the inner cross-validation's choice) and
``best.json``: the proxy, a weighted formula (:class:`~autoprox.genome.weighted.WeightedFormula`) in the proxy
file format :data:`WEIGHTED_FORMULA_FORMAT`, which ``autoprox score``, ``rank`` and ``export`` read.

A run stopped (Ctrl-C, SIGTERM) keeps its checkpoint; ``search --resume --out RUN`` continues it and ends as
the uninterrupted run would. A resume of a finished run computes and rewrites nothing: it says so in one line.
"""

from __future__ import annotations

import datetime as _dt
import shlex
import sys
import warnings
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence


from autoprox.core.atomic import json_safe, make_directory
from autoprox.core.correlation import import_scipy, kendall
from autoprox.core.errors import BenchmarkError, ConfigError, RunDirError, mark_resume_said
from autoprox.core.progress import Progress
from autoprox.data.proxy_tables import ProxyTable, read_proxy_table
from autoprox.search.evolution import EvolutionState
from autoprox.search.fitness import FitnessRecord
from autoprox.search.halloffame import HallOfFame, write_hall_of_fame
from autoprox.search.rundir import BEST, CHECKPOINT, CONFIG, RunDirectory, finished_best, finished_run_message
from autoprox.genome.weighted import WEIGHTED_FORMULA_FORMAT
from autoprox.search.table_search import (SIGNAL_LEVEL, CapChoice, LabelledTable, TableSearchSettings, choose_term_cap,
                                          held_out_signal, runs_inner_cv, search_table)

__all__ = ["TABLE_SEARCH_KIND", "WEIGHTED_FORMULA_FORMAT", "finished_message", "finished_table_run", "is_table_run",
           "no_signal_warning", "refuse_table_run", "resume_options", "run_table_search", "table_run_config"]

#: The ``kind`` a table search's ``config.json`` records.
TABLE_SEARCH_KIND = "table-search"


def is_table_run(config: dict) -> bool:
    """Whether a run's ``config.json`` is a table search's."""
    return isinstance(config, dict) and config.get("kind") == TABLE_SEARCH_KIND


def table_run_config(path: str | Path) -> dict | None:
    """The ``config.json`` of the table search whose run directory is ``path``; None for anything else: a path that
    is no directory, a folder without ``config.json``, one whose ``config.json`` cannot be read (left to the caller's
    own reading, which names what is wrong), a run of another kind."""
    run = RunDirectory(path)
    try:
        if not (Path(path).is_dir() and run.exists()):
            return None
        config = run.config()
    except (OSError, ValueError, RunDirError):
        return None
    return config if is_table_run(config) else None


def refuse_table_run(run_dir: str | Path, what: str) -> None:
    """RunDirError when ``run_dir`` holds a table search (a weighted formula, not genomes of statistics), saying
    ``what`` the caller does instead and that the run's ``best.json`` is its proxy; nothing otherwise (a folder that
    is no run is left to the caller's own check)."""
    run = RunDirectory(run_dir)
    try:
        config = run.config() if run.file(CONFIG).is_file() else None
    except RunDirError:
        return
    if is_table_run(config):
        best = run.file(BEST)
        raise RunDirError(f"{run.path} is a proxy-table search (search --bench TABLE.csv); {what}. Its proxy is "
                          f"{best}: score a table with autoprox score --proxy {shlex.quote(str(best))} --bench "
                          "TABLE.csv --out scores.csv (in Python: autoprox.score_rows)")


def _log(message: str, quiet: bool) -> None:
    if not quiet:
        print(message, file=sys.stderr, flush=True)


def _read_table(path: str | Path, quiet: bool) -> ProxyTable:
    """The proxy table at ``path``, with what reading it changed said on stderr (its ``notes``)."""
    table = read_proxy_table(path)
    for note in table.notes:
        _log(note, quiet)
    return table


def _labelled_table(table: ProxyTable, target: str) -> LabelledTable:
    (target,) = table.check_targets([target])
    return LabelledTable.make(table.proxies, table.accuracies[target], target, table.source or table.name,
                              ids=table.ids)


def run_table_search(bench: str | Path | None, targets: Sequence[str] | None, out: str | Path,
                     settings: TableSearchSettings | None = None, resume: bool = False, quiet: bool = False,
                     command: Sequence[str] | None = None, stop_after: int | None = None,
                     given: Mapping[str, Any] | None = None, say_finished: Callable[[str], None] | None = None) -> dict:
    """Search a weighted formula on a proxy table's labelled rows into the run directory ``out`` (or resume the
    run there); return ``best.json``'s content.

    Parameters
    ----------
    bench : path
        The proxy table (with ``resume``: optional, and it must be the recorded one, by sha256).
    targets : sequence of str
        One accuracy column (default: the table's first; with ``resume``, the recorded one, which a target given
        must be).
    settings : TableSearchSettings, optional
        The search's settings; with ``resume``, optional, and each of its fields must be the recorded one.
    given : mapping, optional
        With ``resume``: the options given (``seed``, ``iterations``) and their values, each of which must be the
        recorded one (a table search is not extended to more iterations: its inner cross-validation ran the
        recorded number on each fold).
    stop_after : int, optional
        End after that iteration as if interrupted (tests show that a resumed run ends as an uninterrupted one).
    say_finished : callable, optional
        With ``resume`` of a finished run, which computes and rewrites nothing: called with the one line that says
        so (:func:`finished_message`), instead of its going to stderr unless ``quiet``.
    """
    run = RunDirectory(out)
    hint = f"autoprox search --resume --out {shlex.quote(str(run.path))}"
    if resume:
        config = run.config()
        if not is_table_run(config):
            raise RunDirError(f"{run.path} holds a search of the statistics, not of a table; resume it without --bench")
        target = config["target"]
        recorded_settings = TableSearchSettings.from_json(config["settings"])
        check_table_resume(run.path, target, recorded_settings, targets, settings, given)
        settings = recorded_settings
        recorded = config["table"]
        done = finished_table_run(run.path)
        say = say_finished or (lambda line: _log(line, quiet))
        if done is not None and bench is None:  # nothing to compute: the recorded table need not be read
            say(finished_message(run.path, recorded["path"]))
            return done
        path = Path(bench) if bench is not None else Path(recorded["path"])
        table = _read_table(path, quiet)
        if table.sha256 != recorded["sha256"]:
            raise RunDirError(f"{path} is not the table {run.path} was searched on (sha256 {table.sha256[:12]} now, "
                              f"{recorded['sha256'][:12]} then); give that table with --bench")
        if done is not None:
            say(finished_message(run.path, path))
            return done
    else:
        if bench is None:
            raise BenchmarkError("a table search needs --bench TABLE.csv")
        table = _read_table(bench, quiet)
        if targets and len(targets) != 1:
            raise BenchmarkError(f"a table search fits one target at a time, got {len(targets)} "
                                 f"({', '.join(targets)}); run one search per target")
        target = targets[0] if targets else table.targets[0]
        settings = settings or TableSearchSettings()
        labelled = _labelled_table(table, target)
        run.check_creatable()
        make_directory(run.path)
    with run.lock():
        if resume:
            labelled = _labelled_table(table, target)
        else:
            run.create(_config(table, target, settings, labelled, command))
        chosen = "" if resume or targets or len(table.targets) == 1 else \
            f" (the first of its {len(table.targets)} accuracy columns; --targets chooses another)"
        _log(f"autoprox search: table {table.source}, target {target}{chosen}, {len(labelled.labelled)} labelled of "
             f"{len(table)} rows, {len(labelled.plain)} proxy columns, run directory {run.path}", quiet)
        try:
            return _search(run, table, labelled, settings, resume, quiet, stop_after, hint)
        except KeyboardInterrupt as exc:
            kept = ("what was computed is kept" if run.file(CHECKPOINT).is_file() else
                    "no iteration was finished, so only config.json is kept and the resume starts the search over")
            print(f"interrupted; {kept}: continue with: {hint}", file=sys.stderr, flush=True)
            mark_resume_said(exc, hint)
            raise


def finished_table_run(run_dir: str | Path) -> dict | None:
    """``best.json`` of the table search in ``run_dir`` when it has finished (a resume has nothing to continue and
    rewrites nothing), else None: also when it is unreadable, so that the resume goes on and writes it again."""
    try:
        return finished_best(run_dir)
    except RunDirError:
        return None


def finished_message(run_dir: str | Path, bench: str | Path) -> str:
    """The one line a resume of the finished table search in ``run_dir`` (searched on the table ``bench``) says."""
    best = Path(run_dir) / BEST
    return finished_run_message(run_dir, "table search", f"score a table with autoprox score --proxy "
                                f"{shlex.quote(str(best))} --bench {shlex.quote(str(bench))} --out scores.csv")


def resume_options(seed: int | None, iterations: int | None,
                   resume: bool) -> tuple[TableSearchSettings | None, dict[str, int] | None]:
    """What :func:`run_table_search` takes of the options ``seed`` and ``iterations`` (None: not given), as
    ``search --bench`` and :func:`autoprox.search_table` were given them: a new search's settings, or, to
    ``resume`` a run, no settings and the options given (``given``), each to be checked against the recorded
    one."""
    chosen = {name: value for name, value in (("seed", seed), ("iterations", iterations)) if value is not None}
    return (None, chosen) if resume else (TableSearchSettings(**chosen), None)


def check_table_resume(run: Path, target: str, recorded: TableSearchSettings, targets: Sequence[str] | None,
                       settings: TableSearchSettings | None, given: Mapping[str, Any] | None) -> None:
    """ConfigError naming, in one line, every target, setting or option given to the resume of the table run
    ``run`` that differs from what it recorded (``target``, ``recorded``); nothing when all agree."""
    theirs = recorded.to_json()
    conflicts = []
    if targets is not None and list(targets) != [target]:
        conflicts.append(f"--targets {','.join(targets)} (the run has {target})")
    mine = dict(settings.to_json()) if settings is not None else {}
    mine.update(given or {})
    for name in sorted(mine):
        if name not in theirs or mine[name] == theirs[name]:
            continue
        flag = f"--{name}" if name in ("seed", "iterations") else name
        note = ""
        if name == "iterations":
            note = (f"; a table search is not extended: its inner cross-validation ran {theirs[name]} iterations on "
                    "each fold")
        conflicts.append(f"{flag} {mine[name]} (the run has {theirs[name]}{note})")
    if conflicts:
        raise ConfigError(f"--resume continues {run} with the settings it recorded, and these options differ: "
                          f"{'; '.join(conflicts)}; leave them out, or start a new run with another --out")


def _config(table: ProxyTable, target: str, settings: TableSearchSettings, labelled: LabelledTable,
            command: Sequence[str] | None) -> dict:
    return {
        "kind": TABLE_SEARCH_KIND,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": list(command) if command is not None else None,
        "table": {"path": str(Path(table.source).resolve()), "file": Path(table.source).name,
                  "sha256": table.sha256, "rows": len(table)},
        "target": target,
        "labelled_rows": int(len(labelled.labelled)),
        "settings": settings.to_json(),
        "genome": labelled.space(settings).to_json(),
    }


def _search(run: RunDirectory, table: ProxyTable, labelled: LabelledTable, settings: TableSearchSettings,
            resume: bool, quiet: bool, stop_after: int | None, hint: str) -> dict:
    import_scipy()
    checkpoint = run.checkpoint() if resume else None
    hall = HallOfFame()
    state = choice = None
    remembered: list[FitnessRecord] = []
    if checkpoint is not None:
        state = EvolutionState.from_json(checkpoint)
        choice = CapChoice.from_json(checkpoint["inner_cv"])
        run.truncate_logs(state.iteration)
        data = run.evaluations()
        remembered = [FitnessRecord.from_json({k: v for k, v in d.items() if k != "iteration"}) for d in data]
        hall = HallOfFame.from_evaluations(data, capacity=hall.capacity)
        _log(f"resuming at iteration {state.iteration} of {settings.iterations}", quiet)
    elif resume:
        run.truncate_logs(-1)
    if choice is None and not runs_inner_cv(settings):
        choice = choose_term_cap(labelled, settings)
        _log(choice.describe(), quiet)
    if choice is None:
        _log(f"choosing the number of terms by {settings.inner_folds}-fold cross-validation on the labelled rows "
             f"(caps {', '.join(map(str, settings.term_caps))})", quiet)
        choice = choose_term_cap(labelled, settings, None if quiet else Progress("inner folds", every=1))
        _log("out-of-fold Kendall by cap: " + ", ".join(f"{c}: {v:+.3f}" for c, v in choice.kendall.items())
             + f"; kept {choice.cap}", quiet)
    ticker = None if quiet else Progress("evolution", every=10)

    def on_evaluation(record: FitnessRecord, iteration: int) -> None:
        run.append_evaluation(record.to_json() | {"iteration": iteration})
        hall.consider(record, iteration)

    class Stop(Exception):
        pass

    def on_iteration(now: EvolutionState, record: dict) -> None:
        run.append_log(json_safe(record))
        write_hall_of_fame(run, hall)
        run.write_checkpoint(now.to_json() | {"inner_cv": choice.to_json()})
        if ticker:
            ticker(now.iteration, settings.iterations, note=f"best out-of-bag R2 {record['best_jcm']:+.3f}")
        if stop_after is not None and now.iteration >= stop_after and now.iteration < settings.iterations:
            raise Stop

    try:
        fit = search_table(labelled, settings, on_evaluation, on_iteration, choice=choice, state=state,
                           remembered=remembered)
    except Stop:
        _log(f"stopped at iteration {stop_after}; continue with: {hint}", quiet)
        return {"finished": False, "run": str(run.path)}
    except KeyboardInterrupt:
        _log("\ninterrupted: the last iteration's checkpoint is kept", quiet)
        checkpoint = run.checkpoint()
        if checkpoint is not None:
            run.truncate_logs(int(checkpoint["iteration"]))
        raise
    write_hall_of_fame(run, hall)
    if state is None or not run.file(CHECKPOINT).is_file():
        run.write_checkpoint(fit.state.to_json() | {"inner_cv": choice.to_json()})
    best = best_record(run, table, labelled, fit)
    run.write_best(best)
    warning = no_signal_warning(best)
    if warning:
        warnings.warn(warning, UserWarning, stacklevel=2)
    return best


def no_signal_warning(best: Mapping[str, Any]) -> str | None:
    """The line a finished table search (its ``best.json``) warns with when its held-out Kendall on the labelled
    rows is not better than chance (:func:`~autoprox.search.table_search.held_out_signal`, one-sided, p >=
    :data:`~autoprox.search.table_search.SIGNAL_LEVEL`); None when it is."""
    search, inner = best["search"], best["inner_cv"]
    choice = CapChoice.from_json(inner)
    rows = int(search["labelled_rows"])
    what, tau, p = held_out_signal(choice, float(search["out_of_bag_kendall"]), rows)
    if p < SIGNAL_LEVEL:
        return None
    return (f"{best['target']}: the proxy ranks the labelled rows no better than chance: its {what} is {tau:+.3f} "
            f"on {rows} rows (one-sided Kendall test: p = {p:.2f}, not below {SIGNAL_LEVEL:g}); the columns may "
            "carry no signal of this target, so its scores may be noise: check the target, or label more rows")


def best_record(run: RunDirectory, table: ProxyTable, labelled: LabelledTable, fit) -> dict:
    """``best.json`` of a finished table search: the proxy file and what the search saw of it."""
    from scipy.stats import kendalltau  # on first use: --help imports this module

    rows = labelled.labelled
    scores = fit.formula.score(labelled.columns, cache=labelled.cache)
    truth = labelled.labels[rows]
    in_sample = kendall(scores[rows], truth)
    # scipy's own: kendall() reads no NaN, and a size column may have empty cells on labelled rows, which
    # nan_policy="omit" leaves out (kendall_or_zero would too, but gives 0 where this records NaN)
    sizes = {name: float(kendalltau(labelled.columns[name][rows], truth, nan_policy="omit").statistic)
             for name in ("params", "flops") if name in labelled.columns}
    return json_safe({
        "format": WEIGHTED_FORMULA_FORMAT,
        "formula": fit.formula.to_json(),
        "readable": str(fit.formula),
        "genome": fit.record.genome,
        "target": labelled.target,
        "table": {"file": Path(table.source).name, "sha256": table.sha256, "rows": len(table)},
        "run": str(run.path),
        "finished": True,
        "search": {"labelled_rows": int(len(rows)), "out_of_bag_r2": fit.record.fitness,
                   "out_of_bag_kendall": fit.record.jcm, "labelled_kendall": in_sample,
                   "size_kendall": sizes},
        "inner_cv": fit.choice.to_json(),
        "iterations": fit.state.iteration,
        "evaluations": fit.state.evaluations,
        "note": "the labelled_kendall is in-sample (the rows the weights were fitted on); judge the proxy on rows "
                "it never saw",
    })
