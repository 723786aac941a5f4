"""A whole proxy search: benchmark and split -> statistics cache -> evolution -> run directory.

:func:`run_search` wires the steps together; each step lives in its own module.
"""

from __future__ import annotations

import random
import shlex
import sys
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from autoprox.core.atomic import json_safe, make_directory
from autoprox.core.correlation import import_scipy
from autoprox.core.errors import ConfigError, DiskFullError, RunDirError, mark_resume_said
from autoprox.core.parallel import DaskExecutor, Executor
from autoprox.core.progress import Progress
from autoprox.genome.space import GenomeSpace
from autoprox.networks.statistics import InputSpec, torch_threads
from autoprox.search.context import NO_TEST_PART, TEST_DEFERRED, best_report  # noqa: F401 - the constants: re-exported
from autoprox.search.evolution import (
    EvolutionConfig,
    EvolutionState,
    evolve_step,
    fitness_record,
    initial_population,
    restart_step,
    rng_from_json,
    rng_state_to_json,
    since_restart,
    stalled,
)
from autoprox.search.fitness import FitnessRecord, MemoisedFitness
from autoprox.search.halloffame import HallOfFame, write_hall_of_fame
from autoprox.search.multispace import new_context, open_context
from autoprox.search.options import session_options
from autoprox.search.searchrun import SearchRun
from autoprox.search.rundir import (
    ARCHIVE,
    CHECKPOINT,
    CONFIG,
    EVALUATIONS,
    HALL_OF_FAME,
    RunDirectory,
    python_call,
    finished_best,
    finished_run_message,
    iteration_of,
    read_records,
)
from autoprox.search.settings import SearchSettings, recorded_settings, settings_differences

#: The checkpoint's record of the settings its digest was made from.
DIGESTED = "digested_settings"


def _log(message: str, quiet: bool) -> None:
    if not quiet:
        print(message, file=sys.stderr, flush=True)


def run_search(settings: SearchSettings | None, out: str | Path, resume: bool = False,
               stop_after: int | None = None, quiet: bool = False,
               session: Mapping[str, Any] | None = None,
               resume_command: str | None = None, executor: Executor | None = None,
               on_checkpoint: Callable[[RunDirectory], None] | None = None,
               command: Sequence[str] | None = None) -> dict:
    """Run (or resume) a proxy search into ``out``; return the content of ``best.json``.

    ``stop_after`` ends the run after that iteration as if interrupted (tests use it to
    show that a resumed run ends identical to an uninterrupted one). On resume, ``session`` gives
    session settings by option name (:func:`~autoprox.search.options.session_options`), none of
    which changes what the search computes: ``bench`` says where the run's benchmark file is (it
    must be the recorded one; one path per benchmark of a multi-space run), ``iterations`` is a
    new total (recorded in ``config.json``: :attr:`~autoprox.search.options.Option.resume_recorded`),
    ``workers`` and ``cache_dir`` apply to this session only. ``executor`` (``--scheduler``) computes statistics on a Dask
    cluster and, when it is one, keeps the search split's statistics sharded on its
    workers for fitness; the run is the same.

    A resume of a finished run with nothing to continue (:func:`nothing_to_resume`) computes and rewrites
    nothing: it says so in one line (:func:`finished_search_message`) and returns ``best.json`` as it is.

    The run directory is locked while this runs (a second process is refused). A resume
    whose ``config.json`` settings differ from those its checkpoint was made with is
    refused. An interruption (Ctrl-C, or SIGTERM turned into one by the command line)
    and a full disk keep what was computed and say how to continue
    (``resume_command``, by default ``autoprox search --resume --out OUT``). ``on_checkpoint`` is
    called with the run directory after each iteration's checkpoint is written (``search --report``). ``command``
    is what a new run's ``config.json`` records as the command that made it (default: this process's command line;
    the Python API gives its call, :func:`~autoprox.search.rundir.python_call`).
    """
    run = RunDirectory(out)
    hint = resume_command or f"autoprox search --resume --out {shlex.quote(str(run.path))}"
    evaluation = settings.evaluation if settings is not None else None
    if resume and isinstance(executor, DaskExecutor):
        evaluation = recorded_settings(run.path)[0].evaluation
    if isinstance(executor, DaskExecutor) and evaluation not in (None, "exact"):
        raise ConfigError(f"--evaluation {evaluation} runs in this process; it cannot be used with --scheduler")
    if evaluation == "counted" and settings is not None and settings.cache_precision != "float16":
        raise ConfigError("--evaluation counted counts stored float16 values; it needs --cache-precision float16")
    if resume:
        run.config()  # RunDirError when this is no run
    else:
        if settings is None:
            raise ConfigError("settings are needed for a new search")
        context = new_context(settings, run)
        context.check_start()
        InputSpec.parse(settings.input).check_images()  # a mistyped image folder leaves no run behind
        run.check_creatable()
        make_directory(run.path)
    with run.lock():
        if resume:
            done = nothing_to_resume(run.path, (session or {}).get("iterations"))
            context = _resume_context(run, session or {}, record=done is None)
            if done is not None:  # checked as a resume that goes on reads the run, and nothing written
                _check_logs(run)
                _log(finished_search_message(run.path, done), quiet)
                return done
        else:
            run.create(context.config_json(command))
        try:
            import_scipy()
            _log(f"autoprox search: {context.bench.space}, {len(context.split.search)} search / "
                 f"{len(context.split.test)} test architectures, targets {', '.join(context.targets)}, fitness "
                 f"{context.settings.fitness}, run directory {run.path}", quiet)
            # The search split's statistics first: the test split's are computed only for the final report.
            evaluator, fitness_choices = context.fitness_evaluator(executor, quiet)
            try:
                prefetch = context.test_prefetch(executor)  # started once the evolution's statistics are counted
                chosen = context.settings
                # The digest, and what it digests (so that a resume refused for edited settings can name them).
                digest = {"settings_digest": chosen.digest(context.bench.sha256),
                          DIGESTED: chosen.digested(context.bench.sha256)}
                _count(evaluator, quiet)
                with prefetch.start():
                    if prefetch.started:
                        _log(f"test split statistics: {len(prefetch.missing)} to compute, in one background process "
                             "during the evolution", quiet)
                    state, interrupted, signalled = _evolve(
                        run, evaluator, chosen.evolution, chosen.genome_space, chosen.seed_proxies, chosen.fitness,
                        resume, stop_after, quiet, digest, on_checkpoint)
                    # a signal must stop the search at once: the test split's figures wait for its resume
                    report = best_report(state.overall_best(chosen.evolution.parsimony), context, state.iteration,
                                         executor, fitness_choices, test_figures=not signalled, quiet=quiet,
                                         prefetch=prefetch)
            finally:
                evaluator.close()
            return _finish(run, report, state, chosen.evolution, interrupted, signalled, hint, quiet)
        except KeyboardInterrupt as exc:
            print(f"interrupted; what was computed is kept: continue with: {hint}", file=sys.stderr, flush=True)
            mark_resume_said(exc, hint)
            raise
        except DiskFullError as exc:
            raise DiskFullError(f"{exc}; what was computed is kept: free some space, then continue with: {hint}"
                                ) from None
        except FileNotFoundError:
            if run.exists():  # the run is still there: a file of its own missing is a bug
                raise
            raise RunDirError(f"the run directory {run.path} disappeared while the search was writing it "
                              f"(no {CONFIG} left): nothing of the run is left to resume") from None


