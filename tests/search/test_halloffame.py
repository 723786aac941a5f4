"""Hall of fame: best distinct proxies ever evaluated, Pareto front, resume, rebuild, ``autoprox show``."""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import replace

import pytest

from autoprox.cli.main import main
from autoprox.genome.tree import canonical_string, parse_genome, tree_size
from autoprox.search.engine import run_search
from autoprox.search.fitness import FitnessRecord
from autoprox.search.halloffame import HallOfFame, load_hall_of_fame
from autoprox.search.rundir import HALL_OF_FAME
from autoprox.search.rundir import RunDirectory
from tests.conftest import REPO, SEARCHED_EVOLUTION

pytestmark = pytest.mark.slow

EVOLUTION = SEARCHED_EVOLUTION  # the evolution of conftest's searched_run, the full run of these tests


@pytest.fixture(scope="module")
def settings(searched_settings):
    return searched_settings


@pytest.fixture(scope="module")
def full_run(searched_run):
    """The search the search tests read too (one run per session)."""
    return searched_run


def _valid_records(out):
    return [r for r in RunDirectory(out).evaluations() if r["valid"]]


def _hall_file(out) -> dict:
    return json.loads((out / HALL_OF_FAME).read_text())


def test_the_search_writes_the_best_distinct_proxies_it_ever_evaluated(full_run):
    out, report = full_run
    hall = _hall_file(out)
    valid = _valid_records(out)
    assert len(valid) > EVOLUTION.population_size, "the run evaluated more than its final population"
    key = lambda r: (-r["jcm"], tree_size(parse_genome(r["canonical"])), r["canonical"])  # noqa: E731
    simplest: dict = {}  # one record per behaviour (Kendall tau on every target): the simplest
    for record in valid:
        signature = tuple(sorted(record["kendall"].items()))
        if signature not in simplest or key(record) < key(simplest[signature]):
            simplest[signature] = record
    expected = sorted(simplest.values(), key=key)[: hall["capacity"]]
    assert len(simplest) < len({r["canonical"] for r in valid}), "the run found genomes that behave alike"
    assert [e["canonical"] for e in hall["entries"]] == [r["canonical"] for r in expected]
    assert [e["rank"] for e in hall["entries"]] == list(range(1, len(expected) + 1))
    assert len({e["canonical"] for e in hall["entries"]}) == len(hall["entries"])
    assert len({tuple(sorted(e["kendall"].items())) for e in hall["entries"]}) == len(hall["entries"])
    for entry, record in zip(hall["entries"], expected):
        assert entry["jcm"] == record["jcm"] and entry["kendall"] == record["kendall"]
        assert entry["complexity"] == tree_size(parse_genome(record["canonical"]))
        assert entry["iteration"] == record["iteration"]
    # not only the last population: it holds genomes the population no longer (or never) held
    population = {m["canonical"] for m in RunDirectory(out).checkpoint()["population"]}
    assert {e["canonical"] for e in hall["entries"]} - population
    assert hall["entries"][0]["jcm"] >= report["search"]["jcm"] - 1e-12
    assert hall["evaluated"] == len(RunDirectory(out).evaluations())
    assert hall["valid"] == len(valid)


def test_pareto_front_is_the_non_dominated_set_of_all_valid_genomes(full_run):
    out, _ = full_run
    points = {}
    for r in _valid_records(out):
        points[r["canonical"]] = (r["jcm"], tree_size(parse_genome(r["canonical"])))

    def dominated(p):
        return any(q[0] >= p[0] and q[1] <= p[1] and (q[0] > p[0] or q[1] < p[1]) for q in points.values())

    expected = {c for c, p in points.items() if not dominated(p)}
    front = _hall_file(out)["pareto"]
    assert {e["canonical"] for e in front} == expected
    assert [e["complexity"] for e in front] == sorted(e["complexity"] for e in front)


