"""What ``rank`` and the N-space protocol say of a proxy table they cannot use (issue 43): a target that cannot
rank, a target value out of range, a file that is not a proxy table (no ``id`` first, another delimiter, a
directory, a FIFO, a path too long), the same table twice; and how ``rank`` prints a table of millions of
rows and several proxies at once."""

from __future__ import annotations

import csv
import os
import random
from pathlib import Path

import pytest

from autoprox.cli.tables import format_table_ranking
from autoprox.data.proxy_tables import ProxyTable, TableSpace
from autoprox.search.rundir import PROTOCOL
from tests.commands import one_error_line, run_cli


def _table(path: Path, target: list, header=("id", "val_acc", "params", "nwot"), delimiter=",") -> Path:
    rng = random.Random(len(target))
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, delimiter=delimiter)
        writer.writerow(header)
        writer.writerows([[f"a{i}", value, rng.random(), rng.random()] for i, value in enumerate(target)])
    return path


def _good(path: Path, rows: int = 20) -> Path:
    return _table(path, [round(random.Random(rows).random() * 100 + i, 3) for i in range(rows)])


CANNOT_RANK = {
    "constant": ([50.0] * 20, "target 'val_acc' has one constant value (50) for all 20 measured rows"),
    "two measured": ([61.5, 70.25] + [""] * 18, "target 'val_acc' has only 2 measured value(s); at least 3"),
}


@pytest.mark.parametrize("case", sorted(CANNOT_RANK))
def test_a_target_that_cannot_rank_is_refused_by_rank_and_by_the_protocol_before_anything_is_written(
        case, tmp_path, capsys):
    """Bug 2 of issue 43: ``rank`` printed ``nan nan nan`` and exited 0; the protocol scored +0.000 for every
    method, averaged those zeros over spaces and wrote protocol.json."""
    values, expected = CANNOT_RANK[case]
    bad = _table(tmp_path / "bad.csv", values)
    code, out, err = run_cli(capsys, "rank", "--proxy", "params", "--bench", bad)
    assert code == 2 and not out and "nan" not in out
    line = one_error_line(err)
    assert str(bad) in line and expected in line
    others = [_good(tmp_path / f"good{k}.csv", 20 + k) for k in range(2)]
    code, out, err = run_cli(capsys, "evaluate", "--leave-space-out", "--rank-formulas", "--bench", bad,
                             *[a for path in others for a in ("--bench", path)], "--out", tmp_path / "p",
                             "--seeds", "1", "--iterations", "1", "--bootstrap", "10", "--quiet")
    assert code == 2 and expected in one_error_line(err) and not (tmp_path / "p" / PROTOCOL).exists()


def test_empty_target_cells_are_unmeasured_rows_not_a_refusal(tmp_path, capsys):
    """Some empty target cells (rows not measured) rank on the measured ones: only a target that cannot rank
    at all is refused."""
    path = _table(tmp_path / "partial.csv", [10.5, "", 30.25, 41.0, "", 52.5, 60.0, 12.0])
    code, out, err = run_cli(capsys, "rank", "--proxy", "params", "--bench", path)
    assert code == 0, err
    assert out.splitlines()[2].split()[-1] == "6"  # n: the measured rows


def test_a_target_value_past_1e12_is_refused_and_any_finite_score_within_is_accepted(tmp_path, capsys):
    """A target may be a negated loss (negative, any scale within 1e12); ``1e300`` is a typo or a unit error."""
    negated = _table(tmp_path / "loss.csv", [-5.0, -1e6, -2.5, -3.75, -0.5])
    assert run_cli(capsys, "rank", "--proxy", "params", "--bench", negated)[0] == 0
    huge = _table(tmp_path / "huge.csv", [61.0, 1e300, 70.0, 65.0, 72.0])
    code, out, err = run_cli(capsys, "rank", "--proxy", "params", "--bench", huge)
    line = one_error_line(err)
    assert code == 2 and "id 'a1'" in line and "1e+300" in line and "[-1e+12, 1e+12]" in line


