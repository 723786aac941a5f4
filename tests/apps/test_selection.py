"""Selection rules: which proxy of a finished search the protocol scores."""

from __future__ import annotations

import numpy as np
import pytest

from autoprox.apps.protocols.outer_folds import run_protocol
from autoprox.apps.selection import (
    SELECTIONS,
    inner_fold_jcms,
    lower_bound,
    select_cv_lower_bound,
)
from autoprox.core.errors import ConfigError
from autoprox.genome.tree import parse_genome
from autoprox.proxies.proxy import Proxy
from autoprox.search.context import RunContext
from autoprox.search.engine import run_search
from autoprox.search.evolution import EvolutionConfig
from autoprox.search.halloffame import load_hall_of_fame
from autoprox.search.settings import SearchSettings

pytestmark = pytest.mark.slow

TARGETS = ("c100_kd", "flower_kd")


EVOLUTION = EvolutionConfig(population_size=6, iterations=4, retry_cap=3, seed=1)


def _settings(bench, session_cache) -> SearchSettings:
    """The search of :func:`run_dir` on ``bench``."""
    return SearchSettings(bench=str(bench), targets=TARGETS, batch_size=2, cache_dir=str(session_cache.root),
                          workers=1, search_fraction=0.75, evolution=EVOLUTION)


@pytest.fixture(scope="module")
def run_dir(af_small_file, session_cache, tmp_path_factory):
    out = tmp_path_factory.mktemp("selection") / "run"
    run_search(_settings(af_small_file, session_cache), out, quiet=True)
    return out


def test_lower_bound():
    assert lower_bound([0.5, 0.5, 0.5]) == pytest.approx(0.5)
    assert lower_bound([0.2, 0.6]) == pytest.approx(0.4 - np.std([0.2, 0.6], ddof=1))
    assert lower_bound([0.3, float("nan")]) == float("-inf")


def test_cv_lcb_picks_the_hall_of_fame_entry_with_the_best_lower_bound(run_dir):
    context = RunContext.open(run_dir)
    entries = load_hall_of_fame(run_dir).hall.entries[:10]
    assert len(entries) >= 2
    bounds = {e.genome: lower_bound(inner_fold_jcms(Proxy(e.genome, parse_genome(e.genome)), context))
              for e in entries}
    chosen = select_cv_lower_bound(run_dir)
    assert bounds[chosen.name] == max(bounds.values())


def test_protocol_takes_a_selection_by_name(af_small_file, session_cache, tmp_path):
    settings = SearchSettings(bench=str(af_small_file), targets=TARGETS, batch_size=2, cache_dir=str(session_cache.root),
                              workers=1, evolution=EvolutionConfig(population_size=4, iterations=2, retry_cap=3, seed=5))
    result = run_protocol(settings, tmp_path / "p", folds=2, selection="cv-lcb", bootstrap=50, quiet=True)
    assert result["finished"] and {"best", "cv-lcb"} <= set(SELECTIONS)
    for fold in result["folds"]:
        hall = load_hall_of_fame(tmp_path / "p" / fold["run"]).hall
        assert fold["result"]["proxy"] in [e.genome for e in hall.entries[:10]]
    with pytest.raises(ConfigError, match="unknown selection"):
        run_protocol(settings, tmp_path / "q", folds=2, selection="vote", quiet=True)


# ------------------------------------------------------------------ ensembles

def test_hof_average_is_an_equal_weight_ensemble_of_distinct_hall_of_fame_proxies(run_dir):
    from autoprox.proxies.ensemble import JOINT, EnsembleProxy

    chosen = SELECTIONS["hof-average"](run_dir)
    assert isinstance(chosen, EnsembleProxy) and chosen.joint
    members = chosen.members[JOINT]
    genomes = [e.genome for e in load_hall_of_fame(run_dir).hall.entries]
    assert 1 <= len(members) <= 5 and len({m.value for m in members}) == len(members)
    assert all(m.value in genomes for m in members) and sum(m.weight for m in members) == pytest.approx(1.0)
    context = RunContext.open(run_dir)
    assert all(len(m.reference) == len(context.indices("search")) for m in members)
    scores = chosen.target_scores(context.archs("test"), context.cache, context.plan, list(context.targets))
    assert set(scores) == set(TARGETS) and all(np.all(np.isfinite(v)) for v in scores.values())