def nothing_to_resume(run_dir: str | Path, iterations: int | None = None) -> dict | None:
    """``best.json`` of the finished search in ``run_dir`` when a resume to a total of ``iterations`` (None: the
    recorded total) has nothing to continue, and so computes and rewrites nothing: the search stopped early (its
    patience and restarts spent) or reached that total; else None."""
    try:
        best = finished_best(run_dir)
    except RunDirError:  # an unreadable best.json: the resume goes on, and writes it again
        return None
    if best is None:
        return None
    if best.get("stopped_early"):
        return best
    total = iterations if iterations is not None else recorded_settings(run_dir)[0].evolution.iterations
    done = best.get("iteration")
    return best if isinstance(done, int) and done >= total else None


def finished_search_message(run_dir: str | Path, best: dict) -> str:
    """The one line a resume of the finished search in ``run_dir`` (its ``best.json``: ``best``) says."""
    stopped = best.get("stopped_early")
    then = (f"it stopped early, at iteration {best.get('iteration')}: no better proxy in {stopped.get('patience')} "
            "iterations (--patience)" if isinstance(stopped, dict) else
            f"or search on past its {best.get('iteration')} iterations with --resume --iterations N")
    return finished_run_message(run_dir, "search", then)


def _check_logs(run: RunDirectory) -> None:
    """RunDirError naming a bad line of the run's logs, as a resume that goes on reads them; nothing is written."""
    for path in (run.log_path(), run.file(EVALUATIONS)):
        for number, record in read_records(path):
            iteration_of(record, path, number)


