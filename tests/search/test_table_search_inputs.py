"""What a table search, ``score``, ``rank`` and the few-label protocol do with input they cannot use, or can use
only in part: a proxy scored on a table lacking a column, column names that are not bare identifiers, bad seeds
and options; refused in one line (exit 2) before work, or scored as documented."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from autoprox.search.table_search import TableSearchSettings
from tests.commands import one_error_line, run_cli

SMALL = TableSearchSettings(population=6, iterations=2, inner_folds=2, bags=2, term_caps=(0, 1))


def write_table(path, columns=("params", "flops", "nwot", "jacov"), rows: int = 30, labelled: int = 20,
                seed: int = 0, labels=None):
    """``id,val_acc,COLUMNS``: rows a0..a{rows-1}, the first ``labelled`` labelled, each column the label plus
    noise (so every column carries some of the order)."""
    rng = np.random.default_rng(seed)
    base = rng.normal(size=rows)
    target = 70 + base if labels is None else np.asarray(labels, dtype=float)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "val_acc", *columns])
        for i in range(rows):
            writer.writerow([f"a{i}", repr(float(target[i])) if i < labelled else "",
                             *(repr(float(base[i] + rng.normal())) for _ in columns)])
    return path


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    """A finished table search on a table with a ``jacov`` column, its best.json and table."""
    from autoprox.search.table_run import run_table_search

    folder = tmp_path_factory.mktemp("searched")
    table = write_table(folder / "mine.csv")
    run_table_search(table, ["val_acc"], folder / "run1", SMALL, quiet=True)
    return folder / "run1", table


# ------------------------------------------------------------------ a table lacking a column the proxy reads
def test_a_weighted_proxy_on_a_table_lacking_one_of_its_columns_reads_it_as_no_information(searched, tmp_path,
                                                                                            capsys):
    from autoprox.data.proxy_tables import read_proxy_table
    from autoprox.genome.weighted import WeightedFormula

    run, _ = searched
    good = write_table(tmp_path / "good.csv", columns=("params", "flops", "nwot"), seed=1)
    code, out, err = run_cli(capsys, "score", "--proxy", run / "best.json", "--bench", good, "--out", tmp_path / "o.csv")
    assert code == 0, err
    assert "Traceback" not in err and "good.csv lacks jacov: read as no information" in err
    formula = WeightedFormula.from_json(json.loads((run / "best.json").read_text())["formula"])
    columns = dict(read_proxy_table(good).proxies)
    expected = formula.score(columns | {"jacov": np.full(30, np.nan)})
    written = np.array([float(r[1]) for r in list(csv.reader(open(tmp_path / "o.csv")))[1:]])
    assert np.allclose(written, expected, rtol=1e-12)
    code, out, err = run_cli(capsys, "rank", "--proxy", run / "best.json", "--bench", good)
    assert code == 0, err
    assert "lacks jacov: read as no information" in err and "kendall" in out


def test_a_column_renamed_only_in_case_is_named_beside_the_one_the_table_lacks(searched, tmp_path, capsys):
    """'lacks jacov' of a table with 'JACOV' said nothing of the column the user renamed."""
    run, _ = searched
    upper = write_table(tmp_path / "upper.csv", columns=("params", "flops", "nwot", "JACOV"), seed=2)
    code, out, err = run_cli(capsys, "score", "--proxy", run, "--bench", upper, "--out", tmp_path / "o.csv")
    assert code == 0 and "upper.csv lacks jacov (it has 'JACOV': names are case-sensitive): read as no" in err, err


def test_a_weighted_proxy_on_a_table_with_none_of_its_columns_is_refused_naming_them(searched, tmp_path, capsys):
    run, _ = searched
    other = write_table(tmp_path / "other.csv", columns=("snip", "zen"))
    for command in (("score", "--out", tmp_path / "o.csv"), ("rank",)):
        code, out, err = run_cli(capsys, command[0], "--proxy", run / "best.json", "--bench", other, *command[1:])
        assert code == 2
        line = one_error_line(err)
        assert "has none of the proxy columns" in line and "jacov" in line and "params" in line
    assert not (tmp_path / "o.csv").exists()


def test_a_hand_edited_weighted_proxy_naming_an_unknown_column_is_scored_with_a_note(searched, tmp_path, capsys):
    run, table = searched
    best = json.loads((run / "best.json").read_text())
    best["formula"]["plain"][-1] = "jacovv"
    edited = tmp_path / "best.json"
    edited.write_text(json.dumps(best))
    code, out, err = run_cli(capsys, "score", "--proxy", edited, "--bench", table, "--out", tmp_path / "o.csv")
    assert code == 0, err
    assert "lacks jacovv: read as no information" in err


def test_a_column_the_proxy_reads_that_the_table_has_as_an_accuracy_column_is_refused_naming_where_it_stands(
        tmp_path, capsys):
    """A table's own column 'mine' placed before its first standard proxy column is an accuracy column: score and rank
    said 'lacks mine: read as no information' of a table that has it, and scored without the column the user meant."""
    from autoprox.search.table_run import run_table_search

    run_table_search(write_table(tmp_path / "t.csv", columns=("params", "flops", "mine")), ["val_acc"],
                     tmp_path / "run", SMALL, quiet=True)
    with open(tmp_path / "moved.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "mine", "params", "flops"])
        writer.writerows([[f"a{i}", i % 7, i, -i] for i in range(12)])
    moved = tmp_path / "moved.csv"
    for proxy in (tmp_path / "run", "lrsum(mine, params)", "mine"):
        for command in (("score", "--out", tmp_path / "o.csv"), ("rank",)):
            code, out, err = run_cli(capsys, command[0], "--proxy", proxy, "--bench", moved, *command[1:])
            assert code == 2, (proxy, command, err)
            line = one_error_line(err)
            assert "'mine' is an accuracy column of" in line and "put 'mine' after params" in line, line
    assert not (tmp_path / "o.csv").exists()
    code, out, err = run_cli(capsys, "search", "--bench", moved, "--targets", "flops", "--out", tmp_path / "run2")
    assert code == 2 and "'flops' is a proxy column of" in one_error_line(err)


def test_an_exported_weighted_proxy_reads_infinite_cells_as_score_does(searched, tmp_path, capsys):
    """An infinite cell (a proxy that overflowed) ranks beyond its column's finite values in ``score``; the exported
    module read it as not measured, so its scores of the same file differed."""
    import importlib.util

    run, table = searched
    rows = list(csv.reader(open(table, encoding="utf-8")))
    rows[1][2], rows[2][2], rows[3][4], rows[25][5] = "inf", "inf", "-inf", "1e400"  # labelled and unlabelled rows
    with open(tmp_path / "inf.csv", "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows)
    code, out, err = run_cli(capsys, "score", "--proxy", run, "--bench", tmp_path / "inf.csv", "--out",
                             tmp_path / "s.csv")
    assert code == 0 and "infinite cell(s)" in err, err
    code, out, err = run_cli(capsys, "export", run, "--out", tmp_path / "proxy.py")
    assert code == 0, err
    spec = importlib.util.spec_from_file_location("exported_inf", tmp_path / "proxy.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    header = rows[0]
    columns = {name: [float(row[j]) for row in rows[1:]] for j, name in enumerate(header) if j >= 2}
    written = [float(row[1]) for row in list(csv.reader(open(tmp_path / "s.csv")))[1:]]
    assert np.allclose(module.score(columns), written, rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------ column names that are not bare names
ODD = ("params", "my proxy", "ñwot✓", "2x", 'we"ird\\na,me(')


def test_a_quoted_column_name_parses_and_prints_back():
    from autoprox.genome.rank_formula import parse_formula
    from autoprox.genome.weighted import parse_weighted
    from autoprox.proxies.proxy_input import split_proxy_list

    formula = parse_formula('min(r("ñwot✓"), lrsum("my proxy", "2x", params, "a\\"b,c)"))')
    assert formula.columns == ("ñwot✓", "my proxy", "2x", "params", 'a"b,c)')
    assert str(parse_formula(str(formula))) == str(formula) and str(parse_formula("r(nwot)")) == "r(nwot)"
    genome = parse_weighted('weighted(mul(r("a,b"), r(x)), r("(y"))')
    assert len(genome) == 2 and str(parse_weighted(str(genome))) == str(genome)
    assert split_proxy_list('r("a,b"),nwot') == ['r("a,b")', "nwot"]
    for bad, said in (("r(ñwot)", "written in double quotes"), ('r("abc', "not closed"), ('r("")', "empty quoted"),
                      ('"r"(x)', "expected an operator")):
        with pytest.raises(Exception, match=said) as caught:
            parse_formula(bad)
        assert type(caught.value).__name__ == "GenomeError"


def test_a_table_whose_column_names_are_not_bare_names_is_searched_scored_ranked_and_exported(tmp_path, capsys):
    import importlib.util

    from autoprox.data.proxy_tables import read_proxy_table
    from autoprox.genome.weighted import WeightedFormula
    from autoprox.search.table_run import run_table_search

    table = write_table(tmp_path / "odd.csv", columns=ODD)
    whole = run_table_search(table, ["val_acc"], tmp_path / "whole", SMALL, quiet=True)
    stopped = run_table_search(table, ["val_acc"], tmp_path / "cut", SMALL, quiet=True, stop_after=1)
    assert stopped["finished"] is False
    resumed = run_table_search(None, None, tmp_path / "cut", resume=True, quiet=True)
    assert resumed["formula"] == whole["formula"]
    code, out, err = run_cli(capsys, "search", "--bench", table, "--targets", "val_acc", "--out", tmp_path / "run",
                             "--iterations", "2", "--quiet")
    assert code == 0, err
    best = tmp_path / "run" / "best.json"
    code, out, err = run_cli(capsys, "score", "--proxy", best, "--bench", table, "--out", tmp_path / "s.csv")
    assert code == 0, err
    code, out, err = run_cli(capsys, "rank", "--proxy", 'min(r("ñwot✓"), r("2x")),my proxy', "--bench", table)
    assert code == 0, err
    assert 'min(r("ñwot✓"), r("2x"))' in out and "my proxy" in out
    code, out, err = run_cli(capsys, "export", tmp_path / "run", "--out", tmp_path / "proxy.py")
    assert code == 0, err
    spec = importlib.util.spec_from_file_location("exported_odd", tmp_path / "proxy.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    columns = read_proxy_table(table).proxies
    formula = WeightedFormula.from_json(json.loads(best.read_text())["formula"])
    assert set(formula.plain) == set(ODD)
    assert np.allclose(module.score({n: list(v) for n, v in columns.items()}), formula.score(columns), rtol=1e-12)


# ------------------------------------------------------------------ seeds
def test_a_negative_seed_gives_one_reproducible_table_search_that_resumes(tmp_path, capsys):
    from autoprox.search.table_run import run_table_search

    table = write_table(tmp_path / "mine.csv")
    code, out, err = run_cli(capsys, "search", "--bench", table, "--targets", "val_acc", "--out", tmp_path / "a",
                             "--seed", "-1", "--iterations", "2", "--quiet")
    assert code == 0, err
    code, out, err = run_cli(capsys, "search", "--bench", table, "--targets", "val_acc", "--out", tmp_path / "b",
                             "--seed", "-1", "--iterations", "2", "--quiet")
    assert code == 0, err
    first = json.loads((tmp_path / "a" / "best.json").read_text())
    assert first["formula"] == json.loads((tmp_path / "b" / "best.json").read_text())["formula"]
    settings = TableSearchSettings(**{**SMALL.to_json(), "term_caps": SMALL.term_caps, "seed": -2})
    whole = run_table_search(table, ["val_acc"], tmp_path / "whole", settings, quiet=True)
    run_table_search(table, ["val_acc"], tmp_path / "cut", settings, quiet=True, stop_after=1)
    assert run_table_search(None, None, tmp_path / "cut", resume=True, quiet=True)["formula"] == whole["formula"]


# ------------------------------------------------------------------ what is said of a table where ViT runs are meant
def test_the_python_api_sends_a_table_to_search_table_and_reads_no_table_run_as_a_vit_run(searched, tmp_path):
    """ProxySearch(bench=T.csv).fit() said the table had no arch column; from_run said config.json had no 'bench'."""
    from autoprox.api import ProxySearch
    from autoprox.core.errors import ConfigError, RunDirError

    run, table = searched
    with pytest.raises(ConfigError, match=r"is a proxy table: ProxySearch searches genomes of ViT statistics; search "
                                          r"a table with autoprox.search_table"):
        ProxySearch(bench=str(table), targets="val_acc", iterations=2, out=str(tmp_path / "api")).fit()
    assert not (tmp_path / "api").exists()
    with pytest.raises(RunDirError, match="is a proxy-table search .* Its proxy is .*best.json"):
        ProxySearch.from_run(run)


def test_select_cache_build_and_an_unknown_format_version_say_what_a_table_is(searched, tmp_path, capsys):
    run, table = searched
    code, out, err = run_cli(capsys, "select", run, "--out", tmp_path / "sel.json")
    assert code == 2
    line = one_error_line(err)
    assert "select works on the runs of a search of ViT statistics" in line and "best.json" in line
    assert "genome" not in line and "no 'bench'" not in line
    best = json.loads((run / "best.json").read_text())
    best["format"] = "autoprox-weighted-formula/99"
    (tmp_path / "b99.json").write_text(json.dumps(best))
    code, out, err = run_cli(capsys, "score", "--proxy", tmp_path / "b99.json", "--bench", table, "--out",
                             tmp_path / "o.csv")
    assert code == 2
    assert "unknown format version 'autoprox-weighted-formula/99'" in one_error_line(err)
    code, out, err = run_cli(capsys, "cache", "build", "--bench", table)
    assert code == 2
    line = one_error_line(err)
    assert "is a proxy table" in line and "no networks to compute statistics for" in line and "'id'" not in line


def test_resuming_a_run_with_a_benchmark_of_the_other_kind_names_the_run_s_kind(searched, tmp_path, capsys):
    """``search --bench T.csv --resume --out VIT_RUN`` said the table was no ViT benchmark and to search it with
    ``search --bench`` (what was typed); ``--bench FILE.pth --resume --out TABLE_RUN`` said the .pth was no UTF-8
    text. Both now say what the run is, and neither run is touched."""
    import hashlib
    import shutil

    from tests.conftest import REPO

    run, table = searched
    vit_run = tmp_path / "pit-run"
    shutil.copytree(REPO / "runs" / "pit-reference", vit_run)

    def digests(folder):
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}

    before = digests(vit_run), digests(run)
    code, out, err = run_cli(capsys, "search", "--bench", table, "--out", vit_run, "--resume")
    assert code == 2
    line = one_error_line(err)
    assert "is a search of ViT statistics" in line and "new --out" in line and "autoprox search --bench" not in line
    pth = REPO / "autoprox" / "resources" / "vit-bench-101" / "gt_pit.pth"
    code, out, err = run_cli(capsys, "search", "--bench", pth, "--out", run, "--resume")
    assert code == 2
    line = one_error_line(err)
    assert "is a proxy-table search" in line and "leave --bench out" in line and "UTF-8" not in line
    assert (digests(vit_run), digests(run)) == before


def test_a_weighted_proxy_scored_on_networks_says_which_of_its_columns_it_reads_as_no_information(tmp_path, capsys):
    """A table search's proxy scored on a ViT space read its table's own column as 0 without a word, where on a table
    lacking the column ``score`` and ``rank`` say so."""
    from autoprox.search.table_run import run_table_search

    table = write_table(tmp_path / "own.csv", columns=("params", "flops", "own"))
    run_table_search(table, ["val_acc"], tmp_path / "run", SMALL, quiet=True)
    expected = ("reads own, which autoprox does not compute on networks: read as no information (0 after centring; "
                "an lrsum leaves it out); scored from params, flops")
    code, out, err = run_cli(capsys, "score", "--proxy", tmp_path / "run", "--space", "pit", "--out", tmp_path / "o.csv")
    assert code == 0, err
    assert expected in err and len((tmp_path / "o.csv").read_text().splitlines()) == 101
    code, out, err = run_cli(capsys, "rank", "--proxy", tmp_path / "run", "--space", "pit")
    assert code == 0, err
    assert expected in err and "kendall" in out
    code, out, err = run_cli(capsys, "rank", "--proxy", "params", "--space", "pit")
    assert code == 0 and "no information" not in err


def test_the_networks_note_passes_over_an_ensemble():
    """An ensemble (``recommended:pit/joint``) has no scorer: rank and score of it must not ask one for the note."""
    from autoprox.cli.rank import networks_note
    from autoprox.proxies.ensemble import EnsembleProxy
    from autoprox.proxies.proxy import resolve_proxy

    proxy = resolve_proxy("recommended:pit/joint")
    assert isinstance(proxy, EnsembleProxy) and networks_note(proxy) is None


def test_a_packaged_table_space_given_to_search_space_names_the_table_file_to_search(tmp_path, capsys):
    """search --space flexibert said only 'unknown space', listing the ViT spaces, though rank and evaluate take
    --space flexibert: the refusal now gives the --bench command of its packaged table, which runs."""
    code, out, err = run_cli(capsys, "search", "--space", "flexibert", "--out", tmp_path / "run")
    assert code == 2
    line = one_error_line(err)
    assert "'flexibert' is a packaged proxy table" in line and "--targets glue" in line, line
    bench = line.split("--bench ")[1].split(" ")[0]
    code, out, err = run_cli(capsys, "rank", "--proxy", "params", "--bench", bench, "--targets", "glue", "--json")
    assert code == 0 and json.loads(out), err  # the file and target given read as a table (a search of it: ~8 s)
    code, out, err = run_cli(capsys, "search", "--space", "nope", "--out", tmp_path / "other")
    assert code == 2 and "(and the proxy tables nb201, flexibert, searched through --bench)" in one_error_line(err)


def test_table_run_config_tells_a_table_run_from_every_other_folder(searched, tmp_path):
    """score's and rank's default --bench and export's refusal of an unfinished table run each read "is this a
    table run" with a check of their own; one function answers for all."""
    from autoprox.search.table_run import table_run_config

    run = searched[0]
    config = table_run_config(run)
    assert config is not None and config["kind"] == "table-search" and config["table"]["path"]
    assert table_run_config(run / "best.json") is None  # a file: no run directory
    assert table_run_config(tmp_path) is None and table_run_config(tmp_path / "nowhere") is None
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    assert table_run_config(broken) is None  # left to the caller's own reading, which names what is wrong
    other = tmp_path / "other"
    other.mkdir()
    (other / "config.json").write_text(json.dumps({"settings": {"bench": "gt_pit.pth"}}))
    assert table_run_config(other) is None


