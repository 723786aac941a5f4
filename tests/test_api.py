"""The Python API: ProxySearch fits a run, reads it back with from_run, and its proxies score models."""

from __future__ import annotations

import json
import math

import pytest
import torch

from autoprox.api import FoundProxy, ProxySearch
from autoprox.core.errors import ConfigError
from autoprox.genome.tree import score_architecture
from autoprox.networks.models import build_model
from autoprox.networks.statistics import (
    InputSpec,
    compute_statistics,
    derived_seed,
    make_batch,
)
from autoprox.proxies.proxy import AUTOPROX_A
from autoprox.reports.simplify import aggregate_text
from autoprox.search.engine import run_search
from tests.conftest import REPO


@pytest.fixture(scope="module")
def fitted(af_small_file, session_cache, tmp_path_factory):
    out = tmp_path_factory.mktemp("api") / "run"
    search = ProxySearch(bench=str(af_small_file), targets=("c100_kd", "flower_kd"), iterations=3, population=4,
                         out=str(out), batch_size=2, cache_dir=str(session_cache.root), workers=1,
                         search_fraction=0.75, retry_cap=3)
    return search.fit()


def test_fit_gives_the_best_proxy_and_the_hall_of_fame(fitted):
    assert fitted.run_dir_.joinpath("best.json").is_file()
    assert fitted.best_.genome == fitted.report_["genome"]
    assert math.isfinite(fitted.best_.jcm) and fitted.best_.test_jcm == fitted.report_["test"]["jcm"]
    assert fitted.hall_of_fame_ and fitted.hall_of_fame_[0].jcm >= fitted.hall_of_fame_[-1].jcm
    top = fitted.hall_of_fame_[0]
    # the readable text is the block expression inside the genome's aggregation, as `show` prints it
    aggregation = top.genome.split("(", 1)[0]
    assert top.text == aggregate_text(aggregation, top.sympy) or top.formula.outer
    assert top.text.startswith("1/L * sum_l ( " if aggregation == "block_mean" else "")
    assert isinstance(top.latex, str) and top.latex
    assert top.sympy.free_symbols  # the per-block expression reads statistics


def test_from_run_reads_the_same_search(fitted):
    again = ProxySearch.from_run(fitted.run_dir_)
    assert again.best_ == fitted.best_
    assert [p.genome for p in again.hall_of_fame_] == [p.genome for p in fitted.hall_of_fame_]
    recorded = fitted.run_dir_.joinpath("config.json").read_text()
    assert again.search_settings().to_json() == json.loads(recorded)["settings"]


def test_fit_is_the_same_search_as_the_engine(fitted, tmp_path):
    """The API adds nothing of its own: run_search with its settings makes the same proxy."""
    report = run_search(fitted.search_settings(), tmp_path / "engine", quiet=True)
    assert report["genome"] == fitted.best_.genome
    assert report["test"]["jcm"] == fitted.best_.test_jcm


def test_a_found_proxy_scores_a_model_as_the_engine_scores_its_architecture(af_small):
    arch = af_small.archs[0]
    spec, seed = InputSpec("gaussian", batch_size=2), 0
    expected = score_architecture(FoundProxy(AUTOPROX_A).tree, compute_statistics(arch, spec, seed, 100))
    model = build_model(arch, num_classes=100, seed=derived_seed(seed, "model"))
    model.train()
    images, labels = make_batch(spec, 100, seed)
    torch.set_num_threads(1)
    assert FoundProxy(AUTOPROX_A).score(model, images, labels) == pytest.approx(expected, rel=1e-6)


def test_torch_source_is_a_standalone_module():
    source = FoundProxy(AUTOPROX_A).torch_source()
    assert "def score(" in source and "import autoprox" not in source


def test_bad_settings_are_one_line_errors():
    with pytest.raises(ConfigError, match="give space"):
        ProxySearch().search_settings()
    with pytest.raises(ConfigError, match="unknown search setting"):
        ProxySearch(space="pit", colour="blue").search_settings()


def test_a_found_proxy_with_architecture_terminals_reads_them_from_the_model(af_small):
    """runs/autoformer-best reads architecture terminals: the model's own descriptors give the engine's score."""
    from autoprox.spaces.descriptors import terminal_values

    genome = json.loads((REPO / "runs" / "autoformer-best" / "best.json").read_text())["genome"]
    proxy = FoundProxy(genome)
    assert any(node.name.startswith("A_") for node in proxy.tree)
    arch = af_small.archs[1]
    spec, seed = InputSpec("gaussian", batch_size=2), 0
    expected = score_architecture(proxy.tree, compute_statistics(arch, spec, seed, 100), terminal_values(arch))
    model = build_model(arch, num_classes=100, seed=derived_seed(seed, "model"))
    images, labels = make_batch(spec, 100, seed)
    torch.set_num_threads(1)
    assert proxy.score(model, images, labels) == pytest.approx(expected, rel=1e-5)