def _resume_context(run: RunDirectory, session: Mapping[str, Any], record: bool = True) -> SearchRun:
    """The context of a run to resume, checked against its checkpoint, with the ``session`` settings (by option
    name) made; those a resume records (the new total of iterations) written into ``config.json`` (``record``
    false: nothing written, for a resume with nothing to continue)."""
    rows = {option.name: option for option in session_options()}
    unknown = sorted(set(session) - set(rows))
    if unknown:
        raise ConfigError(f"a resume changes only the session settings ({', '.join(rows)}), not {unknown[0]!r}")
    # bench says where the recorded benchmark is: the run opens with it, and its settings keep the recorded one
    context = open_context(run, bench=session.get("bench"))
    checkpoint = run.checkpoint()
    if checkpoint is None and run.file(ARCHIVE).is_file():  # a committed run, packed (runs/README.md)
        raise RunDirError(f"{run.path}: its {CHECKPOINT} is packed in {run.file(ARCHIVE)}; unpack it first: "
                          f"python scripts/runs_archive.py unpack {run.path}")
    kept = _hall_entries(run)
    if kept and not run.file(EVALUATIONS).is_file():  # a run whose evaluations were not kept (runs/README.md)
        raise RunDirError(f"{run.path} has no {EVALUATIONS}, from which a resume rebuilds the hall of fame: resuming "
                          f"would drop the {kept} proxies {HALL_OF_FAME} holds; run its command ({CONFIG}) again "
                          f"with another {'out' if python_call(run.config().get('command')) else '--out'}")
    if checkpoint is not None:
        recorded = checkpoint.get("settings_digest")
        current = context.settings.digest(context.bench.sha256)
        if recorded is not None and recorded != current:  # runs made before the digest have none: accepted
            then = checkpoint.get(DIGESTED)
            differ = settings_differences(context.settings.digested(context.bench.sha256), then, "then ") \
                if isinstance(then, dict) else []
            what = (f": {'; '.join(differ)}" if differ else
                    f" (settings digest {str(recorded)[:12]} then, {current[:12]} now)")
            raise RunDirError(
                f"{run.file(CONFIG)}: its settings differ from those {run.file(CHECKPOINT).name} "
                f"(iteration {checkpoint.get('iteration', '?')}) was made with{what}; resuming would mix two "
                "searches: restore config.json, or start a new run with another --out")
    given = [rows[name] for name, value in session.items() if name != "bench" and value is not None]
    if given:
        context = context.with_session({option.setting: session[option.name] for option in given})
    recorded = [option for option in given if option.resume_recorded]
    if recorded and record:
        config = run.config()
        for option in recorded:
            head, _, sub = option.setting.partition(".")
            (config["settings"][head] if sub else config["settings"])[sub or head] = session[option.name]
        run.update_config(config)
    return context


def _hall_entries(run: RunDirectory) -> int:
    """How many proxies the run's ``hall_of_fame.json`` lists (0 when it has none or cannot be read)."""
    try:
        entries = (run.hall_of_fame() or {}).get("entries")
    except ValueError:  # RunDirError, or a version-1 file whose entries cannot be converted
        return 0
    return len(entries) if isinstance(entries, list) else 0


def _checkpoint_state(run: RunDirectory, checkpoint: dict) -> EvolutionState:
    try:
        return EvolutionState.from_json(checkpoint)
    except RunDirError as exc:
        raise RunDirError(f"{run.file(CHECKPOINT)}: {exc}") from None


def _evaluation_records(run: RunDirectory) -> list[tuple[dict, FitnessRecord]]:
    """The records of ``evaluations.jsonl`` (cut back to the checkpoint), as read and checked;
    RunDirError naming a bad line."""
    path = run.file(EVALUATIONS)
    records = []
    for number, data in read_records(path):
        try:
            records.append((data, fitness_record(data)))
        except RunDirError as exc:
            raise RunDirError(f"{path}: line {number}: {exc}") from None
    return records


def _count(evaluator: MemoisedFitness, quiet: bool) -> None:
    """Counted evaluation's statistics counted first, on both cores: a prefetch of the test split's started beside
    it doubled its time (0:07 to 0:13-0:19)."""
    if evaluator.counted is not None:
        seconds = evaluator.prepare()
        _log(f"counted evaluation: statistics counted in {seconds:.1f} s "
             f"({sum(b.nbytes for b in evaluator.counted.values()) / 1e6:.0f} MB)", quiet)