def test_cv_pick_chooses_the_best_inner_fold_candidate_per_target(run_dir):
    from autoprox.apps.selection import (
        SearchPartScores,
        inner_fold_kendalls,
        search_part_folds,
        select_cv_pick,
    )

    chosen = select_cv_pick(run_dir)
    context = RunContext.open(run_dir)
    scores = SearchPartScores(run_dir, context)
    folds = search_part_folds(context)
    assert len(folds) == 4  # 12 search architectures: 4 folds of 3
    for target in TARGETS:
        means = {c: float(np.mean(inner_fold_kendalls(scores, c, target, folds))) for c in ("best", "blend", "best+blend")}
        pick = chosen.provenance["chosen"][target]
        assert means[pick] == max(means.values())
        members = chosen.members[target]
        assert len(members) == len(pick.split("+"))
        if "blend" in pick:  # refitted on the whole search part: the blend baseline's choice
            from autoprox.proxies.baselines import choose_baselines
            from autoprox.spaces.descriptors import descriptor_columns

            fitted = choose_baselines(descriptor_columns(context.bench.archs), context.bench.accuracies,
                                      context.indices("search"), [target], ["blend"])["blend"][target]
            assert [m.value for m in members if m.kind == "blend"] == [fitted]


def test_inner_fold_kendalls_takes_a_part_scores_given_per_inner_fold(run_dir):
    """A part's given raw scores stand in for its own (the nested selection's per-fold searches): the run's own
    ``best`` given gives the same Kendalls, and a reversed one the opposite sign on every fold."""
    from autoprox.apps.selection import SearchPartScores, inner_fold_kendalls, inner_mean, search_part_folds, select_best

    context = RunContext.open(run_dir)
    scores = SearchPartScores(run_dir, context)
    folds = search_part_folds(context)
    raw = context.score(select_best(run_dir), "search", workers=1)
    for target in TARGETS:
        values = raw[context.plan.target_classes[target]]
        own = inner_fold_kendalls(scores, "best", target, folds)
        assert inner_fold_kendalls(scores, "best", target, folds, {"best": [values] * len(folds)}) \
            == pytest.approx(own, nan_ok=True)
        flipped = inner_fold_kendalls(scores, "best", target, folds, {"best": [-values] * len(folds)})
        assert flipped == pytest.approx([-k for k in own], nan_ok=True)
        both = inner_fold_kendalls(scores, "best+blend", target, folds, {"best": [values] * len(folds)})
        assert both == pytest.approx(inner_fold_kendalls(scores, "best+blend", target, folds), nan_ok=True)
    assert inner_mean([0.2, 0.4]) == pytest.approx(0.3) and inner_mean([0.2, float("nan")]) == float("-inf")


def test_cv_pick_joint_takes_one_candidate_for_every_target_by_inner_fold_jcm(run_dir):
    from autoprox.apps.selection import SELECTIONS, select_cv_pick
    from autoprox.core.correlation import jcm

    per_target = select_cv_pick(run_dir)
    joint = SELECTIONS["cv-pick-joint"](run_dir)
    assert joint.name == "cv-pick-joint"
    table = joint.provenance["inner_kendall"]
    assert table == per_target.provenance["inner_kendall"]  # the same inner folds, the same figures
    inner = {c: jcm({t: table[t][c] for t in TARGETS}) for c in table[TARGETS[0]]}
    pick = max(inner, key=lambda c: inner[c])
    assert joint.provenance["inner_jcm"] == pytest.approx(inner)
    assert set(joint.provenance["chosen"].values()) == {pick}
    for target in TARGETS:
        assert [m.kind for m in joint.members[target]] == [
            "blend" if part == "blend" else "proxy" for part in pick.split("+")]
        if per_target.provenance["chosen"][target] == pick:  # where both rules agree, the same members
            assert joint.members[target] == per_target.members[target]


