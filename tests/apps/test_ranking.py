"""The ranking table: partial Kendall by hand, the table's figures against direct
computation, the score and statistics caches, failures, and the three formats."""

from __future__ import annotations

from pathlib import Path
import csv
import io
import json
import math

import numpy as np
import pytest
import torch
from torch import nn

from autoprox.apps.ranking import (
    CSV_COLUMNS,
    format_table,
    rank_table,
    seed_figures,
    summarise,
)
from autoprox.core.correlation import correlate, kendall, partial_kendall
from autoprox.data.cache import StatsPlan
from autoprox.networks.statistics import InputSpec
from autoprox.proxies.zoo_scores import raw_value, set_scores
from autoprox.proxies.proxy import resolve_proxies, resolve_proxy, score_archs
from autoprox.spaces.architectures import count_params
from tests.commands import run_cli
from tests.conftest import REPO

pytestmark = pytest.mark.slow

SPEC = InputSpec("gaussian", batch_size=2)


def test_partial_kendall_by_hand():
    """x = 1,2,3,4; y = 1,3,2,4; z = 2,1,3,4 (no ties).

    Pairs: t_xy = (5 - 1)/6 = 2/3, t_xz = (5 - 1)/6 = 2/3, t_yz = (4 - 2)/6 = 1/3, so
    (2/3 - 2/9) / sqrt((5/9)(8/9)) = 4 / sqrt(40).
    """
    x, y, z = [1, 2, 3, 4], [1, 3, 2, 4], [2, 1, 3, 4]
    assert kendall(x, y) == pytest.approx(2 / 3)
    assert kendall(x, z) == pytest.approx(2 / 3)
    assert kendall(y, z) == pytest.approx(1 / 3)
    assert partial_kendall(x, y, z) == pytest.approx(4 / math.sqrt(40), rel=1e-12)
    # z = 2,4,1,3 has tau 0 with 1,2,3,4 (3 concordant, 3 discordant pairs): nothing to remove
    assert kendall([1, 2, 3, 4], [2, 4, 1, 3]) == 0.0
    assert partial_kendall([1, 2, 3, 4], [1, 2, 3, 4], [2, 4, 1, 3]) == pytest.approx(1.0)


def test_partial_kendall_undefined_cases():
    assert math.isnan(partial_kendall([1, 2, 3], [3, 1, 2], [10, 20, 30]))  # x ranks as z does
    assert math.isnan(kendall([1, 1, 1], [1, 2, 3]))
    figures = seed_figures(np.array([1.0, 2.0, 3.0, 5.0]), np.array([1.0, np.nan, 2.0, 4.0]),
                           np.array([4.0, 3.0, 2.0, 1.0]))
    assert figures["n"] == 3 and figures["tau_params"] == pytest.approx(-1.0)  # over measured entries only
    assert math.isnan(figures["partial_tau"])


def test_summarise_mean_and_sample_std():
    assert summarise([0.2, 0.4, 0.6]) == {"mean": pytest.approx(0.4), "std": pytest.approx(0.2), "per_seed": [0.2, 0.4, 0.6]}
    assert summarise([0.3])["std"] is None
    assert summarise([0.3, math.nan])["mean"] is None


@pytest.fixture(scope="module")
def small(af_small):
    return af_small.subset(range(6))


@pytest.fixture(scope="module")
def table(small, session_cache):
    proxies = resolve_proxies("params,snip,tvt_l2,autoprox_a")
    return rank_table(proxies, small, range(len(small)), ["c100_kd", "flower_kd"], (0, 1), SPEC,
                      {"c100_kd": 100, "flower_kd": 100}, session_cache, workers=1)


def _row(table, name):
    return next(r for r in table["proxies"] if r["proxy"] == name)