def test_a_csv_without_id_first_says_in_one_short_line_that_a_proxy_table_needs_it(tmp_path, capsys):
    """It used to be one line of 1,100 characters repeating ``column 'params' is not arch, ...`` per column."""
    wide = ("name", "val_acc", "params", "flops", "snip", "grasp", "synflow", "nwot", "jacov", "zen")
    path = tmp_path / "noid.csv"
    path.write_text(",".join(wide) + "\n" + "".join(f"a{i}," + ",".join(["1"] * 9) + "\n" for i in range(5)))
    code, out, err = run_cli(capsys, "rank", "--proxy", "params", "--bench", path)
    line = one_error_line(err)
    assert code == 2 and len(line) < 400 and line.count("is not arch") + line.count("are not arch") == 1
    assert "'id' as its first column" in line and "and 5 more" in line  # val_acc is an accuracy column


def test_a_table_whose_proxies_have_no_standard_name_says_why_it_has_no_proxy_column(tmp_path, capsys):
    """A table of a user's own proxies (``id,acc,p0,p1,...``) was read as all accuracy columns, and the search said
    no proxy column had values on half the rows: the line now says what the boundary rule found, and the fix."""
    path = _table(tmp_path / "own.csv", [round(i * 1.5, 2) for i in range(20)], header=("id", "acc", "my_a", "my_b"))
    for command in (["search", "--bench", path, "--targets", "acc", "--out", tmp_path / "run"],
                    ["rank", "--proxy", "my_a", "--bench", path],
                    ["score", "--proxy", "params", "--bench", path, "--out", tmp_path / "s.csv"]):
        code, out, err = run_cli(capsys, *command)
        line = one_error_line(err)
        assert code == 2 and "no proxy column" in line and "'my_a'" in line and "after a standard one" in line, line
    assert not (tmp_path / "run").exists() and not (tmp_path / "s.csv").exists()
    good = _table(tmp_path / "good.csv", [round(i * 1.5, 2) for i in range(20)], header=("id", "acc", "params", "my_a"))
    code, out, err = run_cli(capsys, "rank", "--proxy", "my_a", "--bench", good, "--targets", "acc")
    assert code == 0, err


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
def test_a_directory_or_a_fifo_as_bench_is_named_as_such_not_as_missing(tmp_path, capsys):
    folder = tmp_path / "tables.csv"
    folder.mkdir()
    code, _, err = run_cli(capsys, "rank", "--proxy", "params", "--bench", folder)
    assert code == 2 and one_error_line(err).endswith(f"{folder}: a directory, not a benchmark file; give the file "
                                                      "itself")
    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)  # reading it would wait for a writer: refused by its kind, without opening it
    code, _, err = run_cli(capsys, "rank", "--proxy", "params", "--bench", fifo)
    assert code == 2 and "a FIFO, not a regular file" in one_error_line(err)


def test_a_name_too_long_for_the_file_system_is_said_to_be_so(tmp_path, capsys):
    """300 characters in one part: the part is named; a long path of short parts: its whole length is."""
    code, _, err = run_cli(capsys, "rank", "--proxy", "params", "--bench", tmp_path / ("x" * 300 + ".csv"))
    assert code == 2 and "path too long (a part of 304 bytes" in one_error_line(err)
    deep = "/".join(["d" * 100] * 45) + "/t.csv"  # every part 100 bytes, 4,550 in all
    code, _, err = run_cli(capsys, "rank", "--proxy", "params", "--bench", tmp_path / deep)
    line = one_error_line(err)
    assert code == 2 and "bytes in all, where the system allows 4,095" in line and "a part of" not in line


