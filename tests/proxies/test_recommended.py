"""The recommended-proxy manifest: finding it, checking it, resolving ``recommended:`` names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autoprox.core.errors import ProxyError
from autoprox.genome.rank_formula import RankFormula
from tests.conftest import REPO
from autoprox.proxies.recommended import (
    ENVIRONMENT,
    FORMAT,
    find_manifest,
    load_manifest,
    recommended_names,
    resolve_recommended,
)
from tests.commands import run_cli


def write_manifest(folder: Path, spaces: dict) -> Path:
    path = folder / "recommended.json"
    path.write_text(json.dumps({"format": FORMAT, "spaces": spaces}), encoding="utf-8")
    return path


@pytest.fixture
def manifest(tmp_path: Path) -> Path:
    (tmp_path / "af").mkdir()
    (tmp_path / "af" / "joint.json").write_text("{}", encoding="utf-8")
    (tmp_path / "af" / "c100.json").write_text("{}", encoding="utf-8")
    return write_manifest(tmp_path, {"autoformer": {"c100_kd": {"file": "af/c100.json"},
                                                    "joint": {"file": "af/joint.json", "run": "x"}}})


def test_names_resolve_to_files_relative_to_the_manifest(manifest: Path):
    path, entry = resolve_recommended("recommended:autoformer/c100_kd", manifest)
    assert path == (manifest.parent / "af" / "c100.json").resolve()
    joint, entry = resolve_recommended("recommended:autoformer", manifest)
    assert joint.name == "joint.json" and entry["run"] == "x"
    assert recommended_names(load_manifest(manifest)) == ["recommended:autoformer/joint",
                                                          "recommended:autoformer/c100_kd"]


def test_unknown_names_list_the_known_ones(manifest: Path):
    with pytest.raises(ProxyError, match="recommended:autoformer/joint"):
        resolve_recommended("recommended:autoformer/flower_kd", manifest)
    with pytest.raises(ProxyError, match="unknown recommended proxy 'recommended:pit/joint'"):
        resolve_recommended("recommended:pit/joint", manifest)


def test_a_missing_file_is_named(manifest: Path):
    (manifest.parent / "af" / "c100.json").unlink()
    with pytest.raises(ProxyError, match="af/c100.json, which is not a file"):
        resolve_recommended("recommended:autoformer/c100_kd", manifest)


@pytest.mark.parametrize("content, problem", [
    ("not json", "not a readable"),
    (json.dumps({"format": "other", "spaces": {}}), "format"),
    (json.dumps({"format": FORMAT, "spaces": {}}), "'spaces' must be a non-empty object"),
    (json.dumps({"format": FORMAT, "spaces": {"a": {"joint": {"file": 3}}}}), "spaces.a.joint needs a 'file'"),
])
def test_bad_manifests_are_one_line(tmp_path: Path, content: str, problem: str):
    path = tmp_path / "recommended.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ProxyError, match=problem):
        load_manifest(path)


def test_the_environment_variable_wins_and_must_exist(manifest: Path, tmp_path: Path):
    assert find_manifest({ENVIRONMENT: str(manifest)}) == manifest
    with pytest.raises(ProxyError, match="no such manifest"):
        find_manifest({ENVIRONMENT: str(tmp_path / "missing.json")})


def test_the_packaged_manifest_is_found_from_any_folder(tmp_path: Path, monkeypatch):
    """No variable set: the manifest shipped in the package, whatever the working directory holds."""
    from autoprox.core.resources import packaged_manifest

    (tmp_path / "runs").mkdir()
    write_manifest(tmp_path / "runs", {"s": {"joint": {"file": "j.json"}}})
    monkeypatch.chdir(tmp_path)
    assert find_manifest({}) == packaged_manifest()
    assert packaged_manifest().is_file()


def test_the_committed_manifest_names_a_proxy_for_every_target_of_both_spaces():
    """The packaged manifest: a joint entry and one per target for AutoFormer and PiT, each resolving to a
    proxy that scores that target (a joint ensemble cut to the target, or the per-target ensemble)."""
    from autoprox.proxies.proxy import resolve_proxy

    from autoprox.core.resources import packaged_manifest

    manifest = packaged_manifest()
    data = load_manifest(manifest)
    expected = {"autoformer": {"joint", "c100_kd", "flower_kd", "chaoyang_kd", "imagenet_super"},
                "pit": {"joint", "c100_kd", "flower_kd", "chaoyang_kd"},
                # the label-free proxy (one for every shared target) and the best formula searched on both spaces
                "any": {"joint", "c100_kd", "flower_kd", "chaoyang_kd", "c100_base", "flower_base", "chaoyang_base",
                        "searched"}}
    assert {space: set(entries) for space, entries in data["spaces"].items()} == expected
    for name in recommended_names(data):
        path, entry = resolve_recommended(name, manifest)
        proxy = resolve_proxy(str(path))
        if name.startswith("recommended:any/"):  # a rank formula the N-space protocols chose, scored on any space
            assert proxy.formula is not None and proxy.missing == "neutral"
            assert all((REPO / p / "protocol.json").is_file() for p in entry["protocols"])
            if name == "recommended:any/searched":  # the search's formula as it is
                continue
            lrsum_all = "lrsum(params, flops, snip, grasp, synflow, grad_norm, fisher, plain, nwot, jacov, l2_norm, zen, epe_nas)"
            root = proxy.formula.root
            assert root.op == "first"  # the choice, then the fallbacks for a space lacking its columns
            alternatives = [str(RankFormula(child)) for child in root.children]
            # then single proxies (the size counts among them), then the catch-all log-rank sum
            assert alternatives[-1] == lrsum_all and {"r(params)", "r(flops)"} <= set(alternatives)
            assert all(a.startswith("r(") for a in alternatives[1:-1])
            if entry["selection"].startswith("baseline "):  # a fixed label-free proxy: r(X), or the log-rank sum
                assert alternatives[0] in (f"r({entry['selection'].split(' ', 1)[1]})", lrsum_all)
            continue
        target = entry.get("target")
        if target is None:
            assert set(proxy.targets) == expected[name.split(":")[1].split("/")[0]] - {"joint"}
        else:
            assert proxy.members_for(target)


def test_a_recommended_proxy_on_its_own_benchmark_is_called_in_sample(tmp_path, pit_small):
    from autoprox.cli.rank import in_sample_note
    from autoprox.data.benchmark import load_benchmark, write_benchmark_jsonl
    from autoprox.proxies.proxy import resolve_proxy
    from tests.conftest import PIT_FILE

    proxy = resolve_proxy("recommended:pit/flower_kd")
    note = in_sample_note(proxy, load_benchmark(PIT_FILE))
    assert note.startswith("in-sample: recommended:pit/flower_kd was chosen by the evaluation protocol on this very "
                           "benchmark's architectures")
    other = tmp_path / "pit12.jsonl"
    write_benchmark_jsonl(pit_small, other)
    assert in_sample_note(proxy, load_benchmark(other)) is None
    assert in_sample_note(resolve_proxy("params"), load_benchmark(PIT_FILE)) is None


@pytest.mark.parametrize("space", ["autoformer", "pit"])
def test_the_searched_proxy_for_any_space_is_called_in_sample_on_the_spaces_it_saw(capsys, monkeypatch, space):
    """Issue 32: ``rank --proxy recommended:any/searched`` printed no note on AutoFormer or PiT, though its search
    saw every architecture of both (a genome proxy is named by its genome, so the name given is what tells)."""
    import autoprox.cli.rank as rank
    from autoprox.core.errors import ConfigError

    def stop(*args, **kwargs):  # the note is printed before anything is scored: stop there
        raise ConfigError("stopped before scoring")

    monkeypatch.setattr(rank, "evaluation_context", stop)
    code, _, err = run_cli(capsys, "rank", "--proxy", "recommended:any/searched", "--space", space)
    assert code == 2 and err.strip().splitlines()[-1] == "autoprox: error: stopped before scoring"
    assert ("in-sample: recommended:any/searched was searched on every architecture of nb201, flexibert, autoformer, "
            "pit, timm, this benchmark's included, so these figures are not an estimate on architectures it never saw") in err
    code, _, err = run_cli(capsys, "rank", "--proxy", "recommended:any/joint", "--space", space)  # the parameter count
    assert code == 2 and "in-sample" not in err


def test_score_names_the_target_whose_scores_it_writes_not_the_benchmarks_first(tmp_path, capsys, pit_small):
    """adv5 F-weak-2: ``score --proxy recommended:pit/c100_kd`` noted "scores of c100_base's statistics (c100_base
    classes)", read as scored for the wrong target (the note read the ensemble's plan keyed by target name)."""
    import csv

    from autoprox.data.benchmark import write_benchmark_jsonl

    bench = tmp_path / "pit3.jsonl"
    write_benchmark_jsonl(pit_small.subset(range(3)), bench)
    common = ["--bench", bench, "--cache-dir", tmp_path / "cache"]
    code, _, err = run_cli(capsys, "score", "--proxy", "recommended:pit/c100_kd", *common, "--out", tmp_path / "a.csv")
    assert code == 0 and "c100_base" not in err and "picks another" not in err  # one joint proxy: any target's scores
    code, _, err = run_cli(capsys, "score", "--proxy", "recommended:pit", *common, "--out", tmp_path / "b.csv")
    assert code == 0 and "scores for c100_kd (its 100-class statistics); --targets picks another target" in err
    code, _, err = run_cli(capsys, "score", "--proxy", "recommended:pit", *common, "--targets", "flower_kd",
                           "--out", tmp_path / "c.csv")
    assert code == 0 and "c100_base" not in err

    def scores(name):
        return [row["score"] for row in csv.DictReader((tmp_path / name).open())]

    assert scores("a.csv") == scores("b.csv")  # recommended:pit's c100_kd member is recommended:pit/c100_kd
