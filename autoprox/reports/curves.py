"""Evolution curves of one or more runs, from their unfiltered per-iteration ``log.jsonl``.

Three panels against iteration:

1. best and mean JCM of the population (search split), with the parameter count's
   search-split JCM as a reference line;
2. the best proxy's Kendall tau per target;
3. the acceptance rate of mutations: children accepted per mutation tried, over a
   rolling window of iterations (each iteration tries up to ``retry_cap`` mutations
   and accepts at most one).

A table search's run (``search --bench TABLE.csv``) logs the out-of-bag R^2 of its population's ridge fits on
the labelled rows and the best genome's out-of-bag Kendall: its panels say so, and it has no parameter-count
line (the size columns are among those its formulas weight). Runs of the two kinds are not overlaid.

Several runs are overlaid (one colour per run in panels 1 and 3; in panel 2 one
colour per target and one line style per run). Drawn with Matplotlib's Agg backend
into a PNG; the plotted numbers can be written as CSV.
"""

from __future__ import annotations

import csv
import io
import math
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from autoprox.core.atomic import atomic_open, atomic_write_text, check_output_file, output_write
from autoprox.core.errors import AutoproxError, CurvesError, one_line
from autoprox.core.numbers import format_float
from autoprox.search.rundir import BEST, RunDirectory, read_records
from autoprox.search.table_run import TABLE_SEARCH_KIND
from autoprox.core.errors import RunDirError

DEFAULT_WINDOW = 10
#: The PNG text chunk ``curves`` writes ("Software"), and the CSV's first column names: how a re-run
#: recognises its own files.
SOFTWARE = "autoprox curves"
CSV_HEADER = "run,iteration,best_jcm,mean_jcm,"
#: The CSV's first columns for table searches, whose fitness is the out-of-bag R^2 (it has no ``params_jcm``).
TABLE_CSV_HEADER = "run,iteration,best_oob_r2,mean_oob_r2,"
LINE_STYLES = ("-", "--", ":", "-.")



@dataclass
class RunCurves:
    """The per-iteration numbers of one run."""

    name: str
    path: Path
    iterations: list[int]
    best_jcm: list[float]
    mean_jcm: list[float]
    kendall: dict[str, list[float]]
    accepted: list[bool]
    attempts: list[int]
    acceptance_rate: list[float]
    params_jcm: float | None
    params_note: str = ""
    targets: list[str] = field(default_factory=list)
    #: A table search's run: the fitness is the out-of-bag R^2 on the labelled rows.
    table: bool = False


def _number(value) -> float:
    return float(value) if isinstance(value, (int, float)) and value is not None else math.nan


def rolling_rate(accepted: Sequence[bool], attempts: Sequence[int], window: int) -> list[float]:
    """Accepted children per mutation tried over the last ``window`` iterations."""
    rates = []
    for end in range(1, len(accepted) + 1):
        start = max(0, end - window)
        tried = sum(attempts[start:end])
        rates.append(sum(bool(a) for a in accepted[start:end]) / tried if tried else math.nan)
    return rates


def params_reference(run: RunDirectory, config: dict) -> tuple[float | None, str]:
    """The parameter count's search-split JCM: from best.json, else computed from the benchmark."""
    if run.file(BEST).is_file():
        try:
            value = run.best()["params"]["search"]["jcm"]
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return float(value), BEST
        except RunDirError as exc:
            warnings.warn(f"{exc}; the parameter count's line is computed from the benchmark", stacklevel=2)
        except (KeyError, TypeError):
            pass
    try:
        from autoprox.proxies.proxy import Proxy
        from autoprox.search.multispace import open_context

        result = open_context(run).evaluate(Proxy("params"), "search", workers=1)
        return float(result["jcm"]), "computed from the benchmark"
    except AutoproxError as exc:  # the reference line is optional; the plot says why it is missing
        return None, f"no parameter-count reference ({one_line(exc)})"