def test_the_protocol_names_a_missing_file_another_delimiter_and_a_table_given_twice(tmp_path, capsys):
    good = [_good(tmp_path / f"g{k}.csv", 20 + k) for k in range(2)]
    protocol = ["evaluate", "--leave-space-out", "--rank-formulas", "--out", tmp_path / "p", "--quiet"]

    def refused(*benches) -> str:
        code, out, err = run_cli(capsys, *protocol, *[a for b in benches for a in ("--bench", b)])
        assert code == 2 and not (tmp_path / "p" / PROTOCOL).exists()
        return one_error_line(err)

    assert refused(tmp_path / "gone.csv", *good).endswith(f"proxy table not found: {tmp_path / 'gone.csv'}")
    semi = _table(tmp_path / "semi.csv", [1, 2, 3, 4], delimiter=";")
    assert "the file seems to use ';' as its delimiter; a proxy table is comma-separated" in refused(semi, *good)
    assert refused(good[0], good[1], good[0]).endswith(f"{good[0]} is given twice; give each space once")
    (tmp_path / "o").mkdir()
    again = _good(tmp_path / "o" / "g0.csv", 30)
    assert f"{good[0]} and {again} are both named 'g0'" in refused(good[0], good[1], again)


def _figures(n: int) -> dict:
    return {"kendall": 0.0022, "spearman": 0.0031, "pearson": 0.00221, "n": n}


def test_rank_columns_stay_apart_for_a_table_of_millions_of_rows():
    """Bug 3 of issue 43: on a table of a million rows or more the ``n`` column ran into ``pearson``
    (``+0.0022100000``)."""
    table = ProxyTable("huge-table-name", ("a", "b", "c"), {"val_acc": None}, {"params": None})
    space = TableSpace("huge", (table,), (("val_acc",),))
    for n in (6_600_000, 12_345_678_901):
        text = format_table_ranking(space, {"params": {"huge-table-name": {"val_acc": _figures(n)}}})
        header, row = text.splitlines()[1:3]
        assert header.split() == ["table", "target", "kendall", "spearman", "pearson", "n"]
        assert row.split() == ["huge-table-name", "val_acc", "+0.002", "+0.003", "+0.002", f"{n:,}"]
        assert len(header) == len(row)  # every column as wide as its widest cell, right-aligned to its header


def test_several_proxies_on_a_table_are_one_ranking_table(tmp_path, capsys):
    """``--proxy all`` used to print one single-row table per proxy (13 on a standard table)."""
    path = _good(tmp_path / "mine.csv", 30)
    code, out, err = run_cli(capsys, "rank", "--proxy", "all", "--bench", path)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("2 proxies on the proxy table of mine (30 rows") and "ranked by" in lines[0]
    assert lines[1].split() == ["rank", "proxy", "table", "target", "kendall", "spearman", "pearson", "n"]
    rows = [line.split() for line in lines[2:]]
    assert [r[0] for r in rows] == ["1", "2"] and {r[1] for r in rows} == {"params", "nwot"}
    assert float(rows[0][4]) >= float(rows[1][4]) and out.count("proxy table of") == 1


def test_a_large_table_shows_the_progress_of_its_reading(tmp_path, capsys, monkeypatch):
    """A 6.6 M-row table ranked after 41 s with no output: a file of PROGRESS_BYTES or more says how far its
    reading is (here the threshold lowered to this small file's size), a smaller one says nothing."""
    import autoprox.data.proxy_tables as proxy_tables

    path = _good(tmp_path / "big.csv", 400)
    calls = []
    proxy_tables.read_proxy_table(path, progress=lambda done, total: calls.append((done, total)))
    assert calls == []
    monkeypatch.setattr(proxy_tables, "PROGRESS_BYTES", path.stat().st_size)
    table = proxy_tables.read_proxy_table(path, progress=lambda done, total: calls.append((done, total)))
    assert len(table) == 400 and calls and calls[-1] == (path.stat().st_size,) * 2
    assert all(a[0] <= b[0] for a, b in zip(calls, calls[1:]))
    code, out, err = run_cli(capsys, "rank", "--proxy", "params", "--bench", path)
    assert code == 0 and "reading big.csv (MB) [" in err and "400 rows" in out


