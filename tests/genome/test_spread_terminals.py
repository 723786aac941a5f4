"""The spread statistics S1g..S4g: exact per-sample spreads, extra cache entries that leave the
eight's untouched, genomes that read them (parse, score, simplify, export) and a search with them."""

from __future__ import annotations

import importlib.util
import json
import random

import numpy as np
import pytest
import torch

from autoprox.data.cache import StatisticsCache, StatsPlan, StatsRequest, cache_key
from autoprox.data.entries import decode_entry
from autoprox.genome.free import free_set
from autoprox.genome.tree import canonical_string, genome_extras, genome_to_string, parse_genome, score_architecture
from autoprox.genome.template import random_template, template_genes
from autoprox.core.errors import GenomeError
from autoprox.genome.space import GenomeSpace
from autoprox.networks.models import build_model
from autoprox.networks.runtime import SPREAD_NAMES, block_statistics, find_blocks
from autoprox.networks.statistics import (
    STAT_NAMES,
    InputSpec,
    compute_statistics,
    derived_seed,
    make_batch,
    stats_fingerprint,
    torch_threads,
)
from autoprox.proxies.scorers import GenomeScorer
from autoprox.spaces.descriptors import terminal_values

pytestmark = pytest.mark.slow

#: ZiCo over the qkv and fc1 weights: per block, log sqrt(sum |batch-mean gradient| / its spread over samples);
#: on AutoFormer's 100 architectures it ranks with the zoo's zico at Kendall 0.896 (docs/method.md).
ZICO_LIKE = ("block_sum(element_wise_sum(element_wise_log(frobenius_norm(element_wise_sqrt(element_wise_product("
             "element_wise_abs(F1g), element_wise_invert(S1g))))), element_wise_log(frobenius_norm(element_wise_sqrt("
             "element_wise_product(element_wise_abs(F3g), element_wise_invert(S3g)))))))")
TEMPLATE_SPREAD = "block_mean(to_mean_scalar(element_wise_product(sigmoid(no_op(S4)), element_wise_abs(no_op(S2g)))))"


@pytest.fixture(scope="module")
def tiny(af_small):
    """The smallest AutoFormer network of the benchmark, a batch of 3 and the model built as the engine builds it."""
    arch = af_small.archs[0]
    model = build_model(arch, num_classes=100, seed=derived_seed(0, "model"))
    model.train()
    images, labels = make_batch(InputSpec(batch_size=3), 100, 0)
    return arch, model, images, labels


def test_spread_equals_a_hand_loop_of_per_sample_backward_passes(tiny):
    _, model, images, labels = tiny
    with torch_threads(1):
        stats = block_statistics(model, images, labels, train=None, spread=True)
        blocks = find_blocks(model)
        layers = {"S1g": lambda b: b.attn.qkv, "S2g": lambda b: b.attn.proj, "S3g": lambda b: b.mlp.fc1}
        grads = {name: [[] for _ in blocks] for name in layers}
        acts, act_grads = [[] for _ in blocks], [[] for _ in blocks]
        for i in range(images.shape[0]):
            kept = []

            def keep(_module, _inputs, output):
                output.retain_grad()
                kept.append(output)

            handles = [b.mlp.act.register_forward_hook(keep) for _, b in blocks]
            model.zero_grad(set_to_none=True)
            torch.nn.functional.cross_entropy(model(images[i:i + 1]), labels[i:i + 1]).backward()
            for handle in handles:
                handle.remove()
            for index, (_, block) in enumerate(blocks):
                for name, layer in layers.items():
                    grads[name][index].append(layer(block).weight.grad.detach().clone())
                acts[index].append(kept[index].detach()[0])
                act_grads[index].append(kept[index].grad.detach()[0] / images.shape[0])  # the batch-mean loss's
    for index, block in enumerate(stats):
        for name in layers:
            per_sample = torch.stack(grads[name][index])
            torch.testing.assert_close(block[name], per_sample.std(dim=0, correction=0), rtol=1e-4, atol=1e-7)
        # the batch mean of the per-sample gradients is the batch gradient F1g
        torch.testing.assert_close(torch.stack(grads["S1g"][index]).mean(dim=0), block["F1g"], rtol=1e-4, atol=1e-8)
        torch.testing.assert_close(block["S4"], torch.stack(acts[index]).std(dim=0, correction=0),
                                   rtol=1e-4, atol=1e-6)
        torch.testing.assert_close(block["S4g"], torch.stack(act_grads[index]).std(dim=0, correction=0),
                                   rtol=1e-4, atol=1e-10)
        assert float(block["S1g"].abs().max()) > 0 and float(block["S4g"].abs().max()) > 0


