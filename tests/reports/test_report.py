"""``autoprox report``: one self-contained HTML file of a run or a protocol, its numbers, ``--serve`` and bad input.

Reports are parsed with the standard library's html.parser (tests/report_html.py): every
figure is an inline SVG that draws something, nothing is loaded from anywhere, and each
table's numbers are the run's (hall_of_fame.json, log.jsonl, best.json) or the
protocol's (protocol.json).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tarfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

from autoprox.cli.main import main
from autoprox.reports.html.report import CheckpointReports, render_report
from autoprox.search.engine import run_search
from autoprox.search.halloffame import load_hall_of_fame
from autoprox.search.rundir import RunDirectory
from tests.commands import tmpfs
from tests.conftest import REPO, SMALL_EVOLUTION
from tests.report_html import body_rows, header, parse_report

EVOLUTION = SMALL_EVOLUTION  # the evolution of conftest's small_settings and finished_run
RUNS = REPO / "runs"


def fmt(value) -> str:
    return "n/a" if value is None else f"{value:+.3f}"


@pytest.fixture(scope="module")
def small_run(finished_run):
    """A real 3-iteration search on 16 small AutoFormer architectures (12 search, 4 test): conftest's finished run,
    shared with the other files that read it (tests copy it before changing anything)."""
    return finished_run


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("autoprox: error: "), err
    return lines[0]


def check_self_contained(report, document: str) -> None:
    """No figure empty, nothing loaded from anywhere: no URL in src/href, no stylesheet or script from outside."""
    assert report.svgs and all(s.drawn > 10 for s in report.svgs), [(s.figure, s.drawn) for s in report.svgs]
    assert all(f is not None for f in report.figures)
    figures_with_svg = {s.figure for s in report.svgs}
    assert set(report.figures) <= figures_with_svg
    assert all(link.startswith("#") for link in report.loads), [l for l in report.loads if not l.startswith("#")]
    ids = re.findall(r'\bid="([^"]+)"', document)
    assert len(ids) == len(set(ids))  # figures share one document: their ids are prefixed apart
    assert {link[1:] for link in report.loads} <= set(ids)  # every reference inside the page points into it
    assert "link" not in report.tags and "iframe" not in report.tags and "img" not in report.tags
    assert not re.search(r"@import|url\(\s*['\"]?(https?:)?//", "".join(report.styles))
    without_namespaces = re.sub(r'xmlns(:\w+)?="http://www\.w3\.org/[^"]*"', "", document)
    assert not re.search(r"https?://", without_namespaces)


def check_run_tables(report, run: Path, test_columns: bool) -> None:
    """The hall of fame, the improvements, the chosen proxy and the header hold the run's own numbers."""
    hall = load_hall_of_fame(run).hall
    best = json.loads((run / "best.json").read_text())
    log = RunDirectory(run).log()
    targets = list(hall.targets)
    columns = header(report, "hall")
    assert columns[:4] == ["rank", "jcm", "nodes", "formula"] and columns[4:4 + len(targets)] == targets
    rows = body_rows(report, "hall")
    assert len(rows) == min(20, len(hall.entries))
    chosen_rank = None
    for rank, (row, entry) in enumerate(zip(rows, hall.entries), start=1):
        assert row[0].rstrip("*") == str(rank) and row[1] == fmt(entry.fitness) and row[2] == str(entry.complexity)
        assert row[4:4 + len(targets)] == [fmt(entry.kendall[t]) for t in targets]
        assert row[-1] == str(entry.iteration)
        if row[0].endswith("*"):  # best.json's genome, or the simpler one of the same behaviour the hall keeps
            chosen_rank = rank
            best_kendall = {t: m["kendall"] for t, m in best["search"]["targets"].items()}
            assert entry.canonical == best["canonical"] or all(
                abs(entry.kendall[t] - best_kendall[t]) <= 1e-12 for t in best_kendall)
    assert chosen_rank is not None
    same_genome = hall.entries[chosen_rank - 1].canonical == best["canonical"]
    if test_columns and same_genome:  # computed here from the statistics: equal to best.json's test split
        row = rows[chosen_rank - 1]
        assert row[4 + len(targets):4 + 2 * len(targets)] == [fmt(best["test"]["targets"][t]["kendall"]) for t in targets]
    elif not test_columns:
        assert len(columns) == 5 + len(targets)
    chosen = body_rows(report, "chosen-figures")
    for row, target in zip(chosen, targets):
        assert row == [target, fmt(best["search"]["targets"][target]["kendall"]), fmt(best["test"]["targets"][target]["kendall"]),
                       fmt(best["params"]["search"]["targets"][target]["kendall"]),
                       fmt(best["params"]["test"]["targets"][target]["kendall"])]
    assert chosen[-1] == ["JCM", fmt(best["search"]["jcm"]), fmt(best["test"]["jcm"]), fmt(best["params"]["search"]["jcm"]),
                          fmt(best["params"]["test"]["jcm"])]
    by_iteration = {r["iteration"]: r for r in log}
    improvements = body_rows(report, "improvements")
    assert improvements and improvements[0][0] == str(log[0]["iteration"])
    for row in improvements:
        record = by_iteration[int(row[0])]
        assert row[1:] == [fmt(record["best_jcm"]), fmt(record["mean_jcm"]), *(fmt(record["best_kendall"][t]) for t in targets)]
    assert report.texts["iteration"] == str(log[-1]["iteration"])
    assert report.texts["evaluated"] == str(hall.evaluated)
    assert report.texts["status"] == "finished"