def test_table_figures_match_direct_computation(table, small, session_cache):
    params = np.array([count_params(a) for a in small.archs], dtype=float)
    acc = small.accuracies["c100_kd"]
    row = _row(table, "params")
    assert row["targets"]["c100_kd"]["kendall"]["mean"] == pytest.approx(correlate(params, acc)["kendall"])
    assert row["targets"]["c100_kd"]["kendall"]["std"] == 0.0 and row["targets"]["c100_kd"]["tau_params"]["mean"] == 1.0
    assert row["targets"]["c100_kd"]["partial_tau"]["mean"] is None
    # a zoo proxy: per seed, the raw values of fresh networks
    snip = _row(table, "snip")["targets"]["c100_kd"]
    for position, seed in enumerate((0, 1)):
        values = np.array([raw_value("snip", a, SPEC, seed, 100) for a in small.archs])
        assert snip["kendall"]["per_seed"][position] == pytest.approx(correlate(values, acc)["kendall"])
        assert snip["partial_tau"]["per_seed"][position] == pytest.approx(partial_kendall(values, acc, params))
    assert snip["kendall"]["mean"] == pytest.approx(np.mean(snip["kendall"]["per_seed"]))
    assert snip["kendall"]["std"] == pytest.approx(np.std(snip["kendall"]["per_seed"], ddof=1))
    # a published genome: the very numbers of the search's evaluator path (score_archs on cached statistics)
    plan = StatsPlan(SPEC, (1,), {"c100_kd": 100})
    scores = score_archs(resolve_proxy("autoprox_a"), list(small.archs), session_cache, plan)[100]
    assert _row(table, "autoprox_a")["targets"]["c100_kd"]["kendall"]["per_seed"][1] == pytest.approx(
        correlate(scores, acc)["kendall"], abs=0)


def test_table_says_what_needed_a_fresh_pass(table):
    assert _row(table, "params")["fresh"] == "no: architecture only"
    assert _row(table, "snip")["fresh"].startswith("yes: forward/backward")
    assert _row(table, "tvt_l2")["fresh"].startswith("no pass: initialised weights only")
    assert _row(table, "autoprox_a")["fresh"].startswith(("no: statistics cache", "statistics:"))
    for row in table["proxies"]:
        assert row["status"] == "ok" and row["seconds_per_arch"] >= 0


def test_second_run_reads_the_caches(table, small, session_cache):
    again = rank_table(resolve_proxies("snip,autoprox_a"), small, range(len(small)), ["c100_kd", "flower_kd"], (0, 1),
                       SPEC, {"c100_kd": 100, "flower_kd": 100}, session_cache)
    assert _row(again, "snip")["fresh"].endswith("(values read from the score cache)")
    assert _row(again, "autoprox_a")["fresh"] == "no: statistics cache"
    assert _row(again, "snip")["targets"] == _row(table, "snip")["targets"]
    assert _row(again, "snip")["seconds_per_arch"] == _row(table, "snip")["seconds_per_arch"]  # measured when computed


def test_tvt_normalises_over_the_ranked_set(small):
    raws = [raw_value("tvt_l2", a, SPEC, 0, 100) for a in small.archs]
    full = set_scores("tvt_l2", raws)
    assert full.min() == 0.0 and full.max() == 2.0
    part = set_scores("tvt_l2", raws[:3])
    assert part.min() == 0.0 and part.max() == 2.0  # the min-max is over the ranked set, whatever it is
    assert np.array_equal(np.argsort(part), np.argsort(full[:3]))


def test_a_failing_proxy_is_reported_and_the_others_finish(small, tmp_path):
    """Batch 1: ZiCo needs two gradient samples, a bad teacher fails TVT; params and synflow go on."""
    from autoprox.data.cache import StatisticsCache

    archs = small.subset(range(3))
    bad_teacher = nn.Flatten()
    table = rank_table(resolve_proxies("zico,tvt,synflow,params"), archs, range(3), ["c100_kd"], (0,),
                       InputSpec("gaussian", 1), {"c100_kd": 100}, StatisticsCache(tmp_path), teacher=bad_teacher)
    zico, tvt = _row(table, "zico"), _row(table, "tvt")
    assert zico["status"] == "failed" and "failed on 3 of 3 architectures" in zico["reason"]
    assert "at least 2 images" in zico["reason"] and not zico["targets"]
    assert tvt["status"] == "failed" and "teacher must return" in tvt["reason"]
    assert _row(table, "synflow")["status"] == "ok" and _row(table, "params")["status"] == "ok"
    markdown = format_table(table, "markdown")
    assert "| zico | all | failed: failed on 3 of 3" in markdown