def test_cv_pick_coarse_chooses_the_coarse_descriptor_on_each_inner_training_part(run_dir):
    from autoprox.apps.selection import (
        SearchPartScores,
        inner_fold_kendalls,
        search_part_folds,
    )
    from autoprox.core.correlation import correlate
    from autoprox.proxies.baselines import fit_coarse
    from autoprox.proxies.figures import BAR_DESCRIPTORS

    chosen = SELECTIONS["cv-pick-coarse"](run_dir)
    assert chosen.name == chosen.provenance["selection"] == "cv-pick-coarse"
    context = RunContext.open(run_dir)
    scores = SearchPartScores(run_dir, context)
    folds = search_part_folds(context)
    size = len(context.indices("search"))
    table = chosen.provenance["inner_kendall"]
    for target in TARGETS:
        assert set(table[target]) == {"best", "blend", "best+blend", "coarse"}
        # By hand: on each inner fold, the descriptor that ranks the other folds best, scored on the fold.
        by_hand = []
        for fold in folds:
            train = [i for i in range(size) if i not in fold]
            accuracies = scores.accuracies[target]
            best = max(BAR_DESCRIPTORS, key=lambda d: np.nan_to_num(
                correlate(scores.columns[d][train], accuracies[train])["kendall"], nan=-2.0))
            assert fit_coarse({d: v[train] for d, v in scores.columns.items()}, accuracies[train])["descriptor"] == best
            by_hand.append(correlate(scores.columns[best][fold], accuracies[fold])["kendall"])
        assert inner_fold_kendalls(scores, "coarse", target, folds) == pytest.approx(by_hand, nan_ok=True)
        # A fold where the chosen descriptor is constant has no Kendall: the candidate is then out.
        mean = float(np.mean(by_hand)) if np.all(np.isfinite(by_hand)) else float("-inf")
        assert table[target]["coarse"] == pytest.approx(mean)
        pick = chosen.provenance["chosen"][target]
        assert table[target][pick] == max(table[target].values())
        if pick == "coarse":  # chosen again on the whole search part, kept as a descriptor member
            (only,) = chosen.members[target]
            whole = fit_coarse({d: v for d, v in scores.columns.items()}, scores.accuracies[target])
            assert (only.kind, only.value) == ("descriptor", whole["descriptor"])


def test_ensemble_selections_never_read_the_test_part(af_small, af_small_file, run_dir, session_cache, tmp_path):
    """Permuting the test part's accuracies changes neither the search nor any selection's choice: the module's run
    (on af_small as it is) against the same search on a copy whose test part's accuracies are reversed."""
    from dataclasses import replace

    from autoprox.apps.selection import select_cv_pick, select_hof_average
    from autoprox.data.benchmark import split_benchmark, write_benchmark_jsonl

    test = list(split_benchmark(len(af_small), 0, 0.75).test)
    shuffled = {t: v.copy() for t, v in af_small.accuracies.items()}
    for values in shuffled.values():
        values[test] = values[test][::-1]
    write_benchmark_jsonl(replace(af_small, accuracies=shuffled), tmp_path / "b.jsonl")
    run_search(_settings(tmp_path / "b.jsonl", session_cache), tmp_path / "b", quiet=True)
    chosen = []
    for run in (run_dir, tmp_path / "b"):
        picks = [select(run) for select in (select_cv_pick, select_hof_average)]  # each rule run once per run
        chosen.append([{k: v for k, v in pick.to_json().items() if k != "provenance"}
                       | {"chosen": pick.provenance.get("chosen")} for pick in picks])
    assert not np.array_equal(load_bench_accuracies(af_small_file)[test],
                              load_bench_accuracies(tmp_path / "b.jsonl")[test])
    assert chosen[0] == chosen[1]


def load_bench_accuracies(path):
    from autoprox.data.benchmark import load_benchmark

    return load_benchmark(path).accuracies["c100_kd"]


def test_select_writes_the_rule_s_choice_as_a_proxy_file_the_commands_read(run_dir, tmp_path):
    """``autoprox select``: cv-pick's per-target ensemble, one target's cut, and a genome's proxy JSON,
    each scoring exactly as the selection does; an existing file is never overwritten."""
    import json

    from autoprox.apps.selection import select_cv_pick, write_selection
    from autoprox.cli.main import main
    from autoprox.core.errors import RunDirError
    from autoprox.proxies.proxy import resolve_proxy

    context = RunContext.open(run_dir)
    chosen = select_cv_pick(run_dir)
    expected = chosen.target_scores(context.archs("test"), context.cache, context.plan, TARGETS)

    out = tmp_path / "per-target.json"
    assert main(["select", str(run_dir), "--selection", "cv-pick", "--out", str(out)]) == 0
    written = resolve_proxy(str(out))
    got = written.target_scores(context.archs("test"), context.cache, context.plan, TARGETS)
    for target in TARGETS:
        np.testing.assert_array_equal(got[target], expected[target])

    cut_path, cut = write_selection(run_dir, "cv-pick", tmp_path / "c100.json", target="c100_kd")
    cut = resolve_proxy(str(cut_path))
    assert cut.joint and cut.provenance["target"] == "c100_kd"
    both = cut.target_scores(context.archs("test"), context.cache, context.plan, TARGETS)
    np.testing.assert_array_equal(both["flower_kd"], expected["c100_kd"])  # c100_kd's choice scores every target

    genome_path, best = write_selection(run_dir, "best", tmp_path / "best.json")
    assert json.loads(genome_path.read_text())["genome"] == resolve_proxy(str(genome_path)).name == best.name

    before = out.read_bytes()
    with pytest.raises(RunDirError, match="already exists"):
        write_selection(run_dir, "cv-pick", out)
    assert out.read_bytes() == before
    with pytest.raises(ConfigError, match="not one of the run's targets"):
        write_selection(run_dir, "cv-pick", tmp_path / "x.json", target="imagenet_super")