def test_complexity_does_not_count_no_op():
    record = FitnessRecord("block_mean(to_mean_scalar(element_wise_sum(no_op(no_op(F1)), sigmoid(no_op(F1)))))",
                           "", True, 0.5, {"c100_kd": 0.5})
    record.canonical = canonical_string(parse_genome(record.genome))
    hall = HallOfFame()
    assert hall.consider(record, 0)
    assert hall.entries[0].complexity == 6  # block_mean, to_mean_scalar, sum, F1, sigmoid, F1


def test_capacity_ties_and_invalid_records():
    def record(genome, jcm, valid=True):
        return FitnessRecord(genome, canonical_string(parse_genome(genome)), valid, jcm if valid else math.nan,
                             {"t": jcm} if valid else {})

    a = record("block_mean(to_mean_scalar(F1))", 0.3)
    b = record("block_mean(to_mean_scalar(sigmoid(F1)))", 0.3)
    c = record("block_mean(to_mean_scalar(element_wise_exp(sigmoid(F1))))", 0.5)
    d = record("block_mean(to_mean_scalar(element_wise_log(F1)))", 0.0, valid=False)
    orders = [[a, b, c, d], [d, c, b, a], [b, d, a, c]]
    halls = []
    for order in orders:
        hall = HallOfFame(capacity=2)
        for r in order:
            hall.consider(r, 1)
        halls.append(hall.to_json())
    assert halls[0] == halls[1] == halls[2], "the hall of fame does not depend on the order of evaluations"
    assert [e["canonical"] for e in halls[0]["entries"]] == [c.canonical, a.canonical]  # tie: fewer nodes first
    assert halls[0]["evaluated"] == 4 and halls[0]["valid"] == 3
    assert {e["canonical"] for e in halls[0]["pareto"]} == {a.canonical, c.canonical}


def test_rebuilt_from_evaluations_equals_the_file_the_search_wrote(full_run):
    out, _ = full_run
    rebuilt = HallOfFame.from_evaluations(RunDirectory(out).evaluations())
    assert rebuilt.to_json() == _hall_file(out)
    loaded = load_hall_of_fame(out)
    assert loaded.source == "file" and loaded.hall.to_json() == _hall_file(out)


def test_resumed_run_ends_with_the_same_hall_of_fame(settings, full_run, tmp_path):
    out, _ = full_run
    stopped = tmp_path / "resumed"
    run_search(settings, stopped, stop_after=2, quiet=True)
    assert _hall_file(stopped) != _hall_file(out)
    run_search(None, stopped, resume=True, quiet=True)
    assert _hall_file(stopped) == _hall_file(out)


def test_resume_after_a_crash_mid_iteration_cuts_the_hall_back(settings, full_run, tmp_path):
    """Evaluations of an iteration that never reached the checkpoint leave the hall of fame on resume."""
    out, _ = full_run
    crashed = tmp_path / "crashed"
    run_search(settings, crashed, stop_after=2, quiet=True)
    run = RunDirectory(crashed)
    ghost = "block_mean(to_mean_scalar(element_wise_tanh(element_wise_tanh(F1))))"
    record = FitnessRecord(ghost, canonical_string(parse_genome(ghost)), True, 0.99, {"c100_kd": 0.99})
    run.append_evaluation(record.to_json() | {"iteration": 3})  # iteration 3 crashed before its checkpoint
    hall = HallOfFame.from_evaluations(run.evaluations())
    (crashed / HALL_OF_FAME).write_text(json.dumps(hall.to_json()))
    assert _hall_file(crashed)["entries"][0]["genome"] == ghost
    run_search(None, crashed, resume=True, quiet=True)
    assert _hall_file(crashed) == _hall_file(out)