def test_tvt_without_a_teacher(small, session_cache):
    table = rank_table(resolve_proxies("tvt,tvt_l2"), small, range(len(small)), ["c100_kd"], (0,), SPEC,
                       {"c100_kd": 100}, session_cache)
    assert _row(table, "tvt")["status"] == "skipped" and "no teacher" in _row(table, "tvt")["reason"]
    alone = rank_table(resolve_proxies("tvt,params"), small, range(len(small)), ["c100_kd"], (0,), SPEC,
                       {"c100_kd": 100}, session_cache)
    row = _row(alone, "tvt")
    assert row["status"] == "ok" and "no teacher given" in row["note"] and "tvt_l2" in row["note"]
    assert row["targets"] == _row(table, "tvt_l2")["targets"]
    teacher = nn.Sequential(nn.Conv2d(3, 2, 16, stride=16))
    torch.manual_seed(0)
    with_teacher = rank_table(resolve_proxies("tvt"), small, range(len(small)), ["c100_kd"], (0,), SPEC,
                              {"c100_kd": 100}, session_cache, teacher=teacher)
    assert _row(with_teacher, "tvt")["status"] == "ok" and _row(with_teacher, "tvt")["note"] == ""


def test_formats(table):
    markdown = format_table(table, "markdown")
    assert ("| proxy | target | Kendall | Spearman | Pearson | τ with params | τ with depth | partial τ given params "
            "| partial τ given depth | bar (best descriptor τ) | beats bar | s/arch | fresh pass |") in markdown
    assert " ± " in markdown and "Partial τ: partial Kendall tau" in markdown and "given depth: the same" in markdown
    assert "| snip | c100_kd |" in markdown and "autoprox_a: `block_mean(" in markdown
    bars = table["bars"]
    assert "Bar per target, the best coarse descriptor" in markdown
    for target, bar in bars.items():
        assert f"{target} {bar['descriptor']} {bar['kendall']:+.3f}" in markdown
    snip_line = next(line for line in markdown.splitlines() if line.startswith("| snip | flower_kd |"))
    snip = _row(table, "snip")["targets"]["flower_kd"]
    assert snip_line.count("|") == markdown.splitlines()[2].count("|")  # as many cells as the header
    assert f"| {bars['flower_kd']['descriptor']} {bars['flower_kd']['kendall']:+.3f} | " \
           f"{'yes' if snip['beats_bar'] else 'no'} |" in snip_line
    assert f"{snip['tau_depth']['mean']:+.3f} ± {snip['tau_depth']['std']:.3f}" in snip_line
    rows = list(csv.DictReader(io.StringIO(format_table(table, "csv"))))
    assert list(rows[0]) == CSV_COLUMNS and len(rows) == 4 * 2
    assert {"tau_depth_mean", "partial_tau_depth_std", "bar_descriptor", "bar_kendall", "beats_bar"} <= set(CSV_COLUMNS)
    snip_csv = next(r for r in rows if r["proxy"] == "snip" and r["target"] == "flower_kd")
    assert float(snip_csv["kendall_mean"]) == pytest.approx(snip["kendall"]["mean"])
    assert float(snip_csv["partial_tau_depth_mean"]) == pytest.approx(snip["partial_tau_depth"]["mean"])
    assert snip_csv["bar_descriptor"] == bars["flower_kd"]["descriptor"]
    assert float(snip_csv["bar_kendall"]) == pytest.approx(bars["flower_kd"]["kendall"])
    assert snip_csv["beats_bar"] == str(snip["beats_bar"])
    data = json.loads(format_table(table, "json"))
    assert data["seeds"] == [0, 1] and [p["proxy"] for p in data["proxies"]] == ["params", "snip", "tvt_l2", "autoprox_a"]
    assert data["proxies"][0]["targets"]["c100_kd"]["partial_tau"]["mean"] is None  # NaN -> null
    assert data["bars"]["c100_kd"]["descriptor"] == bars["c100_kd"]["descriptor"]
    assert set(data["proxies"][1]["targets"]["c100_kd"]) >= {"tau_depth", "partial_tau_depth", "beats_bar"}
    with pytest.raises(ValueError, match="unknown format"):
        format_table(table, "xml")


