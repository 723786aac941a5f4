"""A newcomer's first hour with the few-label table workflow (``search --bench T.csv``, ``score``, ``rank``, ``show``)
on a real table: the packaged PiT proxy table, labelled on some of its rows."""

from __future__ import annotations

import csv
import shutil

import pytest

from autoprox.search.table_run import run_table_search
from autoprox.search.table_search import TableSearchSettings
from tests.commands import one_error_line, run_cli
from tests.conftest import REPO

PIT_TABLE = REPO / "autoprox" / "resources" / "proxy-tables" / "pit.csv"
SMALL = TableSearchSettings(population=8, iterations=4, inner_folds=2, bags=3, term_caps=(0, 2))


def pit_table(path, labelled: int = 40, target: str = "c100_kd"):
    """The packaged PiT table with one accuracy column, ``target``, kept on its first ``labelled`` rows (empty on
    the others)."""
    with open(PIT_TABLE, newline="") as handle:
        rows = list(csv.reader(handle))
    header = rows[0]
    first_proxy = header.index("params")
    keep = header.index(target)
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", target, *header[first_proxy:]])
        for i, row in enumerate(rows[1:]):
            writer.writerow([row[0], row[keep] if i < labelled else "", *row[first_proxy:]])
    return path


@pytest.fixture(scope="module")
def table_run(tmp_path_factory):
    """A finished table search of the PiT table (its run directory, and the table it read)."""
    root = tmp_path_factory.mktemp("first-hour")
    table = pit_table(root / "pit-40.csv")
    run_table_search(table, ["c100_kd"], root / "run", SMALL, quiet=True)
    return root / "run", table


@pytest.mark.parametrize("proxy", ["run", "run/best.json"])
def test_score_and_rank_of_a_table_run_without_bench_read_the_table_it_searched(table_run, tmp_path, capsys, proxy):
    """Without --bench they used to fail with '.../config.json: not a run configuration this autoprox can read
    (ConfigError: the settings have no 'bench')', though a ViT run's proxy is scored on its own benchmark so."""
    run, table = table_run
    given = str(run.parent / proxy)
    code, _, err = run_cli(capsys, "score", "--proxy", given, "--bench", str(table), "--out", str(tmp_path / "a.csv"))
    assert code == 0, err
    code, _, err = run_cli(capsys, "score", "--proxy", given, "--out", str(tmp_path / "b.csv"))
    assert code == 0, err
    assert f"table: {table}, the one {run} was searched on" in err
    assert (tmp_path / "a.csv").read_text() == (tmp_path / "b.csv").read_text()
    code, out, err = run_cli(capsys, "rank", "--proxy", given)
    assert code == 0, err
    assert "pit-40" in out and "c100_kd" in out and "40" in out.splitlines()[-1]


def test_score_of_a_table_run_whose_table_is_gone_asks_for_bench(table_run, tmp_path, capsys):
    run, table = table_run
    moved = tmp_path / "run"
    shutil.copytree(run, moved)
    config = (moved / "config.json").read_text().replace(str(table), str(tmp_path / "gone.csv"))
    (moved / "config.json").write_text(config)
    code, out, err = run_cli(capsys, "score", "--proxy", str(moved), "--out", str(tmp_path / "s.csv"))
    line = one_error_line(err)
    assert code == 2 and "gone.csv, which is no longer there" in line and "--bench TABLE.csv" in line, err
    assert not (tmp_path / "s.csv").exists()


def test_score_of_a_table_run_without_bench_says_when_its_table_changed_since_the_search(table_run, tmp_path, capsys):
    """Rows appended to the table searched (the workflow the manual suggests) were scored under the line 'the one RUN
    was searched on', as if it were still that table."""
    run, table = table_run
    moved, copy = tmp_path / "run", tmp_path / "pit-40.csv"
    shutil.copytree(run, moved)
    shutil.copy(table, copy)
    (moved / "config.json").write_text((moved / "config.json").read_text().replace(str(table), str(copy)))
    code, out, err = run_cli(capsys, "score", "--proxy", str(moved), "--out", str(tmp_path / "a.csv"))
    assert code == 0 and f"the one {moved} was searched on (--bench" in err, err
    width = len(copy.read_text().splitlines()[0].split(","))
    with open(copy, "a", newline="") as handle:
        handle.write("new-candidate,," + ",".join(["1.5"] * (width - 2)) + "\n")
    code, out, err = run_cli(capsys, "score", "--proxy", str(moved), "--out", str(tmp_path / "b.csv"))
    assert code == 0 and f"the one {moved} was searched on, changed since (sha256 " in err, err
    assert "its rows are scored as they are now" in err and "101 scores" in out