@pytest.mark.parametrize("rule", ["best", "cv-pick"])
def test_rank_of_a_select_file_defaults_to_the_run_s_test_split_as_the_run_does(run_dir, rule, tmp_path, capsys):
    """A file ``select`` writes records the run's split (every rule fits on the search split alone), so
    ``rank --proxy FILE`` ranks the architectures ``rank --proxy RUN`` does: the test split, not all."""
    import json

    from autoprox.apps.selection import write_selection
    from autoprox.cli.main import main

    context = RunContext.open(run_dir)
    path, _ = write_selection(run_dir, rule, tmp_path / f"{rule}.json")
    common = ["--bench", str(context.bench.source), "--cache-dir", str(context.cache.root), "--batch-size", "2",
              "--json"]
    figures = {}
    for proxy in (str(run_dir), str(path)):
        capsys.readouterr()
        assert main(["rank", "--proxy", proxy, *common]) == 0
        out, err = capsys.readouterr()
        assert "split: test" in err
        figures[proxy] = json.loads(out)
    test_size = len(context.indices("test"))
    assert test_size < len(context.bench.archs)
    assert {m["n"] for m in figures[str(path)].values()} == {test_size}
    if rule == "best":  # the same genome: the same figures
        assert figures[str(path)] == figures[str(run_dir)]
    # without --bench: the file records its run, whose benchmark it is ranked on, as a run's best.json is
    assert main(["rank", "--proxy", str(path), *common[2:]]) == 0
    out, err = capsys.readouterr()
    assert f"benchmark: {context.bench.source}, the one {run_dir} was made with" in err and "split: test" in err
    assert json.loads(out) == figures[str(path)]