def test_proxy_lists_all_and_genomes_with_commas():
    from autoprox.proxies.proxy import AUTOPROX_A, BUILTIN_PROXIES
    from autoprox.proxies.proxy_input import split_proxy_list
    from autoprox.core.errors import ProxyError

    assert split_proxy_list(f" snip ,{AUTOPROX_A}, dss") == ["snip", AUTOPROX_A, "dss"]
    everything = resolve_proxies("all")
    assert [p.name for p in everything] == list(BUILTIN_PROXIES) and len(BUILTIN_PROXIES) == 20
    assert {p.kind for p in everything} == {"architecture", "zoo", "genome"}
    assert [p.name for p in resolve_proxies("dss,all,dss")][:3] == ["dss", "params", "flops"]
    assert len(resolve_proxies("dss,all,dss")) == 20
    with pytest.raises(ProxyError, match=r"unknown proxy 'nope'.*params, flops, snip, grasp.*autoprox_p"):
        resolve_proxies("snip,nope")
    with pytest.raises(ProxyError, match="no proxy given"):
        resolve_proxies(" , ")


# --- beyond size: depth, partial tau given depth, the bar of each target (issue 6, item 5) ---------------


def _independent_bars(archs, accuracies):
    """The bar by hand: the highest Kendall tau-b of the four coarse descriptors (scipy, NaN accuracies dropped)."""
    from scipy.stats import kendalltau

    from autoprox.spaces.descriptors import describe

    described = [describe(a) for a in archs]
    bars = {}
    for target, acc in accuracies.items():
        keep = ~np.isnan(acc)
        taus = {name: float(kendalltau(np.array([d[name] for d in described])[keep], acc[keep]).statistic)
                for name in ("params", "depth", "width", "macs")}
        best = max(taus, key=taus.get)
        bars[target] = (best, taus[best], taus)
    return bars


def test_table_depth_columns_and_bars_match_direct_computation(table, small):
    from autoprox.spaces.descriptors import describe

    params = np.array([count_params(a) for a in small.archs], dtype=float)
    depth = np.array([describe(a)["depth"] for a in small.archs])
    assert np.ptp(depth) > 0, "the architectures differ in depth, or the depth columns test nothing"
    for target in ("c100_kd", "flower_kd"):
        acc = small.accuracies[target]
        figs = _row(table, "params")["targets"][target]
        assert figs["tau_params"]["mean"] == 1.0 and figs["partial_tau"]["mean"] is None  # params given params: undefined
        assert figs["tau_depth"]["mean"] == pytest.approx(kendall(params, depth))
        assert figs["partial_tau_depth"]["mean"] == pytest.approx(partial_kendall(params, acc, depth))
        snip = _row(table, "snip")["targets"][target]
        for position, seed in enumerate((0, 1)):
            values = np.array([raw_value("snip", a, SPEC, seed, 100) for a in small.archs])
            assert snip["tau_depth"]["per_seed"][position] == pytest.approx(kendall(values, depth))
            assert snip["partial_tau_depth"]["per_seed"][position] == pytest.approx(partial_kendall(values, acc, depth))
    bars = _independent_bars(small.archs, {t: small.accuracies[t] for t in ("c100_kd", "flower_kd")})
    for target, (name, tau, taus) in bars.items():
        assert table["bars"][target]["kendall"] == pytest.approx(max(taus.values()))
        assert taus[table["bars"][target]["descriptor"]] == pytest.approx(tau)
        assert table["bars"][target]["n"] == len(small)
        for row in table["proxies"]:
            figs = row["targets"][target]
            assert figs["beats_bar"] == (figs["kendall"]["mean"] > tau)