def _evolve(run: RunDirectory, evaluator: MemoisedFitness, evo: EvolutionConfig, space: GenomeSpace,
            seed_proxies: Sequence[str], fitness: str, resume: bool, stop_after: int | None, quiet: bool, digest: dict,
            on_checkpoint: Callable[[RunDirectory], None] | None = None) -> tuple[EvolutionState, bool, bool]:
    """The evolution (Algorithm 1, ``evo``) in the locked run directory ``run``, whose ``config.json`` is written,
    on the fitness of its search part (``evaluator``, its statistics built), from its checkpoint on ``resume``;
    each checkpoint records the settings' ``digest``. It reads nothing of the settings but what it is given: the
    genome ``space``, the ``seed_proxies`` of the initial population and the name of the ``fitness`` its
    progress line shows. Returns its last state, whether it stopped before its end (``stop_after``, or an
    interruption) and whether a signal stopped it."""

    # The hall of fame sees every fresh evaluation; on resume it is rebuilt from
    # evaluations.jsonl (cut back to the checkpoint), so it ends as in an uninterrupted run.
    hall = HallOfFame()

    def on_evaluation(record: FitnessRecord, iteration: int) -> None:
        run.append_evaluation(record.to_json() | {"iteration": iteration})
        if hall.consider(record, iteration):
            write_hall_of_fame(run, hall)

    with torch_threads(1):
        checkpoint = run.checkpoint() if resume else None
        if checkpoint is None:
            rng = random.Random(evo.seed)
            if resume:
                run.truncate_logs(-1)
            write_hall_of_fame(run, hall)
            population, fresh, invalid = initial_population(
                evaluator, evo, rng, list(seed_proxies), on_evaluation,
                progress=None if quiet else Progress("initial population", every=15), space=space,
            )
            write_hall_of_fame(run, hall)
            state = EvolutionState(0, population, rng_state_to_json(rng), fresh, invalid, evaluator.seconds)
            run.write_checkpoint(state.to_json() | digest)
        else:
            state = _checkpoint_state(run, checkpoint)
            rng = rng_from_json(state.rng_state)
            run.truncate_logs(state.iteration)
            records = _evaluation_records(run)
            evaluator.remember(record for _, record in records)
            hall = HallOfFame.from_evaluations([data for data, _ in records], capacity=hall.capacity)
            write_hall_of_fame(run, hall)
            _log(f"resuming at iteration {state.iteration} of {evo.iterations}", quiet)

        ticker = None if quiet else Progress("evolution", every=30)
        fitness_label = "JCM" if fitness == "jcm" else fitness  # the progress line's best so far
        interrupted = signalled = False
        # Stalls are judged on the current population: the iterations since the last restart.
        best_jcms = [r["best_jcm"] for r in since_restart(run.log())] if evo.patience else []
        try:
            while state.iteration < evo.iterations:
                if stalled(best_jcms, evo.patience) and state.restarts >= evo.restarts:
                    break
                if stop_after is not None and state.iteration >= stop_after:
                    interrupted = True
                    break
                if stalled(best_jcms, evo.patience):
                    record = restart_step(state, evaluator, evo, rng, on_evaluation, space=space)
                    best_jcms = [record["best_jcm"]]
                    _log(f"\nrestart {state.restarts} of {evo.restarts} at iteration {state.iteration}", quiet)
                else:
                    record = evolve_step(state, evaluator, evo, rng, on_evaluation, space=space)
                    best_jcms.append(record["best_jcm"])
                run.append_log(json_safe(record))
                write_hall_of_fame(run, hall)
                run.write_checkpoint(state.to_json() | digest)
                if on_checkpoint is not None:
                    on_checkpoint(run)
                if ticker:
                    best_so_far = hall.entries[0].fitness if hall.entries else None
                    ticker(state.iteration, evo.iterations,
                           note=None if best_so_far is None else f"best evaluated {fitness_label} {best_so_far:+.3f}")
        except KeyboardInterrupt:
            interrupted = signalled = True
            _log(f"\ninterrupted: saving the state of iteration {state.iteration}", quiet)
            state = _checkpoint_state(run, run.checkpoint())
            run.truncate_logs(state.iteration)  # an iteration cut short leaves no line past its checkpoint
    return state, interrupted, signalled


def _finish(run: RunDirectory, report: dict, state: EvolutionState, evo: EvolutionConfig, interrupted: bool,
            signalled: bool, hint: str, quiet: bool) -> dict:
    """``best.json``: the final ``report`` (:func:`~autoprox.search.context.best_report`) with how the evolution
    ended, written; what it says on stderr of how to continue a run stopped before its end."""
    report["finished"] = not interrupted
    if not interrupted and state.iteration < evo.iterations:
        report["stopped_early"] = {"iteration": state.iteration, "patience": evo.patience}
        _log(f"\nno better proxy in {evo.patience} iterations (--patience {evo.patience}"
             + (f", after {state.restarts} restart(s)" if evo.restarts else "")
             + f"): stopped at iteration {state.iteration} of {evo.iterations}", quiet)
    if evo.restarts:
        report["restarts"] = {"made": state.restarts, "allowed": evo.restarts,
                              "elites": [{"genome": m.genome, "fitness": m.fitness} for m in state.elites]}
    run.write_best(report)
    if signalled:
        print(f"stopped at iteration {state.iteration}; continue with: {hint}", file=sys.stderr, flush=True)
    elif interrupted:
        _log(f"stopped at iteration {state.iteration}; continue with: {hint}", quiet)
    return report