@pytest.mark.parametrize("formula", [None, "x", [1]])
def test_a_weighted_formula_file_without_its_formula_object_says_so(table_run, tmp_path, capsys, formula):
    """It used to say 'a weighted formula record is a JSON object' of a file that is one, its 'formula' missing."""
    import json

    run, table = table_run
    best = json.loads((run / "best.json").read_text())
    best.pop("formula") if formula is None else best.update(formula=formula)
    (tmp_path / "b.json").write_text(json.dumps(best))
    code, _, err = run_cli(capsys, "score", "--proxy", tmp_path / "b.json", "--bench", table, "--out", tmp_path / "s.csv")
    line = one_error_line(err)
    assert code == 2 and "b.json: a weighted-formula file needs a 'formula' object" in line, err
    assert not (tmp_path / "s.csv").exists()


def test_a_search_of_no_iterations_says_no_inner_cross_validation_ran(tmp_path, capsys):
    """With --iterations 0 it said it was 'choosing the number of terms by 4-fold cross-validation', then
    'out-of-fold Kendall by cap: ; kept 0', and show '(out-of-fold Kendall by cap: )'."""
    table = pit_table(tmp_path / "pit-40.csv")
    code, out, err = run_cli(capsys, "search", "--bench", table, "--targets", "c100_kd", "--out", tmp_path / "run",
                             "--iterations", "0")
    assert code == 0, err
    said = "no inner cross-validation ran, nothing evolved to choose among: at most 0 terms"
    assert said in err and said in out and "cross-validation on the labelled rows" not in err, err
    assert "by cap: ;" not in err and "by cap: )" not in out
    code, out, err = run_cli(capsys, "show", tmp_path / "run")
    assert code == 0 and said in out and "by cap: )" not in out, out


def test_a_search_without_targets_says_it_took_the_first_of_several_accuracy_columns(tmp_path, capsys):
    """The packaged PiT table has six accuracy columns; without --targets the search took the first silently."""
    rows = list(csv.reader(open(PIT_TABLE, newline="")))
    for row in rows[41:]:
        row[1:7] = [""] * 6
    with open(tmp_path / "pit6.csv", "w", newline="") as handle:
        csv.writer(handle).writerows(rows)
    code, out, err = run_cli(capsys, "search", "--bench", tmp_path / "pit6.csv", "--out", tmp_path / "run",
                             "--iterations", "0", "--seed", "1")
    assert code == 0, err
    assert "target c100_base (the first of its 6 accuracy columns; --targets chooses another)" in err, err
    code, out, err = run_cli(capsys, "search", "--bench", tmp_path / "pit6.csv", "--out", tmp_path / "run2",
                             "--iterations", "0", "--targets", "flower_kd")
    assert code == 0 and "target flower_kd," in err and "first of its" not in err, err