def test_seed_figures_without_depth_keeps_its_old_keys():
    figures = seed_figures(np.array([1.0, 2.0, 3.0]), np.array([1.0, 3.0, 2.0]), np.array([3.0, 2.0, 1.0]))
    assert "tau_depth" not in figures and figures["tau_params"] == pytest.approx(-1.0)
    with_depth = seed_figures(np.array([1.0, 2.0, 3.0]), np.array([1.0, 3.0, 2.0]), np.array([3.0, 2.0, 1.0]),
                              np.array([1.0, 1.0, 2.0]))
    assert with_depth["tau_depth"] == pytest.approx(kendall([1, 2, 3], [1, 1, 2]))


def _cli(capsys, *argv):
    from autoprox.cli.main import main

    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_rank_single_proxy_reports_beyond_size(capsys, af_bench):
    """``rank --proxy params``: the old figures unchanged, tau with params 1, partial given params undefined,
    and per target the bar, the best of the four descriptors on the same architectures."""
    from autoprox.spaces.descriptors import describe
    from tests.conftest import AF_FILE

    code, out, _ = _cli(capsys, "rank", "--proxy", "params", "--bench", str(AF_FILE), "--json")
    assert code == 0
    result = json.loads(out)
    assert round(result["c100_kd"]["kendall"], 3) == 0.548 and result["c100_kd"]["n"] == 100  # the README's figure
    params = np.array([count_params(a) for a in af_bench.archs], dtype=float)
    depth = np.array([describe(a)["depth"] for a in af_bench.archs])
    bars = _independent_bars(af_bench.archs, {t: af_bench.accuracies[t] for t in result})
    for target, figs in result.items():
        assert {"kendall", "spearman", "pearson", "n"} <= set(figs)
        acc = af_bench.accuracies[target]
        assert figs["kendall_with_params"] == pytest.approx(1.0)
        assert figs["partial_given_params"] is None  # undefined: the proxy ranks exactly as the parameter count
        assert figs["kendall_with_depth"] == pytest.approx(kendall(params, depth))
        assert figs["partial_given_depth"] == pytest.approx(partial_kendall(params, acc, depth))
        name, tau, taus = bars[target]
        assert figs["bar"]["kendall"] == pytest.approx(max(taus.values())) and taus[figs["bar"]["descriptor"]] == tau
        assert figs["beats_bar"] == (figs["kendall"] > tau)
    # on this space c100_kd follows depth, flower_kd the parameter count (which cannot beat itself)
    assert result["c100_kd"]["bar"]["descriptor"] == "depth" and result["c100_kd"]["beats_bar"] is False
    assert result["flower_kd"]["bar"]["descriptor"] == "params"
    assert result["flower_kd"]["bar"]["kendall"] == pytest.approx(result["flower_kd"]["kendall"])
    assert result["flower_kd"]["beats_bar"] is False
    code, text, _ = _cli(capsys, "rank", "--proxy", "params", "--bench", str(AF_FILE), "--targets", "c100_kd,flower_kd")
    assert code == 0
    lines = text.splitlines()
    assert lines[1].split()[:5] == ["target", "kendall", "spearman", "pearson", "n"]
    assert "tau params" in lines[1] and "partial|depth" in lines[1] and "beats bar" in lines[1]
    c100 = lines[2].split()
    assert c100[:2] == ["c100_kd", "+0.548"] and c100[5:7] == ["+1.000", f"{kendall(params, depth):+.3f}"]
    assert c100[7] == "nan" and c100[9:] == ["depth", f"{result['c100_kd']['bar']['kendall']:+.3f}", "no"]


