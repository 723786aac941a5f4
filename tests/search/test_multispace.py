"""Searches over several spaces at once (``autoprox search --space autoformer --space pit``).

On the real benchmarks cut small (16 AutoFormer and 12 PiT architectures, batch 2): a
two-space search runs, resumes to the very run an uninterrupted one makes, shows, exports
and draws its curves; its fitness is the JCM over the per-space Kendalls recomputed here
independently; architecture terminals the spaces define differently are refused.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from scipy.stats import kendalltau

from autoprox.cli.main import main
from autoprox.core.errors import ConfigError, RunDirError
from autoprox.data.benchmark import load_benchmark
from autoprox.genome.tree import parse_genome
from autoprox.genome.space import GenomeSpace
from autoprox.proxies.proxy import Proxy
from autoprox.search.context import RunContext
from autoprox.search.engine import run_search
from autoprox.search.evolution import EvolutionConfig
from autoprox.search.multispace import MultiRunContext, open_context
from autoprox.search.rundir import RunDirectory
from autoprox.search.settings import SearchSettings
from tests.conftest import REPO, benchmark_jsonl

EVOLUTION = EvolutionConfig(population_size=4, iterations=2, retry_cap=3, top_k=2, seed=3)


@pytest.fixture(scope="module")
def pit_small_file(pit_small, tmp_path_factory):
    return benchmark_jsonl(pit_small, tmp_path_factory, "pit12.jsonl")


@pytest.fixture(scope="module")
def multi_settings(af_small_file, pit_small_file, session_cache) -> SearchSettings:
    return SearchSettings(bench=(str(af_small_file), str(pit_small_file)), batch_size=2,
                          cache_dir=str(session_cache.root), search_fraction=0.75, evolution=EVOLUTION, workers=1,
                          evaluation="counted", bench_weights={"autoformer": 1.0, "pit": 2.0})


@pytest.fixture(scope="module")
def multi_run(multi_settings, tmp_path_factory):
    out = tmp_path_factory.mktemp("multi") / "run"
    report = run_search(multi_settings, out, quiet=True)
    return out, report


def test_a_two_space_search_records_both_benchmarks_and_a_pair_per_space_and_target(multi_run):
    out, report = multi_run
    config = json.loads((out / "config.json").read_text())
    assert config["space"] == "autoformer+pit" and config["spaces"] == ["autoformer", "pit"]
    assert config["settings"]["bench"] == ["af16.jsonl", "pit12.jsonl"] or len(config["settings"]["bench"]) == 2
    assert [b["architectures"] for b in config["benchmark"]] == [16, 12]
    assert [s["space"] for s in config["split"]] == ["autoformer", "pit"]
    assert config["settings"]["targets"] == ["c100_kd", "flower_kd", "chaoyang_kd"]  # the shared defaults
    assert report["finished"] and report["targets"] == [
        f"{s}/{t}" for s in ("autoformer", "pit") for t in ("c100_kd", "flower_kd", "chaoyang_kd")]
    assert set(report["test"]["targets"]) == set(report["targets"])


def test_the_fitness_is_the_weighted_jcm_of_the_kendalls_of_each_space_recomputed_independently(
        multi_run, multi_settings):
    out, report = multi_run
    proxy = Proxy(report["genome"], parse_genome(report["genome"]))
    taus = {}
    for path in multi_settings.benches:  # each space alone, as a single-space run of it reads it
        single = RunContext.from_settings(replace(multi_settings, bench=path, bench_weights={},
                                                  targets=("c100_kd", "flower_kd", "chaoyang_kd")))
        scores = single.score(proxy, "search")[100]
        for target, accuracies in single.accuracies("search").items():
            taus[(single.bench.space, target)] = kendalltau(scores, accuracies).statistic
    weights = {"autoformer": 1.0, "pit": 2.0}
    expected = sum(weights[s] * tau for (s, _), tau in taus.items()) / sum(weights[s] for s, _ in taus)
    best_record = [json.loads(line) for line in (out / "evaluations.jsonl").read_text().splitlines()]
    fitness = max(r["jcm"] for r in best_record if r["valid"])
    assert fitness == pytest.approx(expected, abs=2e-3)  # counted evaluation: float32 rounding
    assert report["search"]["jcm"] == pytest.approx(expected, abs=1e-9)  # best.json: the engine's exact scoring
    for (space, target), tau in taus.items():
        assert report["search"]["targets"][f"{space}/{target}"]["kendall"] == pytest.approx(tau, abs=1e-9)


def test_a_resumed_two_space_search_ends_as_the_uninterrupted_one(multi_run, multi_settings, tmp_path):
    out, report = multi_run
    stopped = tmp_path / "stopped"
    run_search(multi_settings, stopped, quiet=True, stop_after=1)
    resumed = run_search(None, stopped, resume=True, quiet=True)
    assert resumed["genome"] == report["genome"] and resumed["search"] == report["search"]
    assert (stopped / "evaluations.jsonl").read_text() == (out / "evaluations.jsonl").read_text()
    assert isinstance(open_context(stopped), MultiRunContext)


def test_show_export_and_curves_work_on_a_two_space_run(multi_run, tmp_path, capsys):
    out, report = multi_run
    assert main(["show", str(out), "--no-simplify"]) == 0
    shown = capsys.readouterr().out
    assert "autoformer+pit" in shown and "pit/c100_kd" in shown
    module = tmp_path / "proxy.py"
    assert main(["export", str(out), "--out", str(module)]) == 0
    assert report["genome"] in module.read_text() or "def " in module.read_text()
    assert main(["curves", str(out), "--out", str(tmp_path / "curves.png")]) == 0
    assert (tmp_path / "curves.png").stat().st_size > 0


def test_architecture_terminals_are_refused_where_the_spaces_define_them_differently(multi_settings, capsys):
    settings = replace(multi_settings, genome=GenomeSpace(arch_terminals=True).to_json())
    with pytest.raises(ConfigError, match="define .*width.* differently"):
        MultiRunContext.from_settings(settings)
    code = main(["search", "--space", "autoformer", "--space", "pit", "--arch-terminals", "--iterations", "1"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("autoprox: error:") == 1 and "Traceback" not in err
    assert "--arch-terminals" in err and "differently" in err


def test_a_multi_space_search_refuses_what_only_one_benchmark_can_do(multi_settings, af_small_file, tmp_path):
    with pytest.raises(ConfigError, match="one benchmark per space"):
        MultiRunContext.from_settings(replace(multi_settings, bench=(str(af_small_file), str(af_small_file))))
    with pytest.raises(ConfigError, match="--bench-weights names space 'vit'"):
        MultiRunContext.from_settings(replace(multi_settings, bench_weights={"vit": 1.0}))
    with pytest.raises(ConfigError, match="cv-folds"):
        MultiRunContext.from_settings(replace(multi_settings, cv_folds=3))
    with pytest.raises(ConfigError, match="2 benchmarks given where one is taken"):
        RunContext.from_settings(multi_settings)
    # each space would need its own base: refused before the run directory is made
    with pytest.raises(ConfigError, match="combined:params is for one benchmark"):
        run_search(replace(multi_settings, fitness="combined:params"), tmp_path / "run", quiet=True)
    assert not (tmp_path / "run").exists()


def test_a_single_space_config_records_no_trace_of_several(multi_settings):
    single = replace(multi_settings, bench=multi_settings.benches[0], bench_weights={})
    data = single.to_json()
    assert isinstance(data["bench"], str) and "bench_weights" not in data
    assert SearchSettings.from_json(data).to_json() == data
    multi = SearchSettings.from_json(multi_settings.to_json())
    assert multi.benches == multi_settings.benches and multi.bench_weights == {"autoformer": 1.0, "pit": 2.0}


def test_the_command_line_takes_repeated_spaces_and_bench_weights():
    from autoprox.cli.main import build_parser
    from autoprox.cli.options import search_settings

    args = build_parser().parse_args(["search", "--space", "autoformer", "--space", "pit",
                                      "--bench-weights", "autoformer=1,pit=3", "--evaluation", "counted"])
    settings = search_settings(args)
    assert settings.multi_space and [load_benchmark(b).space for b in settings.benches] == ["autoformer", "pit"]
    assert settings.bench_weights == {"autoformer": 1.0, "pit": 3.0}
    single = search_settings(build_parser().parse_args(["search", "--space", "pit"]))
    assert isinstance(single.bench, str) and not single.multi_space


# ------------------------------------------------------------------ leave one space out

@pytest.fixture(scope="module")
def cross_protocol(multi_settings, tmp_path_factory):
    from autoprox.apps.protocols.cross_space import run_cross_space

    out = tmp_path_factory.mktemp("cross") / "protocol"
    settings = replace(multi_settings, bench_weights={})
    return out, run_cross_space(settings, out, seeds=2, zoo=("nwot",), bootstrap=40, quiet=True)


def test_leave_space_out_scores_each_left_out_space_as_a_direct_rank_of_the_chosen_proxy(
        cross_protocol, multi_settings, session_cache, capsys):
    out, protocol = cross_protocol
    assert protocol["finished"] and (out / "protocol.json").is_file()
    assert [(d["left_out"], d["trained_on"]) for d in protocol["directions"]] == [
        ("autoformer", ["pit"]), ("pit", ["autoformer"])]
    targets = protocol["targets"]
    for direction, bench in zip(protocol["directions"], multi_settings.benches):
        summary = protocol["summary"][direction["left_out"]]
        assert summary["seeds"] == 2
        for search in direction["searches"]:
            # the search never saw the left-out space: its run holds the other space alone
            config = json.loads((out / search["run"] / "config.json").read_text())
            assert config["space"] == direction["trained_on"][0]
            # the record holds what the tables read: the iterations the search ran
            assert search["iteration"] == json.loads((out / search["run"] / "best.json").read_text())["iteration"]
            code = main(["rank", "--proxy", search["genome"], "--bench", bench, "--split", "all", "--json",
                         "--targets", ",".join(targets), "--batch-size", "2", "--cache-dir", str(session_cache.root)])
            ranked = json.loads(capsys.readouterr().out)
            assert code == 0
            figures = summary["figures"][f"seed-{search['seed']}"]
            for target in targets:
                assert figures["kendall"][target] == pytest.approx(ranked[target]["kendall"], abs=1e-12)
        differences = summary["differences"]
        assert set(differences) == {"params", "flops", "nwot", "autoprox_a", "autoprox_p", "coarse", "blend",
                                    "blend-own"}
        interval = differences["params"]["interval"]
        assert interval["samples"] > 0 and interval["low"] <= interval["high"]
        code = main(["rank", "--proxy", "params", "--bench", bench, "--split", "all", "--json",
                     "--targets", ",".join(targets), "--batch-size", "2", "--cache-dir", str(session_cache.root)])
        ranked = json.loads(capsys.readouterr().out)
        params_jcm = sum(ranked[t]["kendall"] for t in targets) / len(targets)
        assert differences["params"]["jcm"] == pytest.approx(params_jcm, abs=1e-12)


def test_a_resumed_leave_space_out_protocol_keeps_its_searches(cross_protocol):
    from autoprox.apps.protocols.cross_space import format_cross_space, run_cross_space

    out, protocol = cross_protocol
    again = run_cross_space(None, out, resume=True, quiet=True)
    assert again["summary"] == protocol["summary"]
    text = format_cross_space(again)
    assert "left out pit (searched on autoformer; 2 seed(s))" in text and "blend-own" in text
    with pytest.raises(RunDirError, match=r"holds another protocol \(other protocol options \(seeds\)\)"):
        run_cross_space(None, out, resume=True, seeds=3, quiet=True)
    assert RunDirectory(out).protocol() == again  # the refused resume wrote nothing


def test_a_combined_fitness_protocol_scores_the_left_out_space_as_the_fitness_ranked(multi_settings, tmp_path):
    """With --fitness combined:params:W the left-out space is ranked by W * rank(genome) + (1 - W) *
    rank(params) within its architectures, as the search's fitness ranked the other space; the genome
    alone is kept beside it."""
    from scipy.stats import rankdata

    from autoprox.apps.protocols.cross_space import run_cross_space

    settings = replace(multi_settings, bench_weights={}, fitness="combined:params:0.25",
                       evolution=replace(EVOLUTION, iterations=1))
    protocol = run_cross_space(settings, tmp_path / "protocol", seeds=1, zoo=(), bootstrap=0, quiet=True)
    assert protocol["finished"]
    for direction in protocol["directions"]:
        params = direction["baselines"]["scores"]["params"]
        (search,) = direction["searches"]
        assert search["anchor"]["base"] == "params" and search["anchor"]["weight"] == 0.25
        for target, combined in search["scores"].items():
            genome, base = search["genome_scores"][target], params[target]
            scaled = [(rankdata(v) - 1) / (len(v) - 1) for v in (genome, base)]
            assert combined == pytest.approx((0.25 * scaled[0] + 0.75 * scaled[1]).tolist(), abs=1e-12)
            assert combined != pytest.approx(genome)  # the proxy scored is not the genome alone


def test_a_two_space_search_on_a_dask_cluster_is_the_local_one(multi_settings, tmp_path, dask_cluster):
    """Each space's statistics sharded on the cluster's workers (conftest's local cluster of two): the same run as in
    this process."""
    settings = replace(multi_settings, evaluation="exact",
                       evolution=replace(EVOLUTION, population_size=3, iterations=1))
    local = run_search(settings, tmp_path / "local", quiet=True)
    remote = run_search(settings, tmp_path / "dask", quiet=True, executor=dask_cluster)
    for key in ("genome", "search", "test", "params", "iteration"):
        assert remote[key] == local[key], key


def test_vit_search_defaults_to_the_label_free_proxy_where_a_space_has_no_benchmark(capsys):
    import argparse

    from autoprox.apps.vitsearch import default_proxy
    from autoprox.cli.vitsearch import _default_proxy
    from autoprox.proxies.proxy import resolve_proxy

    assert default_proxy("autoformer-s") == default_proxy("autoformer-b") == default_proxy("timm") \
        == "recommended:any/joint"
    assert default_proxy("pit") == "recommended:pit/joint"
    args = argparse.Namespace(proxy=None)
    _default_proxy(args, "autoformer-b")
    assert args.proxy == "recommended:any/joint" and "--proxy not given" in capsys.readouterr().err
    from autoprox.proxies.recommended import resolve_recommended

    resolve_proxy("recommended:any/joint")  # the protocol's choice: a searched formula or a baseline
    # one proxy for every target
    assert resolve_recommended("recommended:any/c100_kd")[0] == resolve_recommended("recommended:any/joint")[0]
    searched = resolve_proxy("recommended:any/searched")  # the N-space protocol's search on every space: a formula
    assert searched.formula is not None and searched.provenance["file"].endswith("any/searched.json")


def test_vit_search_gives_its_default_per_target_proxy_its_first_target(capsys):
    """Left without --proxy on PiT, vit-search's default is a per-target ensemble: it used to stop asking for
    --target; the first of its targets is taken and said. A --target given is kept."""
    import argparse

    from autoprox.cli.vitsearch import _default_proxy, _default_target
    from autoprox.proxies.proxy import resolve_proxy

    args = argparse.Namespace(proxy=None, target=None)
    assert _default_proxy(args, "pit")
    proxy = resolve_proxy(args.proxy)
    assert not proxy.joint
    _default_target(args, proxy)
    assert args.target == "c100_kd" and "--target not given: c100_kd" in capsys.readouterr().err
    proxy.members_for(args.target)  # what the search then scores with
    chosen = argparse.Namespace(proxy=None, target="flower_kd")
    _default_proxy(chosen, "pit")
    _default_target(chosen, proxy)
    assert chosen.target == "flower_kd"
    assert not _default_proxy(argparse.Namespace(proxy="params", target=None), "pit")


def test_the_label_free_recommendation_is_what_the_committed_protocols_choose(pit_small_file, session_cache, capsys):
    """benchmarks/recommend_any.py --check: the manifest's any/ entries are the N-space protocols' choice; a
    baseline chosen there is a rank formula that ranks every architecture as the baseline itself."""
    import importlib.util
    from pathlib import Path

    from autoprox.proxies.recommended import resolve_recommended

    repo = REPO
    # the script's main, in this process (the same check without a fresh interpreter's imports)
    spec = importlib.util.spec_from_file_location("recommend_any", repo / "benchmarks" / "recommend_any.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    code = script.main(["--check"])
    printed = capsys.readouterr()
    assert code == 0, printed.out + printed.err
    _, entry = resolve_recommended("recommended:any/joint")
    if not entry["selection"].startswith("baseline "):
        return
    baseline = entry["selection"].split(" ", 1)[1]
    ranked = {}
    for proxy in ("recommended:any/joint", baseline):
        assert main(["rank", "--proxy", proxy, "--bench", str(pit_small_file), "--split", "all", "--json",
                     "--targets", "c100_kd", "--batch-size", "2", "--cache-dir", str(session_cache.root)]) == 0
        ranked[proxy] = json.loads(capsys.readouterr().out)["c100_kd"]["kendall"]
    assert ranked["recommended:any/joint"] == pytest.approx(ranked[baseline], abs=1e-12)


def test_rank_of_a_multi_space_runs_proxy_asks_for_one_of_its_benchmarks(multi_run, capsys):
    out, _ = multi_run
    code = main(["rank", "--proxy", str(out / "best.json")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("autoprox: error:") == 1 and "Traceback" not in err
    assert "searched several benchmarks (autoformer, pit): give --space or --bench" in err


# ======================================== issue 42: one run interface
def test_both_kinds_of_run_are_a_search_run_made_and_recorded_alike(multi_run, multi_settings):
    """Both contexts implement :class:`~autoprox.search.searchrun.SearchRun` (no caller asks which it holds),
    :func:`new_context` chooses the kind, and ``config.json`` comes from one writer: a multi-space run's record is
    the single-space one's, each field a list with one entry per benchmark naming its space."""
    from autoprox.search.searchrun import SearchRun
    from autoprox.search.multispace import new_context

    multi = open_context(multi_run[0])
    single = multi.parts[0]
    assert isinstance(multi, SearchRun) and isinstance(single, SearchRun) and single.parts == (single,)
    assert isinstance(new_context(multi_settings, measured_on=None), MultiRunContext)
    assert type(new_context(single.settings, measured_on=None)) is RunContext
    one, several = single.config_json(["autoprox"]), multi.config_json(["autoprox"])
    assert list(several) == [*list(one)[:-3], "spaces", "benchmark", "split", "stats"]
    for name in ("benchmark", "split", "stats"):
        assert [{k: v for k, v in entry.items() if k != "space"} for entry in several[name]] == \
            [part.config_json()[name] for part in multi.parts]
        assert [entry["space"] for entry in several[name]] == several["spaces"] == ["autoformer", "pit"]
    changed = multi.with_session({"workers": 3, "evolution.iterations": 7})
    assert {(c.settings.workers, c.settings.evolution.iterations) for c in (changed, *changed.parts)} == {(3, 7)}
    assert changed.settings.bench == multi.settings.bench and not multi.test_prefetch().missing