def test_the_spread_pass_gives_the_eight_statistics_bitwise(pit_small, small_spec):
    arch = pit_small.archs[0]
    plain = compute_statistics(arch, small_spec, 0, 100)
    spread = compute_statistics(arch, small_spec, 0, 100, spread=True)
    assert stats_fingerprint(plain) == stats_fingerprint(spread)
    assert set(spread[0]) == set(STAT_NAMES) | set(SPREAD_NAMES) and set(plain[0]) == set(STAT_NAMES)
    for block in spread:
        assert block["S1g"].shape == block["F1g"].shape and block["S3g"].shape == block["F3g"].shape
        assert block["S4"].shape == block["F4"].shape and block["S4g"].shape == block["F4g"].shape


def test_extra_entries_round_trip_and_leave_the_eights_entry_and_key_alone(af_small, small_spec, tmp_path):
    arch = af_small.archs[2]
    plain, extra = StatsRequest(arch, small_spec, 0, 100), StatsRequest(arch, small_spec, 0, 100, ("spread",))
    assert cache_key(plain, "float16") == cache_key(extra, "float16") != cache_key(extra, "float16", "spread")
    first = StatisticsCache(tmp_path / "first")
    eight = first.get(plain)
    written = first.path(plain).read_bytes()
    both = first.get(extra, encoded=True)
    assert first.path(plain).read_bytes() == written  # read, never rewritten
    assert first.path(extra, "spread").is_file() and first.contains(extra)
    assert set(both[0]) == set(STAT_NAMES) | set(SPREAD_NAMES)
    for mine, theirs in zip(eight, both):
        for name in STAT_NAMES:
            assert torch.equal(mine[name], theirs[name])
    # A cache that computes both at once writes the very same bytes for each entry.
    second = StatisticsCache(tmp_path / "second")
    again = second.get(extra)
    assert second.path(plain).read_bytes() == written
    assert second.path(extra, "spread").read_bytes() == first.path(extra, "spread").read_bytes()
    # float16 storage with a power-of-two scale, as the eight's
    fresh = compute_statistics(arch, small_spec, 0, 100, spread=True)
    for stored, exact in zip(again, fresh):
        for name in SPREAD_NAMES:
            torch.testing.assert_close(stored[name], exact[name], rtol=2e-3, atol=float(exact[name].abs().max()) * 1e-3)
    # decode_entry reads the eight's entry as before, the extra one with extra=...
    assert set(decode_entry(first.path(plain), first.key(plain))[0]) == set(STAT_NAMES)
    assert set(decode_entry(first.path(extra, "spread"), first.key(extra, "spread"), extra="spread")[0]) \
        == set(SPREAD_NAMES)
    # a damaged extra entry is recomputed; the eight's entry stays as it was
    first.path(extra, "spread").write_bytes(b"PK\x03\x04 damaged")
    with pytest.warns(UserWarning, match="corrupt cache entry"):
        first.get(extra)
    assert first.path(plain).read_bytes() == written
    assert first.path(extra, "spread").read_bytes() == second.path(extra, "spread").read_bytes()


def test_plans_without_extras_keep_their_record_and_keys(af_small, small_spec):
    plan = StatsPlan(small_spec, (0,), {"c100_kd": 100})
    assert "extras" not in plan.to_json()
    assert plan.with_extras(()) is plan
    wider = plan.with_extras(("spread",))
    assert wider.to_json()["extras"] == ["spread"]
    assert [r.extras for r in wider.requests(af_small.archs[:2])] == [("spread",)] * 2
    # The released benchmark's default key, as the warm cache of the whole benchmark holds it.
    assert cache_key(StatsRequest(af_small.archs[0], InputSpec(), 0, 100), "float16") == (
        cache_key(StatsRequest(af_small.archs[0], InputSpec(), 0, 100, ("spread",)), "float16"))
    with pytest.raises(Exception, match="unknown extra statistics"):
        StatsRequest(af_small.archs[0], small_spec, 0, 100, ("nope",))


