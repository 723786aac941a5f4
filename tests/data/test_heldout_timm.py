"""examples/timm_imagenet_heldout.csv and benchmarks/heldout_timm.py: the held-out timm check (issue #23).

The file must stay what its header says (49 models autoprox accepts, none of the twelve of
examples/timm_imagenet.csv), and the script's paired bootstrap must compare each proxy with
the parameter count on the same resamples. No proxy is scored here (that takes an hour)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("timm")

from autoprox.data.benchmark import load_benchmark
from tests.conftest import REPO



def _script():
    spec = importlib.util.spec_from_file_location("heldout_timm", REPO / "benchmarks" / "heldout_timm.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_heldout_file_is_49_accepted_timm_models_none_of_the_twelve(tmp_path):
    script = _script()
    heldout, twelve = load_benchmark(str(script.HELDOUT)), load_benchmark(str(script.TWELVE))
    names = [arch.model for arch in heldout.archs]
    assert heldout.space == "timm" and len(names) == len(set(names)) == 49
    assert not set(names) & {arch.model for arch in twelve.archs}
    accuracy = heldout.accuracies["imagenet"]
    assert np.all((accuracy > 70) & (accuracy < 90))
    assert sum(name.startswith(script.STAGED) for name in names) == 17  # the kinds the header names
    union = load_benchmark(str(script.union_file(tmp_path)))
    assert [arch.model for arch in union.archs] == [arch.model for arch in twelve.archs] + names


def test_the_paired_bootstrap_compares_on_the_same_resamples():
    script = _script()
    rng = np.random.default_rng(3)
    accuracy = rng.normal(size=30)
    scores = {"params": accuracy + rng.normal(size=30), "same": None, "exact": accuracy.copy()}
    scores["same"] = scores["params"] * 2.0 + 1.0  # a monotone copy: the same Kendall on every resample
    result = script.bootstrap(scores, accuracy, samples=200, seed=0)
    assert result["same"]["difference"] == result["same"]["low"] == result["same"]["high"] == 0.0
    assert result["same"]["ahead"] == 0.0 and result["same"]["samples"] == 200
    assert result["exact"]["low"] > 0 and result["exact"]["ahead"] == 1.0
    table = script.figures([f"m{i}" for i in range(30)], accuracy, scores, np.ones(30, bool), 50, 0)
    assert table["proxies"]["exact"]["kendall"] == pytest.approx(1.0)
    text = script.markdown("synthetic", table)
    assert "| `exact` | 1.000 | 1.000 | 30 |" in text and "| `same` | " in text and "ranks as `params`" in text
