"""timm models as architectures: refusal with the reason, counts, statistics, zoo proxies, and
the commands on a small benchmark of timm models (needs the timm extra: scripts/install_timm.sh)."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest
import torch

from tests.conftest import REPO

pytestmark = pytest.mark.slow

timm = pytest.importorskip("timm")

from autoprox.cli.main import main as cli
from autoprox.core.errors import ArchitectureError, BenchmarkError
from autoprox.data.benchmark import load_benchmark
from autoprox.networks.models import build_model, transformer_blocks
from autoprox.networks.statistics import compute_statistics
from autoprox.networks.timm_models import TimmArch, count_by_hooks
from autoprox.proxies.zoo_scores import raw_value
from autoprox.spaces.architectures import (
    arch_key,
    count_macs,
    count_params,
    parse_arch,
    sample_arch,
    transformer_widths,
)

TIMM_BENCH = REPO / "examples" / "timm_imagenet.csv"
SMALL = ["deit_tiny_patch16_224", "vit_tiny_patch16_224", "pit_ti_224", "pit_ti_distilled_224",
         "deit_tiny_distilled_patch16_224"]


def _arch(name: str) -> TimmArch:
    return parse_arch({"model": f"timm:{name}"})


def test_model_entries_parse_and_count():
    deit, pit = _arch("deit_tiny_patch16_224"), _arch("pit_ti_224")
    assert deit.space == "timm" and arch_key(deit) == '{"model":"timm:deit_tiny_patch16_224"}'
    for arch in (deit, pit):
        for classes in (100, 1000):
            model = build_model(arch, num_classes=classes)
            assert count_params(arch, classes) == sum(p.numel() for p in model.parameters())
    assert count_params(deit, 1000) == 5_717_416  # timm's deit_tiny (5.72M in its results table)
    assert transformer_widths(deit) == [(192, 3, 768)] * 12
    assert [w for w, _, _ in transformer_widths(pit)] == [64] * 2 + [128] * 6 + [256] * 4
    assert 1.2e9 < count_macs(deit) < 1.3e9


def test_refused_models_say_why():
    cases = {
        "convit_tiny": "blocks.0-9: attn is GPSA without a Linear qkv",
        "resnet18": "has no transformer blocks",
        "vit_base_patch16_384": "takes 384x384 input",
        "deit_tiny_patch16_224.fb_in1k": "without its pretrained tag",
        "no_such_model_xyz": "has no such model",
    }
    for name, reason in cases.items():
        with pytest.raises(ArchitectureError) as info:
            _arch(name)
        assert reason in str(info.value) and str(info.value).startswith(f"timm arch: timm:{name}")
    for config, reason in [({"model": "deit_tiny_patch16_224"}, "must look like 'timm:"),
                           ({"model": "timm:deit_tiny_patch16_224", "depth": 12}, "unknown key 'depth'")]:
        with pytest.raises(ArchitectureError, match=reason):
            parse_arch(config)
    with pytest.raises(ArchitectureError, match="cannot be sampled"):
        import random

        sample_arch("timm", random.Random(0))


def test_hook_counts_follow_the_builtin_convention(af_small, pit_small):
    """The meta-device hook counter gives count_macs' numbers on the built-in spaces' networks."""
    for arch in (af_small.archs[0], af_small.archs[-1], pit_small.archs[0], pit_small.archs[-1]):
        with torch.device("meta"):
            model = build_model(arch)
        info = count_by_hooks(model, torch.empty(1, 3, 224, 224, device="meta"))
        assert (info.params, info.macs, list(info.blocks)) == (count_params(arch), count_macs(arch),
                                                               transformer_widths(arch))


def test_seeded_builds_statistics_and_zoo_proxies(small_spec):
    arch = _arch("pit_ti_224")
    first, again = build_model(arch, seed=3), build_model(arch, seed=3)
    other = build_model(arch, seed=4)
    weights = [p for p in first.parameters()]
    assert all(torch.equal(a, b) for a, b in zip(weights, again.parameters()))
    assert not all(torch.equal(a, b) for a, b in zip(weights, other.parameters()))
    names = [n for n, m in first.named_modules() if m in transformer_blocks(first)]
    assert names[0] == "transformers.0.blocks.0" and len(names) == 12
    stats = compute_statistics(arch, small_spec, 0, 100)
    assert len(stats) == 12 and stats[0]["F1"].shape == (192, 64) and stats[-1]["F4"].shape == (50, 1024)
    deit = _arch("deit_tiny_patch16_224")
    for proxy in ("nwot", "dss", "snip", "zen"):  # nwot, dss and zen find timm's blocks by their names
        value = raw_value(proxy, deit, small_spec, 0, 100)
        assert isinstance(value, float) and math.isfinite(value)


def test_the_committed_timm_benchmark_is_valid():
    bench = load_benchmark(TIMM_BENCH)
    assert bench.space == "timm" and len(bench) == 12 and bench.targets == ["imagenet"]
    assert bench.accuracies["imagenet"][0] == 72.172  # deit_tiny_patch16_224.fb_in1k
    header = TIMM_BENCH.read_text().split("\nmodel,")[0]
    assert "results/results-imagenet.csv" in header and "pytorch-image-models" in header


def test_a_refused_model_in_a_table_names_its_line(tmp_path):
    table = tmp_path / "t.csv"
    table.write_text("model,imagenet_acc\ntimm:deit_tiny_patch16_224,72.2\ntimm:convit_tiny,73.1\n")
    with pytest.raises(BenchmarkError, match="line 3: timm arch: timm:convit_tiny: refused"):
        load_benchmark(table)


def test_commands_on_a_small_timm_benchmark(tmp_path, capsys):
    rows = {line.split(",")[0]: line for line in TIMM_BENCH.read_text().splitlines() if line.startswith("timm:")}
    table = tmp_path / "timm5.csv"
    table.write_text("# five of examples/timm_imagenet.csv\nmodel,imagenet_acc\n"
                     + "\n".join(rows[f"timm:{name}"] for name in SMALL) + "\n")
    stats = ["--batch-size", "2", "--workers", "1", "--cache-dir", str(tmp_path / "cache")]
    run = tmp_path / "run"
    assert cli(["search", "--bench", str(table), "--out", str(run), "--iterations", "2", "--population", "4",
                "--quiet", *stats]) == 0
    assert json.loads((run / "config.json").read_text())["space"] == "timm"
    assert cli(["show", str(run), "--top", "2", "--no-simplify"]) == 0
    capsys.readouterr()
    assert cli(["rank", "--proxy", str(run / "best.json"), "--bench", str(table), "--split", "all", "--json", *stats]) == 0
    assert set(json.loads(capsys.readouterr().out)) == {"imagenet"}
    assert cli(["vit-search", "--on-bench", str(table), "--proxy", "params,nwot", "--json", *stats]) == 0
    picks = json.loads(capsys.readouterr().out)
    assert [p["proxy"] for p in picks] == ["params", "nwot"] and all(not p["error"] for p in picks)
    assert cli(["export", str(run), "--out", str(tmp_path / "proxy.py"), "--no-simplify"]) == 0
    spec = importlib.util.spec_from_file_location("exported_proxy", tmp_path / "proxy.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.manual_seed(0)  # the network and batch must not depend on what the tests before this one drew
    model = timm.create_model("deit_tiny_patch16_224", pretrained=False, num_classes=100)
    images, labels = torch.randn(2, 3, 224, 224), torch.randint(0, 100, (2,))
    assert isinstance(module.score(model, images, labels), float)


def test_without_timm_the_hint_says_how_to_install_it_in_a_package_install_and_in_a_clone(monkeypatch, capsys):
    import sys

    from autoprox.networks.timm_models import TimmSpace

    monkeypatch.setitem(sys.modules, "timm", None)  # import timm fails as where it is not installed
    assert cli(["spaces"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if "timm not installed" in line)
    assert "pip install 'autoprox[timm]'" in line and "in a clone of autoprox: bash scripts/install_timm.sh" in line
    with pytest.raises(ArchitectureError, match=r"pip install 'autoprox\[timm\]'.*in a clone"):
        TimmSpace().parse({"model": "timm:a_model_asked_for_once"})