# ============================================================== a run, computed here


def test_report_of_a_run_is_one_self_contained_file_with_the_runs_numbers(small_run, capsys, tmp_path):
    out = tmp_path / "small.html"
    code, text, err = run_cli(capsys, "report", small_run, "--out", out, "--no-simplify")
    assert code == 0, err
    assert text.strip() == f"wrote {out}"
    # its seconds are said before they are spent (it was silent for ten of them on a reference run)
    assert err.strip() == f"report of {small_run}: reading its statistics, scoring its proxies, drawing its figures ..."
    document = out.read_text()
    report = parse_report(document)
    check_self_contained(report, document)
    assert set(report.figures) == {"figure-curves", "figure-pareto", "figure-scatter", "figure-beyond"}
    check_run_tables(report, small_run, test_columns=True)
    best = json.loads((small_run / "best.json").read_text())
    beyond = body_rows(report, "beyond")
    assert [r[:3] for r in beyond] == [[part, t, fmt(best["beyond_size"][part][t]["kendall"])]
                                       for part in ("search", "test") for t in best["targets"]]
    assert "resume" not in report.texts  # finished: no resume command


def test_a_report_at_every_checkpoint_follows_the_search(small_settings, tmp_path):
    shown = []
    reports = CheckpointReports(every=0, simplify=False)

    def on_checkpoint(run):
        reports(run)
        report = parse_report((run.path / "report.html").read_text())
        shown.append((report.texts["iteration"], report.texts["status"], "resume" in report.texts))

    run_search(small_settings, tmp_path / "run", quiet=True, on_checkpoint=on_checkpoint)
    assert [s[0] for s in shown] == ["1", "2", "3"]
    assert all(status.startswith("in progress") and resume for _, status, resume in shown)


def test_search_report_writes_report_html_into_the_run(af_small_file, session_cache, capsys, tmp_path):
    out = tmp_path / "run"
    code, text, err = run_cli(capsys, "search", "--bench", af_small_file, "--batch-size", 2, "--cache-dir",
                              session_cache.root, "--workers", 1, "--search-fraction", 0.75, "--population", 4,
                              "--iterations", 2, "--retry-cap", 3, "--top-k", 2, "--seed", 1, "--quiet", "--out", out,
                              "--report")
    assert code == 0, err
    assert f"report written to {out / 'report.html'}" in text
    report = parse_report((out / "report.html").read_text())
    assert report.texts["iteration"] == "2" and report.texts["status"] == "finished"
    assert "figure-scatter" in report.figures


# ============================================================ committed runs, protocol


@pytest.mark.parametrize("name", ["pit-reference", "autoformer-reference", "pit-best"])
def test_report_of_a_committed_run_holds_its_files_numbers(name, tmp_path, monkeypatch):
    """Rendered from an empty statistics cache, computing nothing: what the run's files hold is all shown."""
    monkeypatch.setenv("AUTOPROX_CACHE", str(tmp_path / "empty-cache"))
    document = render_report(RUNS / name, compute=False, simplify=False)
    report = parse_report(document)
    check_self_contained(report, document)
    check_run_tables(report, RUNS / name, test_columns=False)
    assert {"figure-curves", "figure-pareto"} <= set(report.figures)
    best = json.loads((RUNS / name / "best.json").read_text())
    if "beyond_size" in best:  # recorded: table and figure from best.json
        assert "figure-beyond" in report.figures
        rows = body_rows(report, "beyond")
        assert [r[3] for r in rows] == [fmt(best["beyond_size"][p][t]["kendall_with_params"])
                                        for p in ("search", "test") for t in best["targets"]]