def test_rank_single_genome_beyond_size_equals_the_search_report(capsys, af_small, session_cache, tmp_path):
    """A genome on a small benchmark: the figures are those of beyond_size on its scores."""
    from autoprox.data.benchmark import write_benchmark_jsonl
    from autoprox.proxies.figures import beyond_size
    from autoprox.proxies.proxy import AUTOPROX_A, score_archs

    path = tmp_path / "af8.jsonl"
    small = af_small.subset(range(8))
    write_benchmark_jsonl(small, path)
    code, out, _ = _cli(capsys, "rank", "--proxy", "autoprox_a", "--bench", str(path), "--batch-size", "2",
                        "--cache-dir", str(session_cache.root), "--workers", "1", "--json", "--targets", "c100_kd,flower_kd")
    assert code == 0
    result = json.loads(out)
    plan = StatsPlan(SPEC, (0,), {"c100_kd": 100, "flower_kd": 100})
    scores = score_archs(resolve_proxy(AUTOPROX_A), list(small.archs), session_cache, plan)[100]
    expected = beyond_size(scores, list(small.archs), small.accuracies, ["c100_kd", "flower_kd"])
    for target in ("c100_kd", "flower_kd"):
        for key in ("kendall", "kendall_with_params", "kendall_with_depth", "partial_given_params",
                    "partial_given_depth"):
            assert result[target][key] == pytest.approx(expected[target][key]), key
        assert result[target]["bar"]["descriptor"] == expected[target]["bar"]["descriptor"]
        assert result[target]["bar"]["kendall"] == pytest.approx(expected[target]["bar"]["kendall"])
        assert result[target]["beats_bar"] == expected[target]["beats_bar"]
        assert abs(result[target]["kendall_with_params"]) < 1  # a statistics proxy, not size itself


def test_rank_of_a_runs_best_json_defaults_to_its_test_split(run_copy, session_cache, capsys):
    common = ["rank", "--proxy", run_copy / "best.json", "--batch-size", "2", "--cache-dir", session_cache.root,
              "--workers", "1", "--json", "--targets", "c100_kd"]
    from autoprox.search.context import RunContext

    config = json.loads((run_copy / "config.json").read_text())
    context = RunContext.open(run_copy)
    code, out, err = run_cli(capsys, *common, "--bench", context.bench.source)
    assert code == 0, err
    assert json.loads(out)["c100_kd"]["n"] == len(config["split"]["test"]) == 4
    assert "split: test, the architectures" in err and "--split all ranks every architecture" in err
    code, out, err = run_cli(capsys, *common, "--bench", context.bench.source, "--split", "all")
    assert json.loads(out)["c100_kd"]["n"] == 16 and "split: test" not in err


def _architecture_only_run(tmp_path: Path) -> Path:
    """A copy of the committed PiT run whose best proxy reads only architecture terminals (no statistics)."""
    import shutil

    run = shutil.copytree(REPO / "runs" / "pit-best", tmp_path / "run")
    best = json.loads((run / "best.json").read_text())
    best["genome"] = "block_mean(A_params)"
    (run / "best.json").write_text(json.dumps(best))
    return run


@pytest.mark.slow
def test_rank_a_run_proxy_finds_its_benchmark_and_the_table_uses_its_test_split(capsys, tmp_path):
    run = _architecture_only_run(tmp_path)
    test = json.loads((run / "config.json").read_text())["split"]["test"]
    cache = ["--cache-dir", str(tmp_path / "cache")]  # nothing is computed: the proxy reads no statistics
    code, out, err = run_cli(capsys, "rank", "--proxy", str(run / "best.json"), *cache)
    assert code == 0, err
    assert f"the one {run} was made with" in err
    assert out.splitlines()[0].endswith(f"(pit, split test, {len(test)} architectures)")
    code, out, err = run_cli(capsys, "rank", "--proxy", f"params,{run / 'best.json'}", "--format", "json", *cache)
    assert code == 0, err
    assert f"ranking 2 proxies on {len(test)} architectures" in err
    assert "split: test, the architectures the searches of the run proxies never saw" in err
    code, out, err = run_cli(capsys, "rank", "--proxy", f"params,{run / 'best.json'}", "--format", "json",
                             "--split", "all", "--space", "pit", *cache)
    assert code == 0 and "ranking 2 proxies on 100 architectures" in err