def test_a_row_with_no_value_in_the_columns_a_weighted_formula_reads_gets_no_score_and_one_with_some_keeps_its_rule():
    """A row with every cell the formula reads empty scored the intercept, an average architecture's score. Such a
    row gets NaN; a row with some empty cells reads each as no information (0 after centring), as before; a value
    in a column the formula does not read does not make a row scored."""
    from autoprox.genome.weighted import WeightedFormula

    formula = WeightedFormula(("params", "nwot"), (), (1.0, 2.0), intercept=0.25)
    nan = np.nan
    columns = {"params": np.array([1.0, 2.0, nan, 4.0, nan]), "nwot": np.array([4.0, 3.0, 2.0, 1.0, nan]),
               "other": np.array([1.0, 2.0, 3.0, 4.0, 5.0])}
    scores = formula.score(columns)
    assert np.isnan(scores[4]) and np.isfinite(scores[:4]).all()
    # row 2 has no params: read as 0 after centring, so its score is the intercept plus nwot's part alone
    alone = WeightedFormula(("nwot",), (), (2.0,), intercept=0.25).score({"nwot": columns["nwot"]})
    assert scores[2] == pytest.approx(alone[2], abs=1e-12)
    # a table lacking one of the columns reads it as no information on every row; a row empty in the rest is unscored
    lacking = formula.score({"nwot": np.array([1.0, nan, 3.0]), "other": np.array([1.0, 2.0, 3.0])})
    assert np.isnan(lacking[1]) and np.isfinite(lacking[[0, 2]]).all()


def test_a_rank_formula_on_a_table_gives_no_score_to_a_row_with_none_of_its_columns_measured(tmp_path, capsys):
    """A rank formula reads an empty cell as no information too: a row empty in every column it reads scored a
    constant (0 for a product), as if measured."""
    table = write_table(tmp_path / "t.csv")
    table.write_text(table.read_text() + "blank,,,,,1.5\n")
    code, out, err = run_cli(capsys, "score", "--proxy", "mul(r(params), r(nwot))", "--bench", table,
                             "--out", tmp_path / "s.csv")
    assert code == 0, err
    written = list(csv.reader(open(tmp_path / "s.csv")))[1:]
    assert written[-1] == ["blank", ""] and all(r[1] for r in written[:-1])
    assert "1 of the 31 rows got no score ('blank')" in err
