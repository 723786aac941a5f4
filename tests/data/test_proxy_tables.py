"""Proxy tables as labelled spaces: the reader and its refusals, rank formulas without units, rank on a
table, and the N-space protocol on small cuts of the packaged tables."""

from __future__ import annotations

import csv
import gzip
import json
import random
import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import kendalltau, rankdata

from autoprox.apps.rank_search import (
    MISSING_POLICIES,
    RankSearchSettings,
    best_single,
    figures_on,
    greedy_lrsum,
    prepare_spaces,
    search_rank_formula,
)
from autoprox.apps.protocols.space import lrsum_all, run_space_protocol, select_formula
from autoprox.cli.main import main as cli
from autoprox.core.errors import BenchmarkError, ConfigError, GenomeError, RunDirError
from autoprox.data.proxy_tables import (
    STANDARD_PROXIES,
    ProxyTable,
    TableSpace,
    load_table_space,
    read_proxy_table,
    table_space_names,
)
from autoprox.genome.rank_formula import MISSING_COLUMN_SCORING, parse_formula
from autoprox.proxies.proxy import resolve_proxy
from autoprox.proxies.table_scores import space_kendall, table_scores
from autoprox.search.rundir import PROTOCOL


def _write(path: Path, header: list[str], rows: list[list]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


@pytest.fixture(scope="module")
def nb201() -> TableSpace:
    return load_table_space("nb201")


@pytest.fixture(scope="module")
def flexibert() -> TableSpace:
    return load_table_space("flexibert")


def _cut(space: TableSpace, rows: int, name: str | None = None, table: int | None = None) -> TableSpace:
    """The first ``rows`` rows of each table (or of table ``table`` alone) as a space of its own."""
    picks = range(len(space.tables)) if table is None else [table]
    return TableSpace(name or space.name, tuple(space.tables[i].subset(range(rows)) for i in picks),
                      tuple(space.targets[i] for i in picks))


# ------------------------------------------------------------------------- the reader
def test_the_packaged_tables_read_with_their_published_sizes_and_columns(nb201, flexibert):
    assert {"nb201", "flexibert"} <= set(table_space_names())
    assert [len(t) for t in nb201.tables] == [9445, 9445]
    assert nb201.proxy_names == STANDARD_PROXIES
    assert [t.targets for t in nb201.tables] == [["val_acc"], ["val_acc"]]
    table = flexibert.tables[0]
    assert len(table) == 500 and table.targets[0] == "glue" and len(table.targets) == 9
    assert list(table.proxies)[:2] == ["params", "jacov"]  # renamed where the definition is the standard one
    # NAS-Bench-201's published orientation figures (the tables' README): Kendall of params 0.568 and 0.547
    figures = space_kendall("params", nb201)[1]
    assert figures["nb201-cifar10/val_acc"] == pytest.approx(0.568, abs=5e-4)
    assert figures["nb201-imagenet16-120/val_acc"] == pytest.approx(0.547, abs=5e-4)


def test_a_gzipped_table_reads_as_the_plain_one(tmp_path):
    plain = _write(tmp_path / "t.csv", ["id", "val_acc", "params", "nwot"], [["a", 1, 2, 3], ["b", 2, 3, 1], ["c", 3, 5, 4]])
    packed = tmp_path / "t.csv.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    a, b = read_proxy_table(plain), read_proxy_table(packed)
    assert a.ids == b.ids and a.name == b.name == "t"
    assert all(np.array_equal(a.proxies[k], b.proxies[k]) for k in a.proxies)


def test_columns_after_the_first_standard_proxy_are_proxies_and_those_before_are_targets(tmp_path):
    path = _write(tmp_path / "t.csv", ["id", "val_acc", "test_acc", "params", "mine"],
                  [["a", 1, 2, 3, ""], ["b", 2, 3, 1, 7], ["c", 3, 5, 4, 8]])
    table = read_proxy_table(path)
    assert table.targets == ["val_acc", "test_acc"]
    assert list(table.proxies) == ["params", "mine"]
    assert np.isnan(table.proxies["mine"][0])


def test_missing_value_spellings_read_as_empty_cells(tmp_path):
    path = _write(tmp_path / "t.csv", ["id", "val_acc", "params", "nwot"],
                  [["a", "NA", 3, "nan"], ["b", 2, "N/A", 7], ["c", "null", 4, "None"], ["d", 4, 5, "#N/A"]])
    table = read_proxy_table(path)
    assert np.isnan(table.accuracies["val_acc"][[0, 2]]).all() and table.accuracies["val_acc"][3] == 4
    assert np.isnan(table.proxies["params"][1]) and np.isnan(table.proxies["nwot"][[0, 2, 3]]).all()
    assert table.notes == ()


def test_an_infinite_proxy_value_ranks_beyond_the_finite_ones_and_is_noted(tmp_path, capsys):
    path = _write(tmp_path / "t.csv", ["id", "val_acc", "params", "synflow"],
                  [["a", 1, 2, "-inf"], ["b", 2, 3, 5.0], ["c", 3, 4, "inf"], ["d", 4, 5, "Infinity"], ["e", 5, 6, 9.0]])
    table = read_proxy_table(path)
    values = table.proxies["synflow"]
    assert np.isfinite(values).all()
    assert values[0] < 5.0 < 9.0 < values[2] == values[3]
    assert len(table.notes) == 1 and "'synflow' has 3 infinite cell(s)" in table.notes[0]
    assert cli(["rank", "--proxy", "synflow", "--bench", str(path)]) == 0
    err = capsys.readouterr().err
    assert "3 infinite cell(s)" in err


def test_an_infinite_value_beside_finite_ones_near_the_largest_float_still_ranks_beyond_them(tmp_path):
    """'inf' was replaced by the largest finite value plus the spread, which overflowed back to inf when the finite
    values came near 1.8e308: the cell was read as not measured (its row left out of the correlations) and NumPy
    printed 'overflow encountered in subtract'."""
    path = _write(tmp_path / "t.csv", ["id", "val_acc", "params", "synflow"],
                  [["a", 1, 2, "-inf"], ["b", 2, 3, "-1e308"], ["c", 3, 4, 5.0], ["d", 4, 5, "1e308"],
                   ["e", 5, 6, "inf"], ["f", 6, 7, "1.7976931348623157e308"]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        values = read_proxy_table(path).proxies["synflow"]
    assert np.isfinite(values).all()
    assert values[0] < values[1] < values[2] < values[3] < values[5] == values[4]  # inf ties the largest float


def test_comment_lines_are_skipped_as_the_vit_csv_reader_skips_them_and_lines_are_counted_in_the_file(tmp_path,
                                                                                                       capsys):
    """A '#' line in a proxy table was read as its header ('the first column must be 'id', found '# ...'') or as a
    row of one cell, where the ViT CSV reader skips it: a line whose first character other than a space is '#' is a
    comment in both. An id that starts with '#' is written quoted, as a CSV writer quotes it; a '#' inside a quoted
    cell that spans lines is no comment."""
    text = ('# PiT proxies, seed 0\n'
            '  # measured on 8 gaussian images\n'
            'id,val_acc,params,nwot\n'
            'a,1,2,3\n'
            '# b: not measured yet\n'
            '"#c",2,4,5\n'
            '"d\n# part of d\'s id",3,6,7\n'
            'e,4,8,9\n')
    path = tmp_path / "commented.csv"
    path.write_text(text, encoding="utf-8")
    table = read_proxy_table(path)
    assert table.ids == ("a", "#c", "d\n# part of d's id", "e")
    assert table.proxies["nwot"].tolist() == [3.0, 5.0, 7.0, 9.0]
    # a comment among the rows might be a row whose id starts with '#' written unquoted: said on stderr
    said = ("note: commented.csv: 1 line(s) after the header starting with '#' skipped as comments (the first: line "
            "5); an id that starts with '#' is written quoted (\"#5\")")
    assert table.notes == (said,)
    assert cli(["rank", "--proxy", "nwot", "--bench", str(path), "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["commented"]["val_acc"]["n"] == 4 and said in err
    above = tmp_path / "above.csv"
    above.write_text(text.replace("# b: not measured yet\n", ""), encoding="utf-8")
    assert read_proxy_table(above).notes == ()  # comments above the header are the table's description
    bad = tmp_path / "bad.csv"
    bad.write_text(text + "# f follows\nf,5,x,9\n", encoding="utf-8")
    with pytest.raises(BenchmarkError, match="line 11: column 'params' is 'x', not a number"):
        read_proxy_table(bad)


BAD_TABLES = {
    "no id": (["name", "val_acc", "params"], [["a", 1, 2], ["b", 2, 3], ["c", 3, 4]], "first column must be 'id'"),
    "duplicate id": (["id", "val_acc", "params"], [["a", 1, 2], ["b", 2, 3], ["a", 3, 4]],
                     "line 4: id 'a' appears again (first on line 2)"),
    "not a number": (["id", "val_acc", "params"], [["a", 1, 2], ["b", "high", 3], ["c", 3, 4]],
                     "line 3: column 'val_acc' is 'high', not a number"),
    # Python's float reads these two (1000.0 and 12.0); a table writer never means them as numbers
    "digit separator": (["id", "val_acc", "params"], [["a", 1, 2], ["b", 2, "1_000"], ["c", 3, 4]],
                        "line 3: column 'params' is '1_000', not a number"),
    "fullwidth digits": (["id", "val_acc", "params"], [["a", 1, 2], ["b", "\uff11\uff12", 3], ["c", 3, 4]],
                         "line 3: column 'val_acc' is '\uff11\uff12', not a number"),
    "infinite target": (["id", "val_acc", "params"], [["a", 1, 2], ["b", "inf", 3], ["c", 3, 4]],
                        "target column 'val_acc' is inf, outside"),
    "infinite proxy column": (["id", "val_acc", "params", "synflow"],
                              [["a", 1, 2, "inf"], ["b", 2, 3, "inf"], ["c", 3, 4, "-inf"]],
                              "proxy column 'synflow' has no finite value"),
    "empty proxy column": (["id", "val_acc", "params", "nwot"], [["a", 1, 2, ""], ["b", 2, 3, ""], ["c", 3, 4, ""]],
                           "proxy column 'nwot' has no value"),
    "no accuracy": (["id", "params", "nwot"], [["a", 1, 2], ["b", 2, 3], ["c", 3, 4]], "no accuracy column"),
    "upper-case proxy names": (["id", "val_acc", "Params", "NWOT"], [["a", 1, 2, 3], ["b", 2, 3, 4], ["c", 3, 4, 5]],
                               "none is (names are case-sensitive: 'Params' is not 'params')"),
    "two rows": (["id", "val_acc", "params"], [["a", 1, 2], ["b", 2, 3]], "only 2 row(s)"),
    "ragged": (["id", "val_acc", "params"], [["a", 1, 2], ["b", 2], ["c", 3, 4]], "line 3: 2 cells, the header has 3"),
    "a column named twice": (["id", "val_acc", "params", "params"], [["a", 1, 2, 3], ["b", 2, 3, 4], ["c", 3, 4, 5]],
                             "header: columns 3 and 4 are both named 'params'; name each column once"),
    # a header cell's spaces are dropped, so these two name one column: both are shown as written
    "'id' and 'id '": (["id", "val_acc", "params", "id "], [["a", 1, 2, 3], ["b", 2, 3, 4], ["c", 3, 4, 5]],
                       "header: columns 1 ('id') and 4 ('id ') are both named 'id' once the spaces around a name are "
                       "dropped; name each column once"),
}


@pytest.mark.parametrize("case", sorted(BAD_TABLES))
def test_a_bad_table_is_refused_in_one_line_with_exit_2(case, tmp_path, capsys):
    header, rows, expected = BAD_TABLES[case]
    path = _write(tmp_path / "bad.csv", header, rows)
    with pytest.raises(BenchmarkError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        read_proxy_table(path)
    if header[0] == "id":  # a table by its form: rank reads it as one and refuses it in one line
        assert cli(["rank", "--proxy", "params", "--bench", str(path)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("autoprox: error: ") and expected.split(":")[-1].strip() in err[0]


def test_a_1_gb_table_is_refused_before_it_is_read(tmp_path, capsys):
    path = tmp_path / "huge.csv"
    with open(path, "wb") as handle:
        handle.write(b"id,val_acc,params\n")
        handle.truncate(1 << 30)  # a sparse 1 GiB file: nothing to read, the size alone refuses it
    with pytest.raises(BenchmarkError, match="more than the"):
        read_proxy_table(path)
    assert cli(["rank", "--proxy", "params", "--bench", str(path)]) == 2
    assert "bytes, more than the" in capsys.readouterr().err


# ------------------------------------------------------------------------- unit-free formulas
FORMULAS = ["r(params)", "lr(params)", "z(params)", "z(grasp)", "add(lr(nwot), z(params))",
            "sub(mul(z(jacov), lr(grasp)), rerank(max(z(params), neg(lr(snip)))))",
            "lrsum(params, grasp, jacov, nwot)", "first(r(params), r(flops), lrsum(nwot, jacov))"]


@pytest.mark.parametrize("formula", FORMULAS)
@pytest.mark.parametrize("column", ["params", "grasp", "jacov"])
def test_a_formula_ranks_the_same_when_a_column_is_scaled_by_1e6(formula, column, nb201):
    """grasp and jacov hold negative values: the transforms are unit-free for every sign."""
    table = nb201.tables[0].subset(range(2000))
    scaled = {**table.proxies, column: table.proxies[column] * 1e6}
    parsed = parse_formula(formula)
    before, after = parsed.score(table.proxies), parsed.score(scaled)
    assert kendalltau(before, after).statistic == pytest.approx(1.0, abs=1e-9)
    assert np.allclose(before, after, rtol=1e-9, atol=1e-9)


def test_a_formula_prints_as_it_parses_and_bad_formulas_are_refused_in_one_line():
    for text in FORMULAS:
        assert str(parse_formula(text)) == text
    for bad, words in [("add(lr(nwot))", "takes 2 argument"), ("lr(+)", "expected a proxy column"), ("foo(nwot)", "unknown"),
                       ("lr(nwot", "ends early"), ("lr(nwot))", "left over"), ("lrsum(nwot, nwot)", "twice"),
                       ("neg(" * 60 + "lr(x)" + ")" * 60, "nested more than"), ("first(r(params))", "two alternatives")]:
        with pytest.raises(GenomeError, match=words):
            parse_formula(bad)


def test_lrsum_is_the_az_nas_sum_of_log_ranks_and_skips_columns_a_space_lacks(flexibert):
    table = flexibert.tables[0]
    scores = table_scores(resolve_proxy("lrsum(params, jacov, nwot, zen)"), table)
    n = len(table)  # AZ-NAS: the sum over proxies of log(rank / n), tied values sharing their mean rank
    by_hand = np.log(rankdata(table.proxies["params"]) / n) + np.log(rankdata(table.proxies["jacov"]) / n)
    assert kendalltau(scores, by_hand).statistic == pytest.approx(1.0, abs=1e-9)


def test_first_takes_the_first_alternative_whose_columns_the_space_has(nb201):
    """first(...) chooses by the columns a table has, never by its values: on a table with params it is
    r(params); without params, r(flops); with neither, the log-rank sum over the columns it has."""
    table = nb201.tables[0].subset(range(300))
    formula = parse_formula("first(r(params), r(flops), lrsum(params, flops, nwot, jacov))")
    assert formula.columns == ("params", "flops", "nwot", "jacov")
    cases = [(table.proxies, "r(params)"),
             ({c: v for c, v in table.proxies.items() if c != "params"}, "r(flops)"),
             ({c: table.proxies[c] for c in ("nwot", "synflow")}, "lrsum(params, flops, nwot, jacov)")]
    for columns, expected in cases:
        assert str(formula.resolved(columns)) == expected
        scores = formula.score(columns, missing="refuse")
        by_hand = parse_formula(expected).score(columns, missing="refuse")
        assert np.allclose(scores, by_hand, atol=1e-12)
        assert np.ptp(scores) > 0  # never a constant score
    # nested: an operator over a first
    nested = parse_formula("add(first(z(params), z(flops)), lr(nwot))")
    assert str(nested.resolved({"flops": 1, "nwot": 1})) == "add(z(flops), lr(nwot))"
    # none readable: the last alternative, refused by name under refuse, no information under neutral
    lacking = {"synflow": table.proxies["synflow"]}
    with pytest.raises(GenomeError, match="'flops'"):
        parse_formula("first(r(params), r(flops))").score(lacking, missing="refuse")
    assert not parse_formula("first(r(params), r(flops))").score(lacking, missing="neutral").any()
    # a search's policy over spaces (skip) is not a rule for scoring one table
    assert "skip" in MISSING_POLICIES and "skip" not in MISSING_COLUMN_SCORING
    with pytest.raises(ConfigError, match="missing must be one of refuse, neutral, got 'skip'"):
        parse_formula("r(flops)").score(lacking, missing="skip")


def test_a_fallback_formula_reads_only_the_first_alternative_on_networks():
    """On a computed space params is always computable, so first(r(params), ...) computes params alone,
    not the zoo proxies of its later alternatives."""
    proxy = resolve_proxy("first(r(params), lrsum(params, nwot, snip, jacov))")
    assert proxy.scorer.computable() == ("params",)
    assert resolve_proxy("first(r(head_confidence), r(flops))").scorer.computable() == ("flops",)


# ------------------------------------------------------------------------- rank on a table
def test_rank_on_a_user_table_of_the_documented_form(tmp_path, capsys, nb201):
    table = nb201.tables[0].subset(range(300))
    rows = [[i, a, p, n] for i, a, p, n in zip(table.ids, table.accuracies["val_acc"], table.proxies["params"],
                                               table.proxies["nwot"])]
    path = _write(tmp_path / "mine.csv", ["id", "val_acc", "params", "nwot"], rows)
    assert cli(["rank", "--proxy", "lrsum(params, nwot)", "--bench", str(path), "--targets", "val_acc",
                "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)["mine"]["val_acc"]
    expected = kendalltau(table_scores(parse_formula("lrsum(params, nwot)"), table), table.accuracies["val_acc"])
    assert figures["kendall"] == pytest.approx(expected.statistic, abs=1e-9) and figures["n"] == 300
    # a formula reading a column the table lacks: one line naming the column
    assert cli(["rank", "--proxy", "add(lr(params), z(zen))", "--bench", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'zen'" in err[0] and "does not have" in err[0]
    # a label-free formula on a table lacking its first choice: the fallback, said in one line
    lacking = _write(tmp_path / "no-params.csv", ["id", "val_acc", "nwot"], [[r[0], r[1], r[3]] for r in rows])
    assert cli(["rank", "--proxy", "first(r(params), lrsum(params, nwot))", "--bench", str(lacking), "--json"]) == 0
    printed = capsys.readouterr()
    fallback = json.loads(printed.out)["no-params"]["val_acc"]["kendall"]
    assert fallback == pytest.approx(kendalltau(table.proxies["nwot"], table.accuracies["val_acc"]).statistic, abs=1e-9)
    assert "lacks params: scored as lrsum(nwot)" in printed.err
    # the recommended label-free proxy on a table with neither size count: its first single-proxy fallback that
    # the table has (the committed protocols rank l2_norm above nwot), not the log-rank sum of both
    both = _write(tmp_path / "no-size.csv", ["id", "val_acc", "nwot", "l2_norm"],
                  [[r[0], r[1], r[3], -r[3] if k % 2 else r[3]] for k, r in enumerate(rows)])
    assert cli(["rank", "--proxy", "recommended:any/joint", "--bench", str(both), "--json"]) == 0
    printed = capsys.readouterr()
    chosen = [a for a in printed.err.split("scored as ", 1)[1].split() if a.startswith("r(")][0].rstrip(",;")
    assert chosen in ("r(l2_norm)", "r(nwot)")  # whichever single column the committed rule ranks first
    column = chosen[2:-1]
    scores = np.array([r[3] if column == "nwot" else (-r[3] if k % 2 else r[3]) for k, r in enumerate(rows)])
    expected = kendalltau(scores, table.accuracies["val_acc"]).statistic
    assert json.loads(printed.out)["no-size"]["val_acc"]["kendall"] == pytest.approx(expected, abs=1e-9)
    # a genome of the per-block statistics needs networks: refused, not guessed
    assert cli(["rank", "--proxy", "autoprox_p", "--bench", str(path)]) == 2
    assert "cannot be scored on the proxy table" in capsys.readouterr().err


def test_rank_on_a_packaged_table_space(capsys):
    assert cli(["rank", "--proxy", "params", "--space", "flexibert"]) == 0
    out = capsys.readouterr().out
    assert "flexibert-glue" in out and "+0.454" in out


# ------------------------------------------------------------------------- search and protocol
@pytest.fixture(scope="module")
def three_spaces(nb201, flexibert):
    """Three small labelled spaces cut from the packaged tables (the two NB201 datasets as two spaces here)."""
    return [_cut(nb201, 400, "c10", 0), _cut(nb201, 400, "in16", 1), _cut(flexibert, 200)]


def test_the_search_is_seeded_and_its_selection_reads_the_training_spaces_only(three_spaces):
    settings = RankSearchSettings(population=12, iterations=12, max_rows=300)
    a = search_rank_formula(three_spaces[:2], 7, settings)
    b = search_rank_formula(three_spaces[:2], 7, settings)
    assert a.hall_of_fame == b.hall_of_fame and a.evaluations > 12
    formula, per_space, worst = select_formula(a.hall_of_fame, three_spaces[:2])
    assert set(per_space) == {"c10", "in16"} and worst == min(per_space.values())
    assert min(per_space.values()) == max(min(select_formula([h], three_spaces[:2])[1].values())
                                          for h in a.hall_of_fame)


def _exact_space(name: str, seed: int, rows: int = 120) -> TableSpace:
    """A labelled space whose accuracy is its ``nwot`` column: ``lr(nwot)`` has Kendall 1 there."""
    draw = np.random.default_rng(seed)
    proxies = {column: draw.normal(size=rows) for column in ("params", "flops", "snip", "nwot")}
    table = ProxyTable(name, tuple(str(i) for i in range(rows)), {"acc": proxies["nwot"].copy()}, proxies)
    return TableSpace(name, (table,), (("acc",),))


def test_the_rank_formula_search_is_the_engine_s_evolution_and_keeps_its_best_seed(monkeypatch):
    """search_rank_formula runs Algorithm 1 of autoprox.search.evolution (one evolve_step per iteration) with a
    MemoisedFitness as its evaluations; the best formula, given as a seed, stays in every population (elitism),
    and the same seed gives the same hall of fame."""
    from autoprox.apps import rank_search
    from autoprox.search.fitness import MemoisedFitness

    spaces = [_exact_space(name, i) for i, name in enumerate(("a", "b", "c"))]
    evaluators, populations = [], []

    class Watched(rank_search.SpaceFitness):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            evaluators.append(self)

    step = rank_search.evolve_step

    def watched_step(state, *args, **kwargs):
        log = step(state, *args, **kwargs)
        populations.append({m.genome for m in state.population})
        return log

    monkeypatch.setattr(rank_search, "SpaceFitness", Watched)
    monkeypatch.setattr(rank_search, "evolve_step", watched_step)
    settings = RankSearchSettings(population=8, iterations=15, max_rows=200)
    too_big = "add(lr(params), add(lr(flops), add(lr(snip), add(lr(nwot), add(z(params), z(flops))))))"
    seeds = ["lr(nwot)", too_big]  # 11 nodes: left out
    outcome = search_rank_formula(spaces, 3, settings, seeds=seeds)
    evaluator = evaluators[0]
    assert isinstance(evaluator, MemoisedFitness) and outcome.evaluations == len(evaluator.memo) > 8
    assert len(populations) == settings.iterations
    assert all("lr(nwot)" in population and len(population) == 8 for population in populations)
    assert outcome.best == "lr(nwot)" and outcome.hall_of_fame[0][0] == pytest.approx(1 - settings.parsimony)
    assert parse_formula(too_big).root.size > settings.max_size and too_big not in evaluator.memo
    again = search_rank_formula(spaces, 3, settings, seeds=seeds)
    assert again.hall_of_fame == outcome.hall_of_fame and again.evaluations == outcome.evaluations


def test_the_simple_searchers_choose_on_their_spaces(three_spaces):
    name, value = best_single(three_spaces[:2], "mean")
    assert name in STANDARD_PROXIES and -1 <= value <= 1
    text, value = greedy_lrsum(three_spaces[:2], "worst")
    assert text.startswith("lrsum(") and value >= best_single(three_spaces[:2], "worst")[1] - 1e-9


def test_with_missing_skip_a_formula_is_judged_on_the_spaces_having_its_columns(three_spaces):
    c10, in16, flex = three_spaces
    prepared = prepare_spaces(three_spaces, None, random.Random(0))
    synflow = parse_formula("lr(synflow)")  # FlexiBERT has no synflow column
    assert "synflow" not in flex.tables[0].proxies
    neutral = figures_on(synflow, prepared)
    skipped = figures_on(synflow, prepared, "skip")
    assert set(neutral) == {"c10", "in16", "flexibert"} and neutral["flexibert"] == 0.0
    assert skipped == {"c10": neutral["c10"], "in16": neutral["in16"]}
    assert figures_on(synflow, prepared[1:], "skip") is None  # one of two spaces kept: not a candidate
    settings = RankSearchSettings(population=12, iterations=12, max_rows=300, missing="skip", objective="worst")
    outcome = search_rank_formula(three_spaces, 3, settings)
    for fitness, text, per_space in outcome.hall_of_fame:
        formula = parse_formula(text)
        assert set(per_space) == {p.name for p in prepared if p.has_columns(formula)} and len(per_space) >= 2
        assert fitness == pytest.approx(min(per_space.values()) - settings.parsimony * formula.root.size, abs=1e-8)
    with pytest.raises(ConfigError, match="missing-column policy"):
        RankSearchSettings(missing="drop").check()


def test_the_margin_objective_is_the_worst_lead_over_each_space_s_better_size_count(three_spaces, tmp_path):
    """--objective margin: a formula's fitness is the worst over the training spaces of its Kendall less the
    better of r(params) and r(flops) there (FlexiBERT has no flops: its parameter count), and the protocol
    selects by the same lead."""
    from autoprox.apps.rank_search import space_value
    from autoprox.search.objectives import objective_kinds, space_objective

    prepared = prepare_spaces(three_spaces, None, random.Random(0))
    sizes = {}
    for space in three_spaces:
        counts = [space_kendall(c, space)[0] for c in ("params", "flops")
                  if all(c in t.proxies for t in space.tables)]
        sizes[space.name] = max(counts)
    assert {p.name: p.size_figure for p in prepared} == pytest.approx(sizes, abs=1e-12)
    formula = parse_formula("add(lr(nwot), lr(params))")
    per_space = figures_on(formula, prepared)
    assert space_value(space_objective("margin"), per_space, prepared) == pytest.approx(
        min(per_space[n] - sizes[n] for n in per_space), abs=1e-12)
    assert space_value(space_objective("worst"), per_space, prepared) == pytest.approx(min(per_space.values()), abs=1e-12)
    size_only = figures_on(parse_formula("r(params)"), prepared)  # never ahead of itself
    assert space_value(space_objective("margin"), size_only, prepared) <= 1e-12
    settings = RankSearchSettings(population=10, iterations=8, max_rows=200, objective="margin")
    outcome = search_rank_formula(three_spaces, 5, settings)
    assert outcome.hall_of_fame and outcome.hall_of_fame[0][0] > -1  # the search runs on the lead
    chosen, figures, lead = select_formula(outcome.hall_of_fame, three_spaces, objective="margin")
    leads = [min(select_formula([h], three_spaces)[1][n] - sizes[n] for n in sizes) for h in outcome.hall_of_fame]
    assert min(figures[n] - sizes[n] for n in sizes) == pytest.approx(max(leads), abs=1e-12)
    assert lead == pytest.approx(max(leads), abs=1e-12)  # the figure the selection compared, returned
    from autoprox.cli.command_options import EVALUATE_OPTIONS

    offered = next(o for o in EVALUATE_OPTIONS if o.name == "objective").choices
    assert list(offered) == objective_kinds("spaces")  # the command line offers every registered objective over spaces


def test_the_n_space_protocol_on_small_tables(three_spaces, tmp_path, capsys):
    settings = RankSearchSettings(population=10, iterations=8, max_rows=200)
    said = []
    record = run_space_protocol(three_spaces, tmp_path / "p", seeds=(0, 1), settings=settings, samples=30,
                                say=said.append)
    assert list(record["directions"]) == ["c10", "in16", "flexibert"]
    flex = record["directions"]["flexibert"]
    assert flex["training"] == ["c10", "in16"] and len(flex["searched"]) == 2
    assert "flops" not in flex["figures"] and "flops" not in flex["paired"]  # FlexiBERT has no FLOPs column
    assert flex["baselines"]["lrsum-all"] == lrsum_all(three_spaces[2]) == "lrsum(params, jacov)"
    assert flex["figures"]["params"] == pytest.approx(space_kendall("params", three_spaces[2])[0], abs=1e-9)
    for pair in flex["paired"].values():
        assert pair["low"] <= pair["high"] and 0 <= pair["seeds_ahead"] <= 2
    assert record["summary"]["params"]["spaces"] == 3 and record["summary"]["flops"]["spaces"] == 2
    # resumed from its file: nothing run again, the same record
    again = run_space_protocol(three_spaces, tmp_path / "p", seeds=(0, 1), settings=settings, samples=30,
                               say=said.append)
    assert again["directions"] == record["directions"] and any("resuming" in s for s in said)
    with pytest.raises(RunDirError, match="another protocol"):
        run_space_protocol(three_spaces, tmp_path / "p", seeds=(0,), settings=settings, samples=30, say=said.append)


def test_the_protocol_from_the_command_line(tmp_path, capsys, nb201, flexibert):
    files = []
    for space, rows in ((nb201, 300), (flexibert, 150)):
        for table in space.tables:
            cut = table.subset(range(rows))
            header = ["id", space.targets[0][0], *cut.proxies]
            body = [[cut.ids[i], cut.accuracies[space.targets[0][0]][i], *(cut.proxies[c][i] for c in cut.proxies)]
                    for i in range(rows)]
            files.append(str(_write(tmp_path / f"{table.name}.csv", header, body)))
    args = ["evaluate", "--leave-space-out", "--rank-formulas", "--out", str(tmp_path / "cli"), "--seeds", "2",
            "--iterations", "2", "--bootstrap", "20", "--quiet"]
    for path in files:
        args += ["--bench", path]
    assert cli(args) == 0
    out = capsys.readouterr().out
    assert "left out flexibert-glue" in out and "searched - params" in out
    assert (tmp_path / "cli" / PROTOCOL).is_file()
    assert cli(["evaluate", "--rank-formulas", "--bench", files[0]]) == 2
    assert "add --leave-space-out" in capsys.readouterr().err


def test_the_report_of_an_n_space_protocol_has_a_forest_plot_per_left_out_space(three_spaces, tmp_path, capsys):
    settings = RankSearchSettings(population=8, iterations=8, max_rows=150)
    run_space_protocol(three_spaces, tmp_path / "p", seeds=(0,), settings=settings, samples=20, say=lambda _: None)
    assert cli(["report", str(tmp_path / "p"), "--out", str(tmp_path / "r.html")]) == 0
    page = (tmp_path / "r.html").read_text()
    for space in ("c10", "in16", "flexibert"):
        assert f'id="figure-forest-{space}"' in page and f"Left out: {space}" in page
    assert "<svg" in page and "lrsum-all" in page and "8 x 8" in page and "iterations x population" in page
    # a record of the generational search that came before the engine's evolution still opens
    record = json.loads((tmp_path / "p" / PROTOCOL).read_text())
    settings = record["spec"]["settings"]
    settings.update(generations=25, elite=4, tournament=3, population=48)
    del settings["iterations"]
    (tmp_path / "p" / PROTOCOL).write_text(json.dumps(record))
    assert cli(["report", str(tmp_path / "p"), "--out", str(tmp_path / "old.html")]) == 0
    assert "generations x population" in (tmp_path / "old.html").read_text()


@pytest.fixture(scope="module")
def pit_tiny_file(pit_small, tmp_path_factory):
    from tests.conftest import benchmark_jsonl

    return benchmark_jsonl(pit_small.subset(range(6)), tmp_path_factory, "pit-tiny-tables.jsonl")


def test_a_rank_formula_on_a_computed_space_computes_its_columns_and_a_failing_one_is_an_empty_cell(
        pit_tiny_file, session_cache, capsys):
    """On networks the columns come from params, flops and the zoo; EPE-NAS fails on a batch of 2 images of 2
    labels (no label twice), and then it is no information, as an empty table cell is."""
    figures = {}
    for formula in ("lrsum(params, nwot, epe_nas)", "lrsum(params, nwot)"):
        assert cli(["rank", "--proxy", formula, "--bench", str(pit_tiny_file), "--split", "all", "--json",
                    "--targets", "c100_kd", "--batch-size", "2", "--cache-dir", str(session_cache.root)]) == 0
        figures[formula] = json.loads(capsys.readouterr().out)["c100_kd"]["kendall"]
    assert figures["lrsum(params, nwot, epe_nas)"] == pytest.approx(figures["lrsum(params, nwot)"], abs=1e-12)
    assert cli(["rank", "--proxy", "add(lr(params), z(head_confidence))", "--bench", str(pit_tiny_file)]) == 2
    assert "cannot compute on networks" in capsys.readouterr().err


@pytest.mark.parametrize("space", ["autoformer", "pit"])
def test_the_computed_vit_tables_hold_what_autoprox_computes_on_the_networks(space):
    """The packaged ViT tables' size columns are the benchmark architectures' own counts (in millions), row by row,
    and their accuracies the benchmark's."""
    from autoprox.data.benchmark import default_bench_path, load_benchmark
    from autoprox.proxies.scorers import ARCHITECTURE_PROXIES
    from autoprox.spaces.architectures import arch_to_config

    table = load_table_space(space).tables[0]
    bench = load_benchmark(default_bench_path(space))
    by_id = {json.dumps(arch_to_config(a), sort_keys=True, separators=(",", ":")): i for i, a in enumerate(bench.archs)}
    assert len(table) == len(bench) == 100
    for row, ident in enumerate(table.ids):
        index = by_id[json.dumps(json.loads(ident), sort_keys=True, separators=(",", ":"))]
        arch = bench.archs[index]
        assert table.proxies["params"][row] == pytest.approx(ARCHITECTURE_PROXIES["params"](arch) / 1e6, rel=1e-6)
        assert table.proxies["flops"][row] == pytest.approx(ARCHITECTURE_PROXIES["flops"](arch) / 1e6, rel=1e-6)
        assert table.accuracies["c100_kd"][row] == pytest.approx(bench.accuracies["c100_kd"][index], abs=1e-6)