def test_genomes_with_spread_terminals_parse_print_and_belong_only_to_spaces_with_them():
    tree = parse_genome(ZICO_LIKE)
    assert genome_to_string(tree) == ZICO_LIKE and genome_extras(tree) == ("spread",)
    assert genome_extras(parse_genome("block_mean(frobenius_norm(F1g))")) == ()
    assert canonical_string(parse_genome(TEMPLATE_SPREAD)).startswith("block_mean(to_mean_scalar(element_wise_product(")
    assert template_genes(parse_genome(TEMPLATE_SPREAD)).input_a == "S4"
    assert not GenomeSpace().contains(tree)
    assert GenomeSpace(aggregations=("block_sum",), spread_terminals=True).contains(tree)
    with pytest.raises(GenomeError, match="S9"):
        parse_genome("block_mean(frobenius_norm(S9))")
    space = GenomeSpace(spread_terminals=True)
    assert GenomeSpace.from_json(space.to_json()) == space
    assert "spread_terminals" not in GenomeSpace().to_json()  # earlier runs' records unchanged
    drawn = {template_genes(random_template(random.Random(seed), space)).input_a for seed in range(200)}
    assert drawn & set(SPREAD_NAMES) and not {template_genes(random_template(random.Random(s))).input_a
                                              for s in range(200)} & set(SPREAD_NAMES)
    assert {t.name for t in free_set(GenomeSpace("free", spread_terminals=True)).terminals[
        parse_genome(TEMPLATE_SPREAD)[-1].ret]} >= set(SPREAD_NAMES)
    assert not {t.name for ts in free_set(GenomeSpace("free")).terminals.values() for t in ts} & set(SPREAD_NAMES)


#: A genome reading the spread entries that stays finite on any CPU: ZICO_LIKE divides by S1g, whose smallest
#: stored float16 values are 0 on some torch kernels (ATEN_CPU_CAPABILITY=default), which makes it invalid there.
SPREAD_READER = ("block_sum(element_wise_sum(element_wise_log(frobenius_norm(element_wise_product("
                 "element_wise_abs(F1g), S1g))), element_wise_log(frobenius_norm(element_wise_product("
                 "element_wise_abs(F3g), S3g)))))")


def test_the_scorer_loads_the_extra_entries_a_genome_reads(af_small, small_spec, session_cache):
    archs = list(af_small.archs[:3])
    scorer = GenomeScorer(parse_genome(SPREAD_READER))
    plan = StatsPlan(small_spec, (0,), {"c100_kd": 100})
    scorer.prepare(archs, session_cache, plan)
    assert all(session_cache.contains(StatsRequest(a, small_spec, 0, 100, ("spread",))) for a in archs)
    results = scorer.raw_values(archs, small_spec, 0, 100, session_cache)
    with torch_threads(1):  # as the scorer: reductions sum in one order
        expected = [score_architecture(scorer.tree, session_cache.get(StatsRequest(a, small_spec, 0, 100, ("spread",))),
                                       terminal_values(a)) for a in archs]
    assert [r.raw for r in results] == expected and all(np.isfinite(expected))
    fresh = scorer.raw_values(archs, small_spec, 0, 100, session_cache, keep_statistics=False)
    np.testing.assert_allclose([r.raw for r in fresh], expected, rtol=1e-2)


def test_formulas_with_spread_terminals_simplify_and_are_checked(af_small):
    from autoprox.reports.simplify import readable_formula
    from autoprox.reports.formula_check import statistics_for_check

    check = statistics_for_check(space="autoformer", count=2, extras=("spread",))
    formula = readable_formula(TEMPLATE_SPREAD, check)
    assert "sd_H_mlp" in formula.text and "sd_G_proj" in formula.text
    assert formula.status in ("simplified", "original (not smaller)"), formula.note
    assert r"S^{H,\mathrm{mlp}}_{l}" in formula.latex