def run_cli(capsys, *argv):
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_show_prints_the_table_and_marks_best_json(full_run, capsys):
    out, report = full_run
    code, text, _ = run_cli(capsys, "show", str(out), "--top", "5")
    assert code == 0
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.lstrip().startswith("rank"))
    assert all(t in lines[header] for t in ("JCM", "c100_kd", "imagenet_super", "nodes", "formula"))
    rows = lines[header + 1: header + 6]
    hall = _hall_file(out)
    for rank, row in enumerate(rows, start=1):
        entry = hall["entries"][rank - 1]
        assert row.split()[0].rstrip("*") == str(rank)
        assert f"{entry['jcm']:+.3f}" in row and "1/L * sum_l (" in row
    best_kendall = {t: m["kendall"] for t, m in report["search"]["targets"].items()}
    best_rank = next(e["rank"] for e in hall["entries"] if e["canonical"] == report["canonical"]
                     or all(abs(e["kendall"][t] - best_kendall[t]) <= 1e-12 for t in best_kendall))
    marked = [row for row in rows if row.split()[0].endswith("*")]
    if best_rank <= 5:
        assert len(marked) == 1 and marked[0].split()[0] == f"{best_rank}*"
    assert "Pareto front" in text and "W_qkv = F1" in text


def test_show_works_while_a_run_is_going(full_run, capsys, tmp_path):
    """No best.json nor hall_of_fame.json yet, torn last lines: rebuilt from evaluations.jsonl."""
    out, _ = full_run
    going = tmp_path / "going"
    shutil.copytree(out, going)
    (going / "best.json").unlink()
    (going / HALL_OF_FAME).unlink()
    for name in ("evaluations.jsonl", "log.jsonl"):
        with open(going / name, "a") as handle:
            handle.write('{"genome": "block_mean(to_mean_sc')
    code, text, _ = run_cli(capsys, "show", str(going), "--no-simplify")
    assert code == 0
    assert "rebuilt from evaluations.jsonl" in text
    assert "best.json not written yet" in text
    first_row = next(line for line in text.splitlines() if line.split() and line.split()[0] == "1")
    assert f"{_hall_file(out)['entries'][0]['jcm']:+.3f}" in first_row
    assert not (going / HALL_OF_FAME).exists(), "show only reads"
    code, _, _ = run_cli(capsys, "show", str(going), "--no-simplify", "--save")
    assert code == 0 and json.loads((going / HALL_OF_FAME).read_text()) == _hall_file(out)


def test_show_rebuilds_an_unreadable_or_stale_hall_file(full_run, capsys, tmp_path):
    out, _ = full_run
    broken = tmp_path / "broken"
    shutil.copytree(out, broken)
    (broken / HALL_OF_FAME).write_text('{"format": "autoprox-hall-of-fame", "entries": [')
    loaded = load_hall_of_fame(broken)
    assert loaded.source == "rebuilt" and "unreadable" in loaded.note
    assert loaded.hall.to_json() == _hall_file(out)
    stale = _hall_file(out) | {"evaluated": 1, "entries": []}
    (broken / HALL_OF_FAME).write_text(json.dumps(stale))
    assert load_hall_of_fame(broken).hall.to_json() == _hall_file(out)


def test_show_errors_are_one_line(capsys, tmp_path, full_run):
    code, _, err = run_cli(capsys, "show", str(tmp_path))
    assert code == 2 and err.startswith("autoprox: error:") and "not a run directory" in err
    assert len(err.strip().splitlines()) == 1
    out, _ = full_run
    bad = tmp_path / "bad"
    shutil.copytree(out, bad)
    (bad / HALL_OF_FAME).unlink()
    with open(bad / "evaluations.jsonl", "a") as handle:
        record = {"genome": "block_mean(to_mean_scalar(bogus_op(F1)))", "canonical": "block_mean(to_mean_scalar(bogus_op(F1)))",
                  "valid": True, "jcm": 0.9, "kendall": {}, "spearman": {}, "pearson": {}, "reason": "", "iteration": 9}
        handle.write(json.dumps(record) + "\n")
    code, _, err = run_cli(capsys, "show", str(bad), "--no-simplify")
    assert code == 2 and "bogus_op" in err and len(err.strip().splitlines()) == 1


def test_show_simplifies_and_prints_latex(full_run, capsys):
    out, _ = full_run
    code, text, _ = run_cli(capsys, "show", str(out), "--top", "2", "--latex")
    assert code == 0
    assert "LaTeX:" in text and r"\frac{1}{L} \sum_{l=1}^{L}" in text