@pytest.mark.parametrize("proxy", ["", ",", " , "])
def test_rank_with_no_proxy_on_a_table_says_so_as_on_a_benchmark(proxy, tmp_path, capsys):
    """``--proxy ''`` gave an IndexError traceback in format_table_ranking."""
    path = _good(tmp_path / "mine.csv")
    code, out, err = run_cli(capsys, "rank", "--proxy", proxy, "--bench", path)
    assert code == 2 and not out
    line = one_error_line(err)
    assert "no proxy given" in line and "params, nwot" in line


def test_rank_on_a_table_writes_csv_json_and_markdown_when_asked(tmp_path, capsys):
    """``--format csv|json`` on a table used to print the plain text table."""
    import json

    path = _good(tmp_path / "mine.csv", 30)
    code, out, err = run_cli(capsys, "rank", "--proxy", "params,nwot", "--bench", path, "--format", "csv")
    assert code == 0, err
    rows = list(csv.reader(out.splitlines()))
    assert rows[0] == ["rank", "proxy", "table", "target", "kendall", "spearman", "pearson", "n"]
    assert [r[0] for r in rows[1:]] == ["1", "2"] and {r[1] for r in rows[1:]} == {"params", "nwot"}
    assert float(rows[1][4]) >= float(rows[2][4]) and rows[1][7] == "30"
    code, out, err = run_cli(capsys, "rank", "--proxy", "params,nwot", "--bench", path, "--format", "json")
    assert code == 0, err
    figures = json.loads(out)
    assert figures["nwot"]["mine"]["val_acc"]["n"] == 30
    code, out, err = run_cli(capsys, "rank", "--proxy", "params,nwot", "--bench", path, "--json")
    assert json.loads(out) == figures
    code, out, err = run_cli(capsys, "rank", "--proxy", "params", "--bench", path, "--format", "markdown")
    assert code == 0, err
    lines = out.splitlines()
    assert "| table | target | kendall | spearman | pearson | n |" in lines and lines[-1].startswith("| mine | val_acc |")


@pytest.mark.parametrize("option, said", [
    (("--search-fraction", "2"), "search fraction must be in (0, 1), got 2.0"),
    (("--search-fraction", "-0.5"), "search fraction must be in (0, 1), got -0.5"),
    (("--seeds", "0,1"), "--seeds does not apply to a proxy table"),
    (("--search-fraction", "0.5"), "--search-fraction does not apply to a proxy table"),
    (("--split", "test"), "--split test does not apply to a proxy table"),
    (("--split-seed", "3"), "--split-seed does not apply to a proxy table"),
])
def test_rank_on_a_table_refuses_the_options_of_a_split_or_of_seeds(option, said, tmp_path, capsys):
    """``--search-fraction 2``, ``-0.5`` and ``--seeds -1`` were accepted silently on a table (and meant nothing).
    ``--seeds -1`` is now refused where it is typed, by the option's own type, on a table as on a benchmark
    (``tests/search/test_conversions.py``)."""
    path = _good(tmp_path / "mine.csv")
    code, out, err = run_cli(capsys, "rank", "--proxy", "params", "--bench", path, *option)
    assert code == 2 and not out and said in one_error_line(err)
    assert run_cli(capsys, "rank", "--proxy", "params", "--bench", path, "--split", "all")[0] == 0