def test_recommended_names_resolve_in_rank_and_export(run_dir, tmp_path, monkeypatch, capsys):
    """A manifest naming a per-target ensemble: ``recommended:space/target`` scores as that target's cut,
    ``recommended:space`` as the whole ensemble, and export writes the same module as for the cut file."""
    import json

    from autoprox.apps.selection import write_selection
    from autoprox.cli.main import main
    from autoprox.proxies.proxy import resolve_proxy
    from autoprox.proxies.recommended import ENVIRONMENT, FORMAT

    write_selection(run_dir, "cv-pick", tmp_path / "space" / "per-target.json")
    manifest = tmp_path / "recommended.json"
    manifest.write_text(json.dumps({"format": FORMAT, "spaces": {"small": {
        "joint": {"file": "space/per-target.json"},
        "flower_kd": {"file": "space/per-target.json", "target": "flower_kd"}}}}))
    monkeypatch.setenv(ENVIRONMENT, str(manifest))

    context = RunContext.open(run_dir)
    whole = resolve_proxy("recommended:small")
    flower = resolve_proxy("recommended:small/flower_kd")
    assert whole.name == "recommended:small" and not whole.joint
    assert flower.joint and flower.name == "recommended:small/flower_kd"
    archs = context.archs("search")
    np.testing.assert_array_equal(flower.scores(archs, context.cache, context.plan),
                                  whole.scores(archs, context.cache, context.plan, target="flower_kd"))

    out = tmp_path / "flower.py"
    assert main(["export", "recommended:small/flower_kd", "--out", str(out)]) == 0
    assert "def score" in out.read_text()
    capsys.readouterr()
    assert main(["rank", "--bench", str(context.bench.source), "--cache-dir", str(context.cache.root),
                 "--batch-size", "2", "--proxy", "recommended:small/flower_kd", "--split", "all", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    from autoprox.core.correlation import correlate

    all_scores = flower.scores(list(context.bench.archs), context.cache, context.plan)
    assert report["flower_kd"]["n"] == len(context.bench.archs)
    assert report["flower_kd"]["kendall"] == pytest.approx(
        correlate(all_scores, context.bench.accuracies["flower_kd"])["kendall"], abs=1e-12)
    with pytest.raises(Exception, match="unknown recommended proxy"):
        resolve_proxy("recommended:small/c100_kd")


def test_cv_pick_wide_weighs_zico_alone_and_in_pairs_beside_cv_pick_coarse(run_dir):
    from autoprox.apps.selection import CV_PICK_WIDE_CANDIDATES

    wide, coarse = SELECTIONS["cv-pick-wide"](run_dir), SELECTIONS["cv-pick-coarse"](run_dir)
    assert wide.name == "cv-pick-wide" and {"zico", "best+zico", "blend+zico"} <= set(CV_PICK_WIDE_CANDIDATES)
    for target in TARGETS:
        table = wide.provenance["inner_kendall"][target]
        assert list(table) == list(CV_PICK_WIDE_CANDIDATES)
        for candidate, value in coarse.provenance["inner_kendall"][target].items():  # same folds, same figures
            assert table[candidate] == pytest.approx(value)
        pick = wide.provenance["chosen"][target]
        assert table[pick] == max(table.values())
        assert len(wide.members[target]) == len(pick.split("+"))


def test_cv_pick_ridge_s_ridge_part_is_ridge_on_the_terminals_ranks_kept_as_signed_members(run_dir):
    """Issue 41: the statistics engine's selection may start where ridge ends. The ``ridge`` part is ridge (penalty
    by leave-one-out) on the search part's quantiles of the architecture and zoo terminals against the accuracies'
    ranks; kept as one proxy member per column, a negative coefficient as the negated terminal, it scores the
    search part as the fit does, and cv-pick-ridge weighs it beside cv-pick-coarse's candidates."""
    from autoprox.apps.selection import NEGATE, SearchPartScores, ridge_columns, select_cv_pick
    from autoprox.proxies.ensemble import quantile
    from autoprox.proxies.weighted_fit import label_ranks, ridge_loo

    columns = ridge_columns()
    assert "A_params" in columns and "A_log_params" not in columns and {"Z_zico", "Z_grasp", "Z_zen"} <= set(columns)
    context = RunContext.open(run_dir)
    scores = SearchPartScores(run_dir, context)
    size = len(context.indices("search"))
    archs = context.archs("search")
    ridge = select_cv_pick(run_dir, candidates=("ridge",), name="ridge-only")
    for target in TARGETS:
        fit, raw = scores.ridge(target, range(size))
        kept = [g[len(NEGATE):-1] if g.startswith(NEGATE) else g for g in fit.genomes]
        assert set(kept) <= set(columns) and len(kept) == len(set(kept)) and all(w > 0 for w in fit.weights)
        # By hand: ridge (penalty by leave-one-out) on the members' quantiles as they read them, the negated ones
        # negated, gives each a positive weight and the fit's scores, up to scale and shift.
        signs = [-1.0 if g.startswith(NEGATE) else 1.0 for g in fit.genomes]
        features = np.column_stack([quantile(sign * scores.raw(c, target), sign * scores.raw(c, target))
                                    for c, sign in zip(kept, signs)])
        fitted = fit.scores(raw)
        assert np.std(fitted) == pytest.approx(12 ** -0.5, rel=1e-9)
        assert np.corrcoef(fitted, features @ np.asarray(fit.weights))[0, 1] == pytest.approx(1.0, abs=1e-9)
        model = ridge_loo(features, label_ranks(scores.accuracies[target]))
        if len(kept) == len([c for c in columns if np.all(np.isfinite(v := scores.raw(c, target))) and np.ptp(v) > 0]):
            assert np.all(model.weights > 0)  # nothing was left out: the same fit again
            assert np.corrcoef(fitted, features @ model.weights)[0, 1] == pytest.approx(1.0, abs=1e-9)
        # The ensemble's members score the search part exactly as the fit does.
        members = ridge.members[target]
        assert [m.value for m in members] == list(fit.genomes) and [m.kind for m in members] == ["proxy"] * len(kept)
        assert ridge.scores(archs, context.cache, context.plan, target=target) == pytest.approx(fitted, abs=1e-9)
    chosen = SELECTIONS["cv-pick-ridge"](run_dir)
    for target in TARGETS:
        table = chosen.provenance["inner_kendall"][target]
        assert list(table) == ["best", "blend", "best+blend", "coarse", "ridge", "best+ridge"]
        assert table[chosen.provenance["chosen"][target]] == max(table.values())


def test_a_select_file_records_the_run_it_was_read_from_not_where_that_run_was_searched(run_copy, tmp_path):
    """A copied run's ``best.json`` names the folder its search ran in; the genome file ``select`` writes
    records the run it read, as an ensemble's provenance does, where ``rank`` finds the benchmark."""
    import json

    from autoprox.apps.selection import write_selection

    assert json.loads((run_copy / "best.json").read_text())["run"] != str(run_copy)
    path, _ = write_selection(run_copy, "best", tmp_path / "best.json")
    assert json.loads(path.read_text())["run"] == str(run_copy)