def test_report_of_a_protocol_holds_its_folds_and_intervals(capsys, tmp_path):
    path = RUNS / "protocol" / "pit-best"
    out = tmp_path / "protocol.html"
    code, _, err = run_cli(capsys, "report", path, "--out", out, "--no-simplify")
    assert code == 0, err
    document = out.read_text()
    report = parse_report(document)
    check_self_contained(report, document)
    assert report.figures == ["figure-forest"]
    protocol = json.loads((path / "protocol.json").read_text())
    methods = protocol["summary"]["methods"]
    folds = body_rows(report, "folds-table")
    assert len(folds) == len(protocol["folds"]) == 15
    for row, fold in zip(folds, protocol["folds"]):
        result = fold["result"]
        assert row[:5] == [str(fold["repeat"]), str(fold["fold"]), str(len(fold["search"])), str(len(fold["test"])),
                           fmt(result["search_jcm"])]
        assert row[5:5 + len(methods)] == [fmt(result["jcm"][m]) for m in methods]
    differences = body_rows(report, "differences-table")
    jcm = protocol["summary"]["jcm"]["difference"]
    rows = {(r[0], r[1]): r for r in differences}
    for baseline in protocol["protocol"]["baselines"]:
        d = jcm[baseline]
        assert rows["JCM", f"proxy - {baseline}"][2:] == [
            fmt(d["mean"]), f"[{fmt(d['ci'][0])}, {fmt(d['ci'][1])}]",
            f"[{fmt(d['corrected_ci'][0])}, {fmt(d['corrected_ci'][1])}]",
            f"[{fmt(d['bootstrap']['low'])}, {fmt(d['bootstrap']['high'])}]", f"{d['ahead']}/{d['n']}"]
    repeats = body_rows(report, "repeats-table")
    assert [r[2] for r in repeats] == [fmt(s["jcm"]["test"]["proxy"]["mean"]) for s in protocol["repeat_summaries"]]


# ===================================================================== bad input


