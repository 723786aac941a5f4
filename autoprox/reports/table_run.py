"""``show`` and ``report`` of a table search's run directory (``search --bench TABLE.csv``): its proxy, the
inner cross-validation's choice, the hall of fame of evolved term sets and the evolution's curve."""

from __future__ import annotations

import html
from pathlib import Path

from autoprox.core.errors import ConfigError
from autoprox.core.numbers import format_float
from autoprox.reports.html.figures import curves_svg
from autoprox.reports.html.page import check_report_out, generator_tag, write_page
from autoprox.reports.show import made_by_line, readable_best
from autoprox.search.rundir import BEST, RunDirectory
from autoprox.search.table_run import no_signal_warning, table_run_config
from autoprox.search.table_search import CapChoice, TableSearchSettings

__all__ = ["is_table_run_dir", "show_table_run", "table_report_html"]


def is_table_run_dir(path: str | Path) -> bool:
    """Whether ``path`` is the run directory of a table search."""
    return table_run_config(path) is not None


def _parts(path: str | Path) -> tuple[RunDirectory, dict, dict | None, list[dict], list[dict]]:
    run = RunDirectory(path)
    config = run.config()
    best = readable_best(run)  # an unreadable one is named in a warning, and the run shown without it
    hall = (run.hall_of_fame() or {}).get("entries") or []
    return run, config, best, hall, run.log()


def show_table_run(path: str | Path, top: int = 10) -> str:
    """The text ``autoprox show`` prints for a table search; ConfigError when ``top`` is below 1 (as for a run of
    the statistics)."""
    if top < 1:
        raise ConfigError(f"--top must be at least 1, got {top}")
    run, config, best, hall, log = _parts(path)
    table, iterations = config["table"], config["settings"]["iterations"]
    state = "finished" if best and best.get("finished") else "in progress or interrupted"
    if best is None and run.file(BEST).exists():  # unreadable: the log says whether every iteration was done
        state = f"{'every iteration done' if len(log) >= iterations else state}; best.json unreadable"
    lines = [f"run {run.path}: table search of {table['file']} ({table['rows']:,} rows), target {config['target']}, "
             f"{config.get('labelled_rows', '?')} labelled rows; iteration {len(log)} of {iterations} ({state})"]
    made_by = made_by_line(config)
    if made_by:
        lines.append(made_by)
    if best:
        search = best["search"]
        lines.append(f"best.json: {best['readable']}")
        lines.append(f"  out-of-bag Kendall {format_float(search['out_of_bag_kendall'])}, R2 "
                     f"{format_float(search['out_of_bag_r2'])}; {CapChoice.from_json(best['inner_cv']).describe()}")
        warning = no_signal_warning(best) if best.get("finished") else None
        if warning:
            lines.append(f"warning: {warning}")
    basis = TableSearchSettings.from_json(config["settings"]).basis
    members = "the columns and" if basis == "linear" else f"the columns, the {basis} basis and"
    lines.append(f"hall of fame (hall_of_fame.json); top {min(top, len(hall))} of {len(hall)}; fitness: out-of-bag R2 "
                 f"of the ridge fit over {members} the genome's terms")
    lines.append(f"{'rank':>5} {'R2':>8} {'Kendall':>8} {'nodes':>6}  terms")
    for index, entry in enumerate(hall[:top], 1):
        lines.append(f"{index:>5} {format_float(entry['fitness']):>8} {format_float(entry['jcm']):>8} "
                     f"{entry['complexity']:>6}  {entry['genome']}")
    return "\n".join(lines) + "\n"


def table_report_html(path: str | Path, out: str | Path | None = None) -> Path:
    """A self-contained HTML page of a table search (its proxy, hall of fame, curve); returns where it is.
    A file at ``out`` that ``report`` did not write is refused (ReportError), before anything is read."""
    out = Path(path) / "report.html" if out is None else out
    check_report_out(out)
    out = Path(out)
    run, config, best, hall, log = _parts(path)
    curve = curves_svg([r["iteration"] for r in log], [r["best_jcm"] for r in log], [r["mean_jcm"] for r in log],
                       None, {config["target"]: [(r.get("best_kendall") or {}).get(config["target"]) for r in log]},
                       [], [], [], "out-of-bag R2", "table") if log else "<p>no iteration yet</p>"
    rows = "".join(f"<tr><td>{i}</td><td>{format_float(e['fitness'])}</td><td>{format_float(e['jcm'])}</td>"
                   f"<td>{e['complexity']}</td><td><code>{html.escape(e['genome'])}</code></td></tr>"
                   for i, e in enumerate(hall, 1))
    proxy = (f"<p><code>{html.escape(best['readable'])}</code></p><p>out-of-bag Kendall "
             f"{format_float(best['search']['out_of_bag_kendall'])} on {best['search']['labelled_rows']} labelled rows; "
             f"terms kept: at most {best['inner_cv']['cap']}</p>") if best else "<p>no best.json yet</p>"
    made_by = made_by_line(config)
    made_by = f'<p class="muted" id="made-by">{html.escape(made_by)}</p>' if made_by else ""
    page = (f"<!doctype html><html><head><meta charset='utf-8'>{generator_tag()}<title>autoprox table search {html.escape(str(run.path))}"
            f"</title><style>body{{font-family:sans-serif;max-width:60em;margin:2em auto}}td,th{{padding:2px 8px}}"
            f"</style></head><body><h1>Table search: {html.escape(config['table']['file'])}, "
            f"{html.escape(config['target'])}</h1>{made_by}<h2>The proxy</h2>{proxy}<h2>Evolution</h2>{curve}"
            f"<h2>Hall of fame</h2><table><tr><th>rank</th><th>R2</th><th>Kendall</th><th>nodes</th><th>terms</th></tr>"
            f"{rows}</table></body></html>\n")
    return write_page(out, page)