def load_curves(path: str | Path, window: int = DEFAULT_WINDOW) -> RunCurves:
    """Read a run's log (a torn last line is skipped); RunDirError when it is not a run or a line of its
    log is not a record (the file and the line named)."""
    run = RunDirectory(path)
    config = run.config()
    log_path = run.log_path()
    log = []
    for number, record in read_records(log_path):
        iteration = record.get("iteration")
        if isinstance(iteration, bool) or not isinstance(iteration, int):
            raise RunDirError(f"{log_path}: line {number} has no integer 'iteration'")
        if not isinstance(record.get("best_kendall") or {}, dict):
            raise RunDirError(f"{log_path}: line {number}: 'best_kendall' is not an object")
        log.append(record)
    if not log:
        raise CurvesError(f"{run.path} has no iteration in its {log_path.name} yet")
    settings = config.get("settings") if isinstance(config.get("settings"), dict) else {}
    recorded = settings.get("targets")  # a hand-edited config.json may hold anything: the log names them too
    targets = [t for t in recorded if isinstance(t, str)] if isinstance(recorded, list) else []
    for record in log:
        for target in record.get("best_kendall") or {}:
            if target not in targets:
                targets.append(target)
    table = config.get("kind") == TABLE_SEARCH_KIND
    params_jcm, note = (None, "") if table else params_reference(run, config)
    accepted = [bool(r.get("accepted")) for r in log]
    attempts = [r["attempts"] if isinstance(r.get("attempts"), int) and not isinstance(r.get("attempts"), bool)
                else 0 for r in log]
    return RunCurves(
        name=run.path.resolve().name,
        path=run.path,
        iterations=[int(r["iteration"]) for r in log],
        best_jcm=[_number(r.get("best_jcm")) for r in log],
        mean_jcm=[_number(r.get("mean_jcm")) for r in log],
        kendall={t: [_number((r.get("best_kendall") or {}).get(t)) for r in log] for t in targets},
        accepted=accepted,
        attempts=attempts,
        acceptance_rate=rolling_rate(accepted, attempts, window),
        params_jcm=params_jcm,
        params_note=note,
        targets=targets,
        table=table,
    )


def _unique_names(runs: Sequence[RunCurves]) -> list[str]:
    names = [r.name for r in runs]
    if len(set(names)) == len(names):
        return names
    return [str(r.path) for r in runs]


def draw(runs: Sequence[RunCurves], window: int = DEFAULT_WINDOW):
    """The Matplotlib figure (Agg canvas) of the runs' curves."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    names = _unique_names(runs)
    figure = Figure(figsize=(10, 11), layout="constrained")
    FigureCanvasAgg(figure)
    jcm_ax, tau_ax, rate_ax = figure.subplots(3, 1, sharex=True)
    run_colors = [f"C{i % 10}" for i in range(len(runs))]
    targets: list[str] = []
    for run in runs:
        targets += [t for t in run.targets if t not in targets]
    target_colors = {t: f"C{i % 10}" for i, t in enumerate(targets)}
    table = _table_runs(runs)
    fitness = "out-of-bag R2" if table else "JCM"
    for run, name, color in zip(runs, names, run_colors):
        jcm_ax.plot(run.iterations, run.best_jcm, color=color, lw=2, label=f"{name}: best {fitness}")
        jcm_ax.plot(run.iterations, run.mean_jcm, color=color, lw=1, ls="--", label=f"{name}: mean {fitness}")
        if run.params_jcm is not None:
            jcm_ax.axhline(run.params_jcm, color=color, lw=1, ls=":",
                           label=f"{name}: parameter count ({format_float(run.params_jcm)})")
        rate_ax.plot(run.iterations, run.acceptance_rate, color=color, lw=1.5, label=name)
    for index, (run, name) in enumerate(zip(runs, names)):
        style = LINE_STYLES[index % len(LINE_STYLES)]
        for target in run.targets:
            label = target if len(runs) == 1 else f"{name}: {target}"
            tau_ax.plot(run.iterations, run.kendall[target], color=target_colors[target], ls=style, lw=1.5, label=label)
    jcm_ax.margins(y=0.08)
    if table:
        jcm_ax.set_ylabel("out-of-bag R2 (labelled rows)")
        jcm_ax.set_title("population: best and mean out-of-bag R2 of the bagged ridge fits")
        tau_ax.set_ylabel("out-of-bag Kendall tau")
        tau_ax.set_title("the best genome's out-of-bag Kendall tau (labelled rows)")
    else:
        jcm_ax.set_ylabel("JCM (search split)")
        jcm_ax.set_title("population: best and mean JCM; dotted: the parameter count's JCM")
        tau_ax.set_ylabel("Kendall tau")
        tau_ax.set_title("the best proxy's Kendall tau per target (search split)")
    tau_ax.axhline(0.0, color="0.6", lw=0.8)
    rate_ax.set_ylabel("accepted / mutations tried")
    rate_ax.set_title(f"acceptance rate of mutations (rolling over {window} iterations)")
    rate_ax.set_xlabel("iteration")
    for axis in (jcm_ax, tau_ax, rate_ax):
        axis.grid(True, alpha=0.3)
        axis.legend(fontsize=8, loc="best")
    figure.suptitle("autoprox evolution: " + ", ".join(names))
    return figure


def _table_runs(runs: Sequence[RunCurves]) -> bool:
    """Whether ``runs`` are table searches' (:func:`write_curves` refuses a mix, so the first says it)."""
    return bool(runs) and runs[0].table