def test_a_seeded_proxy_enters_the_hall_with_its_fitness(settings, tmp_path):
    published = ("block_mean(to_mean_scalar(element_wise_sum(frobenius_norm(min_max_normalize(F2)), "
                 "element_wise_sqrt(sigmoid(F4g)))))")
    seeded = replace(settings, seed_proxies=(published,), evolution=replace(EVOLUTION, iterations=0))
    run_search(seeded, tmp_path / "seeded", quiet=True)
    hall = _hall_file(tmp_path / "seeded")
    canonical = canonical_string(parse_genome(published))
    record = next(r for r in RunDirectory(tmp_path / "seeded").evaluations() if r["canonical"] == canonical)
    entry = next(e for e in hall["entries"] if e["canonical"] == canonical)
    assert entry["jcm"] == record["jcm"] and entry["iteration"] == 0


# --- beyond size in ``autoprox show`` (issue 6, item 5) ---------------------------------------------------


def _beyond_rows(text: str, header_start: str) -> dict[tuple[str, str], list[str]]:
    """Rows of the beyond-size table whose header begins with ``header_start``: (label, target) -> cells."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:2] == [header_start, "target"])
    rows = {}
    for line in lines[start + 1:]:
        cells = line.split()
        if not line.startswith("  ") or cells[0] == "Kendall" or cells[0] == "bar:":
            break
        rows[(cells[0], cells[1])] = cells[2:]
    return rows


def _expected_cells(figures) -> list[str]:
    bar = figures["bar"]
    return [f"{figures[k]:+.3f}" for k in ("kendall", "kendall_with_params", "kendall_with_depth",
                                           "partial_given_params", "partial_given_depth")] + [
        bar["descriptor"], f"({bar['kendall']:+.3f})", "yes" if figures["beats_bar"] else "no"]


def test_show_prints_the_beyond_size_report_of_best_json(full_run, capsys):
    out, report = full_run
    code, text, _ = run_cli(capsys, "show", str(out), "--top", "2", "--no-simplify")
    assert code == 0
    assert "beyond size of the proxy best.json holds (*)" in text
    rows = _beyond_rows(text, "split")
    block = report["beyond_size"]
    assert set(rows) == {(split, t) for split in ("search", "test") for t in report["targets"]}
    for (split, target), cells in rows.items():
        figures = block[split][target]
        assert cells == _expected_cells(figures)
        assert figures["kendall"] == pytest.approx(report[split]["targets"][target]["kendall"])
    assert "the best coarse descriptor for the target (params, depth, width, macs)" in text


def test_show_of_a_run_without_the_report_says_so_in_one_line(full_run, capsys, tmp_path):
    out, _ = full_run
    old = tmp_path / "old"
    shutil.copytree(out, old)
    best = json.loads((old / "best.json").read_text())
    del best["beyond_size"]
    (old / "best.json").write_text(json.dumps(best))
    code, text, _ = run_cli(capsys, "show", str(old), "--top", "2", "--no-simplify")
    assert code == 0
    notes = [line for line in text.splitlines() if "beyond-size" in line or "beyond size" in line]
    assert notes == ["best.json has no beyond-size report (written before it existed); "
                     "--beyond-size computes one for the hall of fame"]


def test_show_beyond_size_computes_it_for_the_hall_of_fame_on_the_search_split(full_run, settings, capsys):
    """Each shown entry's Kendall is the search-split Kendall the search recorded; the bar is the best of the
    four descriptors on the search split; the entry best.json holds gets best.json's search-split figures."""
    import numpy as np
    from scipy.stats import kendalltau

    from autoprox.data.benchmark import load_benchmark, split_benchmark
    from autoprox.spaces.descriptors import describe

    out, report = full_run
    code, text, err = run_cli(capsys, "show", str(out), "--top", "3", "--no-simplify", "--beyond-size")
    assert code == 0
    assert "beyond size of 3 proxies, search split" in err and "3/3" in err
    bench = load_benchmark(settings.bench)
    search = split_benchmark(len(bench), settings.split_seed, settings.search_fraction).search
    assert f"computed now on the search split ({len(search)} architectures" in text
    rows = _beyond_rows(text, "rank")
    hall = _hall_file(out)
    described = [describe(bench.archs[i]) for i in search]
    best_kendall = {t: m["kendall"] for t, m in report["search"]["targets"].items()}
    for rank, entry in enumerate(hall["entries"][:3], start=1):
        holds_best = entry["canonical"] == report["canonical"] or all(
            abs(entry["kendall"][t] - best_kendall[t]) <= 1e-12 for t in best_kendall)
        label = f"#{rank}*" if holds_best else f"#{rank}"
        for target in report["targets"]:
            cells = rows[(label, target)]
            assert cells[0] == f"{entry['kendall'][target]:+.3f}"  # the very figure the search recorded
            acc = bench.accuracies[target][list(search)]
            keep = ~np.isnan(acc)
            taus = {name: kendalltau(np.array([d[name] for d in described])[keep], acc[keep]).statistic
                    for name in ("params", "depth", "width", "macs")}
            assert cells[5] == max(taus, key=taus.get) and cells[6] == f"({max(taus.values()):+.3f})"
            assert cells[7] == ("yes" if entry["kendall"][target] > max(taus.values()) else "no")
            if label.endswith("*"):
                assert cells == _expected_cells(report["beyond_size"]["search"][target])
    assert len(rows) == 3 * len(report["targets"])