@pytest.mark.parametrize("command, said", [
    (("search", "--space", "pit", "--bench", "{t}"), "{t} is a proxy table: a table search takes one --bench and no --space"),
    (("search", "--bench", "{t}", "--bench", "{t}"), "{t} is a proxy table: a table search takes one --bench and no --space"),
    (("transfer", "--bench", "{t}"), "{t} is a proxy table: transfer takes ViT benchmarks, not proxy tables"),
    (("evaluate", "--bench", "{t}"), "{t} is a proxy table: evaluate's outer folds take ViT benchmarks"),
])
def test_a_proxy_table_where_a_vit_benchmark_is_needed_is_named_as_one(command, said, tmp_path, capsys):
    """Each said the table lacked 'arch' and that a proxy table must have 'id' first, which it has."""
    table = str(_good(tmp_path / "t.csv"))
    code, out, err = run_cli(capsys, *[c.format(t=table) for c in command], "--targets", "val_acc",
                             "--iterations", "1", "--out", tmp_path / "r")
    line = one_error_line(err)
    assert code == 2 and said.format(t=table) in line and "'id' as its first column" not in line
    assert not (tmp_path / "r").exists()


def test_load_benchmark_of_a_proxy_table_names_read_proxy_table(tmp_path):
    from autoprox.core.errors import BenchmarkError
    from autoprox.data.benchmark import load_benchmark

    with pytest.raises(BenchmarkError, match=r"t\.csv is a proxy table .* read it with .*read_proxy_table"):
        load_benchmark(_good(tmp_path / "t.csv"))


