"""Fitness beyond the descriptors: partial and combined fitness on real small statistics and searches."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest
from scipy import stats as sps

from autoprox.cli.main import main
from autoprox.core.errors import ConfigError
from autoprox.data.benchmark import load_benchmark, write_benchmark_jsonl
from autoprox.data.cache import StatsPlan, load_statistics
from autoprox.genome.tree import parse_genome
from autoprox.search.context import RunContext
from autoprox.search.engine import run_search
from autoprox.search.evolution import EvolutionConfig
from autoprox.search.fitness import FitnessEvaluator, FitnessRecord
from autoprox.search.objectives import (
    OBJECTIVES,
    CrossValidated,
    JointCorrelation,
    ObjectiveData,
    combined_figure,
    parse_fitness,
    partial_figure,
)
from autoprox.search.settings import SearchSettings

pytestmark = pytest.mark.slow

TARGETS = ("c100_kd", "flower_kd")
ALL_100 = {t: 100 for t in TARGETS}
GENOME = "block_mean(frobenius_norm(F1))"
EVOLUTION = EvolutionConfig(population_size=5, iterations=4, retry_cap=3, top_k=2, seed=1)


def tau(x, y) -> float:
    return float(sps.kendalltau(x, y).statistic)


def hand_partial(x, y, z) -> float:
    keep = ~np.isnan(y)
    x, y, z = x[keep], y[keep], z[keep]
    t_xy, t_xz, t_yz = tau(x, y), tau(x, z), tau(y, z)
    return (t_xy - t_xz * t_yz) / math.sqrt((1 - t_xz ** 2) * (1 - t_yz ** 2))


def hand_combined(x, y, z, w=0.5) -> float:
    keep = ~np.isnan(y)
    x, y, z = x[keep], y[keep], z[keep]
    n = len(y)
    rx, rz = (sps.rankdata(x) - 1) / (n - 1), (sps.rankdata(z) - 1) / (n - 1)
    return tau(w * rx + (1 - w) * rz, y)


def test_figures_equal_a_hand_computation_on_a_tiny_set():
    x = np.array([0.3, 1.2, 0.7, 2.5, 1.9, 0.1])
    y = np.array([0.2, 0.5, np.nan, 0.9, 0.4, 0.1])  # one unmeasured row: left out
    z = np.array([1.0, 2.0, 3.0, 6.0, 4.0, 5.0])
    assert partial_figure(x, y, z) == pytest.approx(hand_partial(x, y, z), abs=1e-12)
    assert combined_figure(x, y, z) == pytest.approx(hand_combined(x, y, z), abs=1e-12)
    assert combined_figure(x, y, z, 0.2) == pytest.approx(hand_combined(x, y, z, 0.2), abs=1e-12)
    # scores ranking exactly as the base does add nothing: partial tau is undefined
    assert math.isnan(partial_figure(z * 2, y, z))
    # W = 1 is the plain Kendall of the scores
    assert combined_figure(x, y, z, 1.0) == pytest.approx(tau(x[[0, 1, 3, 4, 5]], y[[0, 1, 3, 4, 5]]))


def test_parse_fitness_names_and_refusals():
    assert parse_fitness("jcm") == JointCorrelation() and parse_fitness("jcm").plain
    assert parse_fitness("partial:blend").name == "partial:blend"
    assert parse_fitness("combined:coarse").weight == 0.5
    assert parse_fitness("combined:params:0.5").name == "combined:params"
    assert parse_fitness("combined:params:0.25").name == "combined:params:0.25"
    for bad in ("kendall", "partial", "partial:depth", "combined:blend:2", "combined:blend:x", "partial:blend:0.3",
                "jcm:params"):
        with pytest.raises(ConfigError):
            parse_fitness(bad)


@pytest.fixture(scope="module")
def stats(session_cache, small_spec, af_small):
    return load_statistics(session_cache, StatsPlan(small_spec, (0,), ALL_100), af_small.archs)


def test_evaluator_records_the_fitness_and_keeps_the_plain_figures(stats, af_small):
    accuracies = {t: af_small.accuracies[t] for t in TARGETS}
    rng = np.random.default_rng(0)
    bases = {t: rng.normal(size=len(af_small)) for t in TARGETS}
    plain = FitnessEvaluator.from_statistics(stats, accuracies, TARGETS, ALL_100).evaluate(parse_genome(GENOME))
    tree = parse_genome(GENOME)
    for mode, hand in ((parse_fitness("partial:blend"), hand_partial), (parse_fitness("combined:blend"), hand_combined)):
        evaluator = FitnessEvaluator.from_statistics(stats, accuracies, TARGETS, ALL_100, fitness=mode, bases=bases)
        record = evaluator.evaluate(tree)
        scores = evaluator.architecture_scores(tree)[100]
        by_hand = {t: hand(scores, accuracies[t], bases[t]) for t in TARGETS}
        assert record.valid and record.objective == mode.name
        assert record.fitness_targets == pytest.approx(by_hand, abs=1e-12)
        assert record.fitness == pytest.approx(np.mean(list(by_hand.values())), abs=1e-12)
        # the record keeps its fitness and its plain JCM apart
        assert record.jcm == plain.jcm and record.kendall == plain.kendall and record.fitness != record.jcm
        data = record.to_json()
        assert data["objective"] == mode.name and data["fitness"] == record.fitness and data["jcm"] == plain.jcm
        assert FitnessRecord.from_json(data) == record
        # cross-validated: each fold's figure on that fold's rows (the base cut to them too)
        folds = [list(range(0, 16, 2)), list(range(1, 16, 2))]
        folded = FitnessEvaluator.from_statistics(stats, accuracies, TARGETS, ALL_100, fitness=mode, bases=bases,
                                                  folds=folds).evaluate(tree)
        fold_hand = [np.mean([hand(scores[f], accuracies[t][f], bases[t][f]) for t in TARGETS]) for f in folds]
        assert folded.fold_fitness == pytest.approx(fold_hand, abs=1e-12)
        assert folded.fitness == pytest.approx(np.mean(fold_hand)) and folded.fitness_all == pytest.approx(record.fitness)
        assert folded.jcm == plain.jcm
    assert set(plain.to_json()) == {"genome", "canonical", "valid", "jcm", "kendall", "spearman", "pearson", "reason"}
    assert plain.fitness == plain.jcm
    with pytest.raises(ConfigError, match="needs the base"):
        FitnessEvaluator.from_statistics(stats, accuracies, TARGETS, ALL_100, fitness=parse_fitness("partial:params"))


# ------------------------------------------------------------------ whole searches

@pytest.fixture(scope="module")
def settings(af_small_file, session_cache):
    return SearchSettings(bench=str(af_small_file), targets=TARGETS, batch_size=2, cache_dir=str(session_cache.root),
                          workers=1, search_fraction=0.75, evolution=EVOLUTION, fitness="partial:blend")


def _evaluations(run) -> list[dict]:
    return [json.loads(line) for line in (run / "evaluations.jsonl").open()]


@pytest.fixture(scope="module")
def partial_run(settings, tmp_path_factory):
    out = tmp_path_factory.mktemp("fit") / "partial"
    return out, run_search(settings, out, quiet=True)


def test_a_partial_search_says_its_fitness_everywhere(partial_run, settings, capsys):
    out, best = partial_run
    config = json.loads((out / "config.json").read_text())
    assert config["settings"]["fitness"] == "partial:blend"
    records = [r for r in _evaluations(out) if r["valid"]]
    assert records and all(r["objective"] == "partial:blend" and isinstance(r["fitness"], float) for r in records)
    assert best["fitness"]["name"] == "partial:blend"
    assert set(best["fitness"]["base"]) == set(TARGETS) and best["fitness"]["base"]["c100_kd"]["n"] == 12
    # best.json's figures stay plain: the search part's JCM is the record's plain JCM, not its fitness
    chosen = next(r for r in records if r["canonical"] == best["canonical"])
    assert best["search"]["jcm"] == pytest.approx(chosen["jcm"])
    assert best["fitness"]["search"] == chosen["fitness"] and best["fitness"]["plain_jcm"] == chosen["jcm"]
    assert "jcm" in best["test"]
    context = RunContext.open(out)
    choices, _ = context.fitness_bases()
    assert choices == best["fitness"]["base"]
    capsys.readouterr()
    assert main(["show", str(out), "--no-simplify"]) == 0
    shown = capsys.readouterr().out
    assert "fitness partial:blend: the fitness column holds it" in shown
    hall = json.loads((out / "hall_of_fame.json").read_text())
    top = hall["entries"][0]
    assert hall["version"] == 2 and top["fitness"] == max(r["fitness"] for r in records)
    assert top["jcm"] == next(r["jcm"] for r in records if r["canonical"] == top["canonical"]) != top["fitness"]
    row = next(line for line in shown.splitlines() if line.startswith("   1"))
    assert f"{top['fitness']:+.3f}" in row and f"{top['jcm']:+.3f}" in row


def test_the_base_sees_the_search_part_only(partial_run, settings, af_small, tmp_path):
    out, best = partial_run
    test = best["split"]["test"]
    permuted = {t: a.copy() for t, a in af_small.accuracies.items()}
    for values in permuted.values():
        values[test] = values[test][::-1]
    assert not np.allclose(permuted["c100_kd"][test], af_small.accuracies["c100_kd"][test])
    path = tmp_path / "permuted.jsonl"
    write_benchmark_jsonl(replace(af_small, accuracies=permuted), path)
    assert load_benchmark(path).accuracies["c100_kd"][test].tolist() == permuted["c100_kd"][test].tolist()
    again = run_search(replace(settings, bench=str(path)), tmp_path / "run", quiet=True)
    strip = lambda rows: [{k: v for k, v in r.items() if k != "elapsed"} for r in rows]  # noqa: E731
    assert strip(_evaluations(tmp_path / "run")) == strip(_evaluations(out))
    assert again["fitness"] == best["fitness"] and again["genome"] == best["genome"]
    assert again["test"]["jcm"] != best["test"]["jcm"]


def test_the_default_fitness_leaves_the_configuration_as_before(settings, tmp_path):
    plain = replace(settings, fitness="jcm", evolution=replace(EVOLUTION, iterations=1))
    best = run_search(plain, tmp_path / "plain", quiet=True)
    recorded = json.loads((tmp_path / "plain" / "config.json").read_text())["settings"]
    assert "fitness" not in recorded and "restarts" not in recorded["evolution"]
    assert "fitness" not in best
    assert all("fitness" not in r for r in _evaluations(tmp_path / "plain"))
    assert SearchSettings.from_json(recorded).fitness == "jcm"


def test_combined_fitness_with_cross_validation_runs(settings, tmp_path):
    combined = replace(settings, fitness="combined:params:0.7", cv_folds=3, evolution=replace(EVOLUTION, iterations=2))
    best = run_search(combined, tmp_path / "cv", quiet=True)
    assert best["fitness"]["name"] == "combined:params:0.7" and len(best["cv"]["fold_jcm"]) == 3
    assert best["cv"]["fitness"] == pytest.approx(np.mean(best["cv"]["fold_jcm"]))


def test_a_bad_fitness_is_one_line(af_small_file, tmp_path, capsys):
    code = main(["search", "--bench", str(af_small_file), "--out", str(tmp_path / "x"), "--fitness", "partial:depth",
                 "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("autoprox: error:") and "partial:depth" in err[0]
    assert not (tmp_path / "x").exists()


def test_evaluate_and_search_pass_the_fitness_and_resume_checks_it(partial_run, capsys):
    from autoprox.cli.main import build_parser
    from autoprox.cli.options import search_settings

    args = build_parser().parse_args(["evaluate", "--space", "autoformer", "--fitness", "combined:blend:0.50"])
    assert search_settings(args).fitness == "combined:blend"
    out, _ = partial_run
    capsys.readouterr()
    assert main(["search", "--resume", "--out", str(out), "--fitness", "jcm", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--fitness jcm (the run has partial:blend)" in err[0]


def test_the_registry_names_every_kind_and_cross_validation_wraps_any(stats, af_small):
    assert {"jcm", "partial", "combined"} <= set(OBJECTIVES)
    accuracies = {t: af_small.accuracies[t] for t in TARGETS}
    data = ObjectiveData(accuracies, TARGETS, ALL_100)
    scores = FitnessEvaluator.from_statistics(stats, accuracies, TARGETS, ALL_100).architecture_scores(
        parse_genome(GENOME))
    folds = ((0, 2, 4, 6, 8, 10, 12, 14), (1, 3, 5, 7, 9, 11, 13, 15))
    worst = CrossValidated(JointCorrelation(), folds, "worst")(scores, data)
    by_fold = [JointCorrelation()({c: v[list(f)] for c, v in scores.items()}, data.rows(f)).value for f in folds]
    assert worst.value == min(by_fold) and list(worst.folds) == by_fold
    assert worst.whole == JointCorrelation()(scores, data).value
    with pytest.raises(ConfigError, match="fold mode"):
        CrossValidated(JointCorrelation(), folds, "median")


def test_records_of_the_old_layout_are_converted_on_reading():
    """Runs written before fitness and JCM were kept apart: ``jcm`` held the fitness."""
    kendall = {"c100_kd": 0.5, "flower_kd": 0.7}
    base = {"genome": GENOME, "canonical": GENOME, "valid": True, "kendall": kendall, "spearman": {}, "pearson": {},
            "reason": ""}
    partial_cv = FitnessRecord.from_json(base | {"jcm": 0.21, "fold_jcm": [0.2, 0.22], "jcm_all": 0.25,
                                                 "fitness": "partial:blend", "plain_jcm": 0.6,
                                                 "fitness_targets": {"c100_kd": 0.2, "flower_kd": 0.3}})
    assert (partial_cv.fitness, partial_cv.jcm, partial_cv.objective) == (0.21, 0.6, "partial:blend")
    assert partial_cv.fold_fitness == [0.2, 0.22] and partial_cv.fitness_all == 0.25
    plain_cv = FitnessRecord.from_json(base | {"jcm": 0.55, "fold_jcm": [0.5, 0.6], "jcm_all": 0.6})
    assert (plain_cv.fitness, plain_cv.jcm, plain_cv.objective, plain_cv.fitness_all) == (0.55, 0.6, "jcm", 0.6)
    partial = FitnessRecord.from_json(base | {"jcm": 0.3, "fitness": "combined:params", "plain_jcm": 0.6})
    assert (partial.fitness, partial.jcm, partial.fold_fitness) == (0.3, 0.6, [])
    plain = FitnessRecord.from_json(base | {"jcm": 0.6})
    assert plain.fitness == plain.jcm == 0.6 and plain.to_json() == base | {"jcm": 0.6}
    # read back in the new layout, each stays what it is
    for record in (partial_cv, plain_cv, partial, plain):
        assert FitnessRecord.from_json(json.loads(json.dumps(record.to_json()))) == record


def test_a_registered_objective_is_a_fitness_a_search_can_use(settings, tmp_path):
    """A new kind is one registered class: ``--fitness spearman`` then searches by the mean Spearman."""
    from dataclasses import dataclass

    from autoprox.proxies.figures import figures
    from autoprox.search.evaluators import EVALUATIONS, EVALUATORS, evaluator_class
    from autoprox.search.objectives import Objective, Outcome, register_objective

    assert {"exact", "counted", "sharded"} <= set(EVALUATORS)
    assert EVALUATIONS == ("exact", "counted")  # sharded is built by --scheduler, not named by --evaluation
    with pytest.raises(ConfigError, match="unknown evaluation 'gpu'"):
        evaluator_class("gpu")

    @register_objective("spearman")
    @dataclass(frozen=True)
    class MeanSpearman(Objective):
        @property
        def name(self) -> str:
            return "spearman"

        def __call__(self, scores, data) -> Outcome:
            result = figures(scores, data.accuracies, data.targets, data.target_classes, data.weights)["targets"]
            per_target = {t: result[t]["spearman"] for t in data.targets}
            return Outcome(float(np.mean(list(per_target.values()))), per_target, "undefined spearman fitness")

    try:
        with pytest.raises(ConfigError, match="already registered"):
            register_objective("spearman")(type("OtherSpearman", (MeanSpearman,), {}))
        best = run_search(replace(settings, fitness="spearman", evolution=replace(EVOLUTION, iterations=2)),
                          tmp_path / "spearman", quiet=True)
        records = [r for r in _evaluations(tmp_path / "spearman") if r["valid"]]
        for r in records:
            assert r["objective"] == "spearman"
            assert r["fitness"] == pytest.approx(np.mean([r["spearman"][t] for t in TARGETS]), abs=1e-12)
        chosen = next(r for r in records if r["canonical"] == best["canonical"])
        assert best["fitness"]["search"] == chosen["fitness"] and best["search"]["jcm"] == pytest.approx(chosen["jcm"])
    finally:
        from autoprox.search.objectives import OBJECTIVES as registered

        registered.unregister("spearman")
    with pytest.raises(ConfigError, match="unknown fitness 'spearman'"):
        parse_fitness("spearman")