def test_show_committed_runs(capsys):
    """A committed run with a beyond-size block shows it; the paper-setting reference run predates it."""
    from pathlib import Path

    runs = REPO / "runs"
    code, text, _ = run_cli(capsys, "show", str(runs / "ablation" / "pit-sum"), "--top", "1", "--no-simplify")
    assert code == 0
    best = json.loads((runs / "ablation" / "pit-sum" / "best.json").read_text())
    rows = _beyond_rows(text, "split")
    assert rows[("test", "chaoyang_kd")] == _expected_cells(best["beyond_size"]["test"]["chaoyang_kd"])
    assert rows[("test", "chaoyang_kd")][5:] == ["macs", "(+0.707)", "no"]
    assert rows[("test", "flower_kd")][5:] == ["params", "(+0.883)", "yes"]
    code, text, _ = run_cli(capsys, "show", str(runs / "pit-reference"), "--top", "1", "--no-simplify")
    assert code == 0 and "best.json has no beyond-size report" in text


def test_committed_runs_of_the_old_layout_keep_fitness_and_jcm_apart_on_reading():
    """``runs/ablation/pit-mean-cv`` (cross-validated) was written when ``jcm`` held the fitness: its hall of
    fame (version 1) and its checkpoint (tests/fixtures/recorded-runs) read as the fitness the search ranked by and
    the plain JCM."""
    from pathlib import Path

    from autoprox.search.evolution import EvolutionState
    from autoprox.search.halloffame import load_hall_of_fame

    run = REPO / "runs" / "ablation" / "pit-mean-cv"
    written = _hall_file(run)
    assert written["version"] == 1
    best = json.loads((run / "best.json").read_text())
    hall = load_hall_of_fame(run).hall
    top = hall.entries[0]
    assert top.canonical == best["canonical"]
    assert top.fitness == written["entries"][0]["jcm"] == best["cv"]["fitness"]
    assert top.jcm == pytest.approx(best["search"]["jcm"], abs=1e-12) and top.jcm != top.fitness
    # its checkpoint, frozen when the committed runs stopped keeping checkpoints without their evaluations
    recorded = REPO / "tests" / "fixtures" / "recorded-runs" / "pit-mean-cv" / "checkpoint.json"
    state = EvolutionState.from_json(json.loads(recorded.read_text()))
    parsimony = json.loads((run / "config.json").read_text())["settings"]["evolution"]["parsimony"]
    chosen = state.overall_best(parsimony)
    assert chosen.canonical == best["canonical"] and chosen.fitness == best["cv"]["fitness"]
    assert chosen.fold_fitness == best["cv"]["fold_jcm"] and chosen.jcm == pytest.approx(best["search"]["jcm"], abs=1e-12)