def test_score_reads_a_table_of_unlabelled_candidates_and_the_commands_needing_labels_refuse_it(tmp_path, capsys):
    """score refused a table with no accuracy column, or with one left empty, though it needs no labels."""
    labelled = _good(tmp_path / "t.csv", rows=30)
    rows = list(csv.reader(labelled.open(encoding="utf-8")))
    with open(tmp_path / "none.csv", "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows([[r[0], *r[2:]] for r in rows])
    with open(tmp_path / "empty.csv", "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows([rows[0]] + [[r[0], "", *r[2:]] for r in rows[1:]])
    code, out, err = run_cli(capsys, "search", "--bench", labelled, "--targets", "val_acc", "--iterations", "2",
                             "--out", tmp_path / "run", "--quiet")
    assert code == 0, err
    for proxy in (tmp_path / "run" / "best.json", "lrsum(params, nwot)", "nwot"):
        code, out, err = run_cli(capsys, "score", "--proxy", proxy, "--bench", labelled, "--out", tmp_path / "t.out")
        assert code == 0, err
        for table in ("none", "empty"):
            code, out, err = run_cli(capsys, "score", "--proxy", proxy, "--bench", tmp_path / f"{table}.csv",
                                     "--out", tmp_path / f"{table}.out")
            assert code == 0, err
            assert (tmp_path / f"{table}.out").read_bytes() == (tmp_path / "t.out").read_bytes()
    said = {"none": "no accuracy column between 'id' and the first proxy column (params)",
            "empty": "accuracy column 'val_acc' has no value"}
    for table, line in said.items():
        for command in (("search", "--targets", "val_acc", "--out", tmp_path / "r2"), ("rank", "--proxy", "nwot"),
                        ("evaluate", "--few-labels", "10", "--out", tmp_path / "r3")):
            code, out, err = run_cli(capsys, *command, "--bench", tmp_path / f"{table}.csv")
            assert code == 2 and line in one_error_line(err)
    assert not (tmp_path / "r2").exists() and not (tmp_path / "r3").exists()


def test_an_lrsum_of_no_column_the_table_has_is_one_error_line_with_no_note(tmp_path, capsys):
    """rank printed 'scored as lrsum(nope, nope2)' before the error that it could not be scored."""
    table = _good(tmp_path / "t.csv")
    for command in (("rank",), ("score", "--out", tmp_path / "s.csv")):
        code, out, err = run_cli(capsys, *command, "--proxy", "lrsum(nope, nope2)", "--bench", table)
        assert code == 2 and out == "" and "scored as" not in err
        assert "none of these proxy columns" in one_error_line(err)
    code, out, err = run_cli(capsys, "rank", "--proxy", "lrsum(nope, nwot)", "--bench", table)
    assert code == 0 and "lacks nope: scored as lrsum(nwot)" in err


def test_a_plain_csv_named_gz_and_an_empty_file_say_what_they_are(tmp_path, capsys):
    """A plain CSV named .csv.gz was 'not a ViT-Bench-101 .pth file ... UnpicklingError'; an empty file was
    described as a ViT benchmark only."""
    plain = tmp_path / "t.csv.gz"
    plain.write_bytes(_good(tmp_path / "t.csv").read_bytes())
    (tmp_path / "empty.csv").write_text("")
    for bench, said in ((plain, "named .gz but not a gzip file"),
                        (tmp_path / "empty.csv", "no header row: a proxy table starts with id")):
        code, out, err = run_cli(capsys, "score", "--proxy", "nwot", "--bench", bench, "--out", tmp_path / "s.csv")
        line = one_error_line(err)
        assert code == 2 and said in line and "UnpicklingError" not in line


def test_a_table_of_another_format_is_named_as_such_and_a_benchmark_under_another_name_still_reads(tmp_path, capsys):
    """A tab-separated table (t.tsv) was read as a PyTorch archive: 'not a ViT-Bench-101 .pth file ... IndexError:
    pop from empty list'. A file of another name is read as one only when it starts as one does."""
    tabbed = tmp_path / "t.tsv"
    tabbed.write_text(_good(tmp_path / "t.csv").read_text().replace(",", "\t"))
    for command in (("search", "--out", tmp_path / "run"), ("rank",), ("score", "--out", tmp_path / "s.csv")):
        code, out, err = run_cli(capsys, *command, "--proxy", "nwot", "--bench", tabbed) if command[0] != "search" \
            else run_cli(capsys, *command, "--bench", tabbed)
        line = one_error_line(err)
        assert code == 2 and "not a benchmark file autoprox reads (named .tsv" in line and "IndexError" not in line
        assert "comma-separated .csv" in line
    assert not (tmp_path / "run").exists() and not (tmp_path / "s.csv").exists()
    from autoprox.data.benchmark import load_benchmark
    from tests.conftest import PIT_FILE

    renamed = tmp_path / "gt_pit.bin"
    renamed.write_bytes(PIT_FILE.read_bytes())
    assert len(load_benchmark(renamed).archs) == 100


def test_a_utf16_table_a_trailing_comma_and_an_id_column_in_capitals_are_named_as_such(tmp_path, capsys):
    """A spreadsheet's 'Unicode text' (UTF-16) was 'not a UTF-8 text file (byte 0)'; a header ending in a comma was
    'column 5 has no name'; 'ID' first was read as a ViT benchmark's stranger column with no word of the case."""
    text = _good(tmp_path / "t.csv").read_text(encoding="utf-8")
    (tmp_path / "u16.csv").write_text(text, encoding="utf-16")
    lines = text.splitlines()
    (tmp_path / "comma.csv").write_text("\n".join(line + "," for line in lines) + "\n", encoding="utf-8")
    (tmp_path / "caps.csv").write_text("\n".join(["ID" + lines[0][2:], *lines[1:]]) + "\n", encoding="utf-8")
    for name, said in (("u16.csv", "UTF-16 text (a spreadsheet's 'Unicode text'?), not UTF-8: save it as CSV UTF-8"),
                       ("comma.csv", "column 5 has no name (the last: a comma at the end of the header line?)"),
                       ("caps.csv", "('ID' is not 'id': names are case-sensitive)")):
        for command in (("search", "--out", tmp_path / "run"), ("score", "--proxy", "nwot", "--out", tmp_path / "s.csv"),
                        ("evaluate", "--few-labels", "5", "--out", tmp_path / "ev")):
            code, out, err = run_cli(capsys, *command, "--bench", tmp_path / name)
            line = one_error_line(err)
            assert code == 2 and (said in line or (name == "caps.csv" and command[0] == "evaluate")), (command, line)
    assert not any((tmp_path / out).exists() for out in ("run", "s.csv", "ev"))