def test_a_folder_that_is_neither_a_run_nor_a_protocol_is_one_line(capsys, tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    code, _, err = run_cli(capsys, "report", tmp_path)
    assert code == 2
    assert "neither a run directory" in one_error_line(err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_a_folder_of_runs_is_refused_naming_the_runs_inside_it(capsys, tmp_path):
    """Adversarial pass 4 F14: ``report``, ``curves`` and ``show`` on a transfer study's folder said only that it
    is no run; they name its ``holdout-*`` runs, which they read."""
    recorded = Path(__file__).resolve().parents[1] / "fixtures" / "recorded-runs" / "pit-search" / "config.json"
    study = tmp_path / "study"
    for target in ("c100_kd", "flower_kd"):
        (study / f"holdout-{target}").mkdir(parents=True)
        shutil.copy(recorded, study / f"holdout-{target}" / "config.json")
    (study / "transfer.json").write_text("{}")
    runs = f"it holds the runs {study}/holdout-c100_kd, {study}/holdout-flower_kd: give one of them"
    for command in (["report", study], ["curves", study, "--out", tmp_path / "c.png"], ["show", study]):
        code, _, err = run_cli(capsys, *command)
        assert code == 2 and one_error_line(err).endswith(runs), err
    assert not (tmp_path / "c.png").exists() and not (study / "report.html").exists()


def test_a_run_with_a_broken_log_line_is_one_line(small_run, capsys, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(small_run, copy)
    lines = (copy / "log.jsonl").read_text().splitlines(keepends=True)
    (copy / "log.jsonl").write_text(lines[0] + "{not json\n" + "".join(lines[1:]))
    code, _, err = run_cli(capsys, "report", copy, "--out", tmp_path / "r.html")
    assert code == 2
    said, error = err.strip().split("\n", 1)  # the line saying what the rendering does, then the error it met
    assert said.startswith(f"report of {copy}: ")
    assert "log.jsonl: line 2 is not valid JSON" in one_error_line(error)
    assert not (tmp_path / "r.html").exists()


@contextmanager
def read_only_folder(path: Path):
    """A folder no file can be created in: a read-only tmpfs as root (root ignores permissions), else chmod."""
    path.mkdir()
    if os.geteuid() != 0:
        path.chmod(0o555)
        try:
            yield path
        finally:
            path.chmod(0o755)
        return
    with tmpfs(path, "1m", read_only=True):
        yield path


def test_a_read_only_out_is_one_line(small_run, capsys, tmp_path):
    with read_only_folder(tmp_path / "ro") as folder:
        code, _, err = run_cli(capsys, "report", small_run, "--out", folder / "report.html", "--no-simplify")
    assert code == 2
    line = one_error_line(err)
    assert f"cannot write {folder / 'report.html'}" in line
    assert "read-only" in line.lower() or "permission" in line.lower()


# ========================================================================= --serve


def _env(session_cache) -> dict:
    return dict(os.environ, AUTOPROX_CACHE=str(session_cache.root), PYTHONPATH=str(REPO))


def _serve(path, port, env) -> tuple[subprocess.Popen, str]:
    server = subprocess.Popen([sys.executable, "-m", "autoprox.cli", "report", str(path), "--serve", "--port", str(port),
                               "--no-simplify"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    line = server.stdout.readline()
    match = re.search(r"at (http://127\.0\.0\.1:(\d+)/)", line)
    if match is None:
        server.kill()
        raise AssertionError(f"no serving line: {line!r} {server.stderr.read()}")
    return server, match.group(1)


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=60) as answer:
        return answer.read().decode()


def _listening_addresses(port: int) -> set[str]:
    """Local addresses of the sockets listening on ``port`` (/proc/net/tcp and tcp6)."""
    found = set()
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.split(":")
            if state == "0A" and int(hex_port, 16) == port:
                found.add(socket.inet_ntoa(bytes.fromhex(address)[::-1]) if len(address) == 8 else address)
    return found


def test_serve_follows_a_running_search_and_binds_to_loopback_only(small_settings, session_cache, tmp_path, capsys):
    from dataclasses import replace

    run = tmp_path / "live"
    run_search(replace(small_settings, evolution=replace(EVOLUTION, iterations=2)), run, quiet=True)
    env = _env(session_cache)
    server, url = _serve(run, 0, env)
    try:
        port = int(url.rsplit(":", 1)[1].strip("/"))
        assert _listening_addresses(port) == {"127.0.0.1"}
        first = parse_report(_get(url))
        assert first.texts["iteration"] == "2" and first.scripts  # the served page reloads itself
        token = _get(url + "state")
        search = subprocess.Popen([sys.executable, "-m", "autoprox.cli", "search", "--resume", "--out", str(run),
                                   "--iterations", "5", "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, env=env)
        seen = []
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            page = parse_report(_get(url))
            seen.append(page.texts["iteration"])
            if search.poll() is not None and seen[-1] == "5" and page.texts["status"] == "finished":
                break
            time.sleep(0.3)
        assert search.wait(timeout=60) == 0, search.stderr.read()
        assert seen[-1] == "5", seen
        assert _get(url + "state") != token

        code, _, err = run_cli(capsys, "report", run, "--serve", "--port", port)  # a second server, same port
        assert code == 2
        assert one_error_line(err) == (f"autoprox: error: cannot serve on 127.0.0.1:{port}: the address is already in "
                                       "use (choose another --port)")
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_a_run_being_written_is_seen_so_a_served_page_computes_nothing_then(small_run):
    from autoprox.reports.html.serve import being_written

    assert not being_written(small_run)
    with RunDirectory(small_run).lock():
        assert being_written(small_run)
    assert not being_written(small_run)


def test_an_interrupted_run_says_so_with_its_resume_command(small_settings, tmp_path):
    run = tmp_path / "stopped"
    run_search(small_settings, run, quiet=True, stop_after=2)
    report = parse_report(render_report(run, simplify=False))
    assert report.texts["status"] == "interrupted" and report.texts["iteration"] == "2"
    assert report.texts["resume"] == f"autoprox search --resume --out {run}"


def test_missing_statistics_are_computed_with_progress_on_stderr(small_run, capsys, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(small_run, copy)
    config = json.loads((copy / "config.json").read_text())
    config["settings"]["cache_dir"] = str(tmp_path / "cold-cache")
    (copy / "config.json").write_text(json.dumps(config))
    code, _, err = run_cli(capsys, "report", copy, "--out", tmp_path / "r.html", "--no-simplify")
    assert code == 0, err
    assert "computing 4 missing statistics entries of the test split" in err
    assert "computing 12 missing statistics entries of the search split" in err
    report = parse_report((tmp_path / "r.html").read_text())
    assert "figure-scatter" in report.figures
    check_run_tables(report, copy, test_columns=True)


def test_report_out_a_link_writes_its_target_and_a_loop_of_links_is_refused(small_run, capsys, tmp_path):
    """``--out LINK`` used to replace the link by a regular file, and a loop of links was "wrote", exit 0."""
    target = tmp_path / "pages" / "real.html"
    target.parent.mkdir()
    link = tmp_path / "report.html"
    link.symlink_to(target)
    for _ in range(2):  # a link to nothing yet, then a link to the page written the first time
        code, text, err = run_cli(capsys, "report", small_run, "--out", link, "--no-simplify")
        assert code == 0, err
        assert link.is_symlink() and target.read_text().startswith("<!DOCTYPE html>")
    target.write_text("old")  # a link to a file report did not write: refused before rendering, left as it is
    code, text, err = run_cli(capsys, "report", small_run, "--out", link, "--no-simplify")
    assert code == 2 and one_error_line(err) == (f"autoprox: error: {link} exists and was not written by `autoprox "
                                                 "report`; choose another --out (nothing was overwritten)")
    assert target.read_text() == "old"
    (tmp_path / "loopA").symlink_to(tmp_path / "loopB")
    (tmp_path / "loopB").symlink_to(tmp_path / "loopA")
    code, text, err = run_cli(capsys, "report", small_run, "--out", tmp_path / "loopA", "--no-simplify")
    assert code == 2 and text == ""
    assert one_error_line(err) == (f"autoprox: error: cannot write {tmp_path / 'loopA'}: it goes through a loop of "
                                   "symbolic links; choose another --out")
    assert (tmp_path / "loopA").is_symlink()


# ============================================================ issue 32: the report's weak spots


def test_the_evolution_panels_of_the_committed_runs_are_drawn_from_what_each_run_keeps():
    """The reference runs keep evaluations.jsonl only in archive.tar.xz; the ablation runs keep none. Both
    used to show two empty panels with no word: they are drawn from the archive, or from the log's
    per-iteration counts, and a panel that has nothing says why."""
    from autoprox.reports.html.evolution import evaluated_per_iteration

    reference = RunDirectory(RUNS / "pit-reference")
    log = {r["iteration"]: r for r in reference.log()}
    kept = evaluated_per_iteration(reference)
    assert kept.iterations == list(range(0, 201)) and kept.distinct_at == kept.iterations and not kept.notes
    assert "archive.tar.xz" in kept.source
    # the archive's evaluations are the ones the log counts, iteration by iteration
    from collections import Counter

    with tarfile.open(reference.file("archive.tar.xz")) as archive:
        records = [json.loads(line) for line in archive.extractfile("evaluations.jsonl").read().splitlines()]
    counts = Counter(r["iteration"] for r in records)
    assert all(counts[i] == log[i]["evaluations"] for i in range(1, 201))
    valid = Counter(r["iteration"] for r in records if r["valid"])
    assert kept.valid_share == pytest.approx([valid[i] / counts[i] for i in kept.iterations], abs=1e-12)
    assert kept.distinct[-1] == len({r["canonical"] for r in records}) and kept.distinct == sorted(kept.distinct)

    ablation = RunDirectory(RUNS / "ablation" / "pit-sum")
    assert not ablation.file("evaluations.jsonl").exists() and not ablation.file("archive.tar.xz").exists()
    logged = evaluated_per_iteration(ablation)
    records = ablation.log()
    assert logged.iterations == [r["iteration"] for r in records] and logged.distinct == []
    assert logged.valid_share == pytest.approx([(r["attempts"] - r["invalid"]) / r["attempts"] for r in records],
                                               abs=1e-12)
    assert "not kept: the run has no evaluations.jsonl" in logged.notes["distinct"] and "valid" not in logged.notes
    document = render_report(RUNS / "ablation" / "pit-sum", compute=False, simplify=False)
    caption = re.search(r'<figure id="figure-curves">.*?<figcaption>(.*?)</figcaption>', document, re.S).group(1)
    assert "the children tried that were valid (from the log&#x27;s counts" in caption
    assert "not kept: the run has no evaluations.jsonl" in caption


def test_the_legends_of_the_curves_stand_beside_their_axes_so_no_line_crosses_a_target():
    """The flower_kd label used to be hidden by the curves drawn under the legend, inside the axes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: F401 (the figure's canvas)

    from autoprox.reports.html.figures import curves_figure

    iterations = list(range(1, 21))
    kendall = {t: [0.5 + 0.01 * i for i in iterations] for t in ("c100_kd", "flower_kd", "chaoyang_kd")}
    figure = curves_figure(iterations, [0.7] * 20, [0.6] * 20, 0.65, kendall, [0, *iterations], [0.5] * 21,
                           list(range(21)), "jcm")
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    whole = figure.get_tightbbox(renderer)  # inches: what svg_of saves (bbox_inches="tight")
    upper = [figure.axes[0], figure.axes[1]]
    for axis in upper:
        legend = axis.get_legend()
        box, inside = legend.get_window_extent(renderer), axis.get_window_extent(renderer)
        assert box.x0 >= inside.x1  # beside the axes, not over the curves
        box = box.transformed(figure.dpi_scale_trans.inverted())
        assert whole.x0 <= box.x0 and box.x1 <= whole.x1 and whole.y0 <= box.y0 and box.y1 <= whole.y1
    assert [t.get_text() for t in upper[1].get_legend().get_texts()] == list(kendall)


def test_the_report_of_a_leave_one_space_out_protocol(capsys, tmp_path):
    """It used to fail: "protocol.json: not a protocol this autoprox can read (no 'folds')"."""
    folder = RUNS / "leave-space-out" / "template-sum"
    record = json.loads((folder / "protocol.json").read_text())
    out = tmp_path / "lso.html"
    code, text, err = run_cli(capsys, "report", folder, "--out", out, "--no-simplify")
    assert code == 0, err
    document = out.read_text()
    report = parse_report(document)
    check_self_contained(report, document)
    assert report.figures == ["figure-forest"] and report.texts["status"] == "finished: 10 of 10 searches"
    assert report.texts["made-by"] == shlex.join(record["command"])
    targets = record["targets"]
    for direction in record["directions"]:
        space, summary = direction["left_out"], record["summary"][direction["left_out"]]
        searches = body_rows(report, f"searches-{space}")
        assert len(searches) == len(direction["searches"]) == 5
        for row, search in zip(searches, direction["searches"]):
            figures = summary["figures"][f"seed-{search['seed']}"]
            assert row[:2 + len(targets)] == [str(search["seed"]), fmt(figures["jcm"]),
                                              *(fmt(figures["kendall"][t]) for t in targets)]
            assert row[2 + len(targets)] == fmt(search["search_jcm"])
        methods = body_rows(report, f"methods-{space}")
        assert methods[0][1] == f"{fmt(summary['searched']['jcm_mean'])} ± {summary['searched']['jcm_sd']:.3f}"
        assert [m[0].replace(" (in-sample)", "") for m in methods[1:]] == list(summary["differences"])
        for row, (name, diff) in zip(methods[1:], summary["differences"].items()):
            assert row[1] == fmt(diff["jcm"]) and row[2 + len(targets)] == fmt(diff["difference"])
            assert row[3 + len(targets)] == f"[{fmt(diff['interval']['low'])}, {fmt(diff['interval']['high'])}]"
            assert row[-1] == f"{diff['seeds_ahead']}/5"


def test_a_protocol_report_shows_the_command_that_started_it_and_the_last_resume(tmp_path):
    """"made by" used to show the last --resume command. An older protocol.json kept only that one: the
    first is found in its runs' config.json (here inside the committed archive), else said not recorded."""
    record = json.loads((RUNS / "protocol" / "autoformer-best-patience30" / "protocol.json").read_text())
    assert "--resume" in record["command"] and "resumed_with" not in record
    report = parse_report(render_report(RUNS / "protocol" / "autoformer-best-patience30", compute=False,
                                        simplify=False))
    assert report.texts["made-by"].startswith("autoprox evaluate --out runs/protocol/autoformer-best-patience30 ")
    assert "--resume" not in report.texts["made-by"]
    assert report.texts["resumed-with"] == shlex.join(record["command"])
    report = parse_report(render_report(RUNS / "leave-space-out" / "template-mean", compute=False, simplify=False))
    assert report.texts["made-by"].startswith("not recorded")
    assert report.texts["resumed-with"].startswith("autoprox evaluate --leave-space-out --resume ")
    copy = tmp_path / "protocol"  # a protocol of this autoprox records both
    copy.mkdir()
    record |= {"command": ["autoprox", "evaluate", "--out", "my protocol"],
               "resumed_with": ["autoprox", "evaluate", "--resume", "--out", "my protocol"], "finished": False}
    (copy / "protocol.json").write_text(json.dumps(record))
    report = parse_report(render_report(copy, compute=False, simplify=False))
    assert report.texts["made-by"] == "autoprox evaluate --out 'my protocol'"
    assert report.texts["resumed-with"] == "autoprox evaluate --resume --out 'my protocol'"
    assert report.texts["resume"] == f"autoprox evaluate --resume --out {shlex.quote(str(copy))}"


def test_the_resume_command_is_quoted_and_a_live_run_says_who_writes_it(small_settings, tmp_path):
    """The command used to be unquoted for a path with spaces, and a run being written said only
    "Continue it with:" as if it had stopped."""
    run = tmp_path / "my runs" / "stopped run"
    run_search(small_settings, run, quiet=True, stop_after=1)
    document = render_report(run, simplify=False)
    report = parse_report(document)
    assert report.texts["resume"] == f"autoprox search --resume --out '{run}'"
    assert "<p>Continue it with:</p>" in document
    with RunDirectory(run).lock():
        document = render_report(run, simplify=False)
    assert f"Being written now by autoprox process {os.getpid()}; should it stop, continue it with:" in document
    assert parse_report(document).texts["resume"] == f"autoprox search --resume --out '{run}'"


def test_the_times_say_what_they_count(small_run):
    """"wall time" used to be the evolution's time only (the log's elapsed), without saying so."""
    import datetime as dt

    from autoprox.search.rundir import shown_command

    report = parse_report(render_report(small_run, simplify=False))
    config, best = (json.loads((small_run / name).read_text()) for name in ("config.json", "best.json"))
    whole = (dt.datetime.fromisoformat(best["written"]) - dt.datetime.fromisoformat(config["created"])).total_seconds()
    assert report.texts["wall-time"] == f"{round(whole)} s"
    assert report.texts["evolution-time"] == f"{round(RunDirectory(small_run).log()[-1]['elapsed'])} s"
    # the run is made in this process, so it records pytest's command line as autoprox would read it
    assert report.texts["made-by"] == shown_command(config["command"])


@pytest.mark.parametrize("given, says", [
    ("bench", "is a benchmark file (autoformer, 16 architectures), not a run: report takes a run directory"),
    ("best", "is a run's best.json: report takes a run directory"),
])
def test_report_of_a_file_says_what_it_is_and_what_report_takes(small_run, af_small_file, capsys, given, says):
    """It used to say "File exists" (report.html was to be written into the file)."""
    path = af_small_file if given == "bench" else small_run / "best.json"
    code, text, err = run_cli(capsys, "report", path)
    line = one_error_line(err)
    assert code == 2 and text == "" and line.startswith(f"autoprox: error: {path} {says}") and "File exists" not in line
    assert line.endswith(f"--bench {af_small_file} --out RUN" if given == "bench" else f"autoprox report {small_run}")


def test_a_corrupt_hall_of_fame_is_rebuilt_with_one_warning(small_run, capsys, tmp_path):
    """It used to be rebuilt from evaluations.jsonl without a word."""
    copy = tmp_path / "run"
    shutil.copytree(small_run, copy)
    (copy / "hall_of_fame.json").write_text("{not json")
    code, text, err = run_cli(capsys, "report", copy, "--out", tmp_path / "r.html", "--no-simplify")
    assert code == 0, err
    warnings_said = [line for line in err.splitlines() if line.startswith("autoprox: warning:")]
    assert len(warnings_said) == 1, err
    assert warnings_said[0].startswith(f"autoprox: warning: {copy / 'hall_of_fame.json'}: hall_of_fame.json unreadable")
    assert "rebuilt from evaluations.jsonl" in warnings_said[0]
    check_run_tables(parse_report((tmp_path / "r.html").read_text()), copy, test_columns=True)