def test_an_exported_spread_proxy_scores_as_the_engine_on_a_real_model(tiny, tmp_path):
    from autoprox.reports.export import export_source, write_export
    from autoprox.reports.simplify import readable_formula

    arch, model, images, labels = tiny
    path = write_export(tmp_path / "zico_like.py", export_source(ZICO_LIKE, readable_formula(ZICO_LIKE, None,
                                                                                              simplify=False)))
    assert "spread=True" in path.read_text() and "sd_G_qkv" in path.read_text()
    spec = importlib.util.spec_from_file_location("zico_like_export", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with torch_threads(1):
        exported = module.score(model, images, labels, train=True)
    engine = score_architecture(parse_genome(ZICO_LIKE), compute_statistics(arch, InputSpec(batch_size=3), 0, 100,
                                                                            spread=True))
    assert exported == pytest.approx(engine, rel=1e-6)


def test_a_search_with_spread_terminals_runs_on_a_small_benchmark(af_small_file, session_cache, tmp_path):
    from autoprox.search.engine import run_search
    from autoprox.search.evolution import EvolutionConfig
    from autoprox.search.settings import SearchSettings

    settings = SearchSettings(
        bench=str(af_small_file), batch_size=2, cache_dir=str(session_cache.root), workers=1, search_fraction=0.75,
        evolution=EvolutionConfig(population_size=6, iterations=4, retry_cap=4, top_k=2, seed=5),
        genome=GenomeSpace(spread_terminals=True).to_json(), seed_proxies=(TEMPLATE_SPREAD,))
    report = run_search(settings, tmp_path / "run", quiet=True)
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["settings"]["genome"]["spread_terminals"] is True and config["stats"]["extras"] == ["spread"]
    genomes = [json.loads(line)["genome"] for line in (tmp_path / "run" / "evaluations.jsonl").read_text().splitlines()
               if "genome" in json.loads(line)]
    assert any(set(SPREAD_NAMES) & {n.name for n in parse_genome(g)} for g in genomes)
    assert np.isfinite(report["search"]["jcm"]) and np.isfinite(report["test"]["jcm"])  # the test split scored too


def test_a_layer_fed_flattened_samples_is_refused_in_one_line():
    from autoprox.networks.runtime import NoTransformerBlocks, collect

    class Flat(torch.nn.Module):
        """A block with the timm names whose qkv sees (batch x tokens) rows, not samples first."""

        def __init__(self):
            super().__init__()
            self.attn = torch.nn.Module()
            self.attn.qkv, self.attn.proj = torch.nn.Linear(4, 12), torch.nn.Linear(4, 4)
            self.mlp = torch.nn.Module()
            self.mlp.fc1, self.mlp.act, self.mlp.fc2 = torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.Linear(8, 4)
            self.head = torch.nn.Linear(4, 3)

        def forward(self, x):
            rows = self.attn.qkv(x.reshape(-1, 4))[:, :4].reshape(x.shape)
            x = x + self.attn.proj(rows)
            x = x + self.mlp.fc2(self.mlp.act(self.mlp.fc1(x)))
            return self.head(x.mean(dim=1))

    torch.manual_seed(0)
    images, labels = torch.randn(2, 5, 4), torch.tensor([0, 2])
    assert set(collect(Flat(), images, labels)[0][0]) == set(STAT_NAMES)  # the eight are read as ever
    with pytest.raises(NoTransformerBlocks, match=r"called on an input of shape \(10, 4\), not 2 samples first"):
        collect(Flat(), images, labels, spread=True)


def test_show_adds_the_spread_legend_only_where_a_shown_formula_reads_a_spread_statistic(tmp_path, capsys):
    """A committed fold search with spread terminals (its best proxy reads S4g): ``show`` names the
    spread symbols it prints; a run of the eight statistics alone keeps the plain legend."""
    from autoprox.cli.main import main
    from autoprox.reports.simplify import LEGEND, SPREAD_LEGEND
    from tests.conftest import unpacked_protocol

    for name, spread in [("autoformer-gene-spread-patience30", True), ("autoformer-gene-patience30", False)]:
        copy = unpacked_protocol(name, tmp_path) / "repeat-0" / "fold-0"
        assert main(["show", str(copy), "--top", "3"]) == 0
        out = capsys.readouterr().out
        assert LEGEND in out
        assert (SPREAD_LEGEND in out) is spread