def test_score_warns_when_every_row_gets_the_same_score(table_run, tmp_path, capsys):
    """A table whose only column the proxy reads is constant (here params, set to the first PiT row's) was scored
    without a word, every row given the same score."""
    run, table = table_run
    rows = list(csv.reader(open(PIT_TABLE, newline="")))
    params = rows[0].index("params")
    with open(tmp_path / "flat.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "params"])
        writer.writerows([row[0], rows[1][params]] for row in rows[1:])
    code, _, err = run_cli(capsys, "score", "--proxy", run, "--bench", tmp_path / "flat.csv", "--out", tmp_path / "s.csv")
    assert code == 0, err
    assert "autoprox: warning: every scored row of" in err and "the scores rank nothing" in err, err
    assert len({line.split(",")[-1] for line in (tmp_path / "s.csv").read_text().splitlines()[1:]}) == 1
    code, _, err = run_cli(capsys, "score", "--proxy", run, "--bench", table, "--out", tmp_path / "t.csv")
    assert code == 0 and "warning" not in err, err


@pytest.mark.parametrize("broken", ["{not json", "[1, 2]"])
def test_a_table_run_with_a_broken_best_json_is_shown_and_resumed_to_write_it_again(table_run, tmp_path, capsys,
                                                                                   broken):
    """show and search --resume refused the whole run ('best.json is not valid JSON'), though its checkpoint
    holds every iteration; a run of the statistics is shown without it, and its resume writes it again."""
    import json

    run, table = table_run
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    (copy / "best.json").write_text(broken)
    code, out, err = run_cli(capsys, "show", copy)
    assert code == 0, err
    assert f"iteration {SMALL.iterations} of {SMALL.iterations} (every iteration done; best.json unreadable)" in out
    assert "autoprox: warning:" in err and "best.json" in err
    code, out, err = run_cli(capsys, "search", "--resume", "--out", copy)
    assert code == 0, err
    mine, theirs = json.loads((copy / "best.json").read_text()), json.loads((run / "best.json").read_text())
    assert {k: v for k, v in mine.items() if k != "run"} == {k: v for k, v in theirs.items() if k != "run"}


def test_an_unfinished_table_run_is_said_to_be_one_by_score_rank_and_export(table_run, tmp_path, capsys,
                                                                             monkeypatch):
    """A table search stopped before its end has no best.json: score and rank called its folder, given by a bare
    name, an 'unknown proxy', and export warned it would export the hall of fame's first entry, then failed on
    'unknown token 'weighted' in genome'."""
    _, table = table_run
    stopped = run_table_search(table, ["c100_kd"], tmp_path / "cut", SMALL, quiet=True, stop_after=2)
    assert stopped["finished"] is False and not (tmp_path / "cut" / "best.json").exists()
    monkeypatch.chdir(tmp_path)
    said = "a run directory with no best.json yet: its search writes it when it ends; continue it with autoprox " \
           "search --resume --out"
    for given in ("cut", str(tmp_path / "cut")):
        code, _, err = run_cli(capsys, "score", "--proxy", given, "--bench", table, "--out", "s.csv")
        assert code == 2 and f"--proxy {given}: {said} {given}" in one_error_line(err), err
        code, _, err = run_cli(capsys, "rank", "--proxy", given, "--bench", table)
        assert code == 2 and said in one_error_line(err), err
    code, _, err = run_cli(capsys, "export", "cut", "--out", "p.py")
    line = one_error_line(err)
    assert code == 2 and "cut is a table search with no readable best.json yet" in line, err
    assert "autoprox search --resume --out cut" in line and "warning" not in err and "token" not in err
    assert not (tmp_path / "s.csv").exists() and not (tmp_path / "p.py").exists()


def test_search_help_says_what_a_table_search_reads_and_its_defaults(capsys):
    """search --help named no table search at all, and its --iterations said 'default 200; with --resume, a new
    total', neither true of one (80, and a resume does not extend it)."""
    from autoprox.cli.main import main

    with pytest.raises(SystemExit):
        main(["search", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "With --bench TABLE.csv, a proxy table" in text
    assert "reads only --bench, --targets, --seed, --iterations, --out, --resume, --quiet" in text
    assert f"--iterations default {TableSearchSettings().iterations}, which --resume does not extend" in text
    assert "a proxy-table search: one, default the table's first accuracy column" in text


def test_a_mistyped_column_on_a_table_is_matched_against_the_table_s_own_columns(table_run, capsys):
    """A misspelt column of a table was answered with the list of built-ins (most of which a table cannot
    score), with no 'did you mean' for a column of the table's own."""
    _, table = table_run
    rows = list(csv.reader(open(table, newline="")))
    own = table.with_name("own.csv")
    with open(own, "w", newline="") as handle:  # a column of the table's own after the standard ones
        csv.writer(handle).writerows([row + [row[-1] if i else "my_proxy"] for i, row in enumerate(rows)])
    for argv in (["rank", "--proxy", "my_porxy", "--bench", own],
                 ["score", "--proxy", "my_porxy", "--bench", own, "--out", own.with_name("s.csv")]):
        code, _, err = run_cli(capsys, *argv)
        line = one_error_line(err)
        assert code == 2 and "unknown proxy 'my_porxy' (did you mean 'my_proxy'?): not a proxy column of" in line
        assert "zen, my_proxy)" in line and "autoprox_a" not in line, line
    code, out, err = run_cli(capsys, "rank", "--proxy", "my_proxy", "--bench", own)
    assert code == 0, err