def curves_csv(runs: Sequence[RunCurves]) -> str:
    """The plotted numbers, one row per run and iteration (table searches': :data:`TABLE_CSV_HEADER`, no
    ``params_jcm``)."""
    table = _table_runs(runs)
    targets: list[str] = []
    for run in runs:
        targets += [t for t in run.targets if t not in targets]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    header = TABLE_CSV_HEADER if table else CSV_HEADER
    writer.writerow([*header.rstrip(",").split(","), *(f"kendall_{t}" for t in targets),
                     "accepted", "attempts", "acceptance_rate", *(() if table else ("params_jcm",))])

    def cell(value) -> str:
        return "" if value is None or (isinstance(value, float) and math.isnan(value)) else repr(value)

    for run, name in zip(runs, _unique_names(runs)):
        for i, iteration in enumerate(run.iterations):
            writer.writerow([name, iteration, cell(run.best_jcm[i]), cell(run.mean_jcm[i]),
                             *(cell(run.kendall[t][i]) if t in run.kendall else "" for t in targets),
                             int(run.accepted[i]), run.attempts[i], cell(run.acceptance_rate[i]),
                             *(() if table else (cell(run.params_jcm),))])
    return buffer.getvalue()


def is_curves_png(head: bytes, tail: bytes = b"") -> bool:
    """Whether a file beginning with ``head`` is a PNG ``curves`` wrote (its tEXt chunk "Software" says so)."""
    return head.startswith(b"\x89PNG") and b"tEXtSoftware\x00" + SOFTWARE.encode() in head


def is_curves_csv(head: bytes, tail: bytes = b"") -> bool:
    """Whether a file beginning with ``head`` holds the numbers ``curves --csv`` wrote (its header line)."""
    first = head.split(b"\n", 1)[0]
    return (first.startswith(CSV_HEADER.encode()) and first.endswith(b",params_jcm")) or \
        (first.startswith(TABLE_CSV_HEADER.encode()) and first.endswith(b",acceptance_rate"))


def _check_output(path: Path, option: str) -> None:
    """CurvesError (one line) unless ``path`` can take the PNG (``--out``) or the CSV (``--csv``): new, or
    one ``curves`` wrote, named with the suffix of what is written (``.png``, ``.csv``: a PNG in ``c.txt`` is
    refused); a loop of links is refused, a link written through."""
    check_output_file(path, "curves", is_curves_png if option == "--out" else is_curves_csv, option, CurvesError)
    suffix = ".png" if option == "--out" else ".csv"
    if Path(path).suffix.lower() != suffix:
        what = "a PNG image" if option == "--out" else "the plotted numbers as CSV"
        raise CurvesError(f"{option} {path}: curves writes {what} there, so its name ends in {suffix}; "
                          f"choose a {suffix} name")


def write_curves(paths: Sequence[str | Path], out: str | Path, csv_path: str | Path | None = None,
                 window: int = DEFAULT_WINDOW, quiet: bool = False) -> list[RunCurves]:
    """Draw the curves of ``paths`` into the PNG ``out`` (and the numbers into ``csv_path``)."""
    if window < 1:
        raise CurvesError(f"the rolling window must be at least 1 iteration, got {window}")
    _check_output(out, "--out")  # before the runs are read: a file curves did not write is left as it is
    if csv_path is not None:
        _check_output(csv_path, "--csv")
    out = Path(out)
    runs = [load_curves(p, window) for p in paths]
    kinds = {run.table for run in runs}
    if len(kinds) > 1:
        table = next(run for run in runs if run.table)
        other = next(run for run in runs if not run.table)
        raise CurvesError(f"{table.path} is a proxy-table search (fitness: out-of-bag R2) and {other.path} a search "
                          "of the statistics (fitness: JCM): their curves do not share axes; plot them apart")
    for run in runs:
        if run.params_jcm is None and run.params_note and not quiet:
            print(f"autoprox curves: {run.name}: {run.params_note}", file=sys.stderr)
    figure = draw(runs, window)
    targets = [(out, "png")] + ([(Path(csv_path), "csv")] if csv_path is not None else [])
    for path, kind in targets:
        with output_write(path, CurvesError):
            if kind == "png":
                with atomic_open(path, "wb") as handle:
                    figure.savefig(handle, format="png", dpi=110, metadata={"Software": SOFTWARE})
            else:
                atomic_write_text(path, curves_csv(runs))
    return runs
