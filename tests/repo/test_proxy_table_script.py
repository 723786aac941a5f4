"""benchmarks/proxy_tables.py and the committed proxy tables of autoprox/resources/proxy-tables.

The script is run on two PiT architectures with two cheap proxies (the parameter count and the
zoo's l2_norm) into a temporary folder and cache, and resumed; the committed tables are checked
against the benchmark they come from, and one zoo value of each is computed again."""

from __future__ import annotations

import csv
import importlib.util
import json
import math
from pathlib import Path

import pytest

from autoprox.data.benchmark import load_benchmark
from autoprox.proxies import zoo_scores
from autoprox.networks.statistics import InputSpec
from autoprox.spaces.architectures import count_params, parse_arch
from tests.conftest import REPO

TABLES = REPO / "autoprox" / "resources" / "proxy-tables"


def _script():
    spec = importlib.util.spec_from_file_location("proxy_tables", REPO / "benchmarks" / "proxy_tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_cells_are_repr_floats_or_empty():
    script = _script()
    assert script.cell(0.1 + 0.2) == "0.30000000000000004" and script.cell(72.5) == "72.5"
    assert script.cell(float("nan")) == script.cell(None) == ""
    assert script.PROXIES == ("params", "flops", "snip", "grasp", "synflow", "grad_norm", "fisher", "plain", "nwot",
                              "jacov", "l2_norm", "zen", "epe_nas")


def test_a_table_is_written_and_resumed(tmp_path, monkeypatch, capsys):
    script = _script()
    monkeypatch.setenv("AUTOPROX_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "tables"
    columns = ["--proxies", "l2_norm,params"]  # in the tables' order whatever the order given
    assert script.main(["--space", "pit", "--limit", "2", "--out", str(out), *columns]) == 0
    rows = _rows(out / "pit.csv")
    bench = load_benchmark(REPO / "autoprox" / "resources" / "vit-bench-101" / "gt_pit.pth")
    assert list(rows[0]) == ["id", *bench.targets, "params", "l2_norm"] and len(rows) == 2
    arch = parse_arch(json.loads(rows[1]["id"]), "pit")
    assert arch == bench.archs[1] and float(rows[1]["c100_kd"]) == pytest.approx(bench.accuracies["c100_kd"][1])
    assert float(rows[1]["params"]) == pytest.approx(count_params(arch) / 1e6, rel=1e-12)
    expected = zoo_scores.raw_value("l2_norm", arch, InputSpec(), 0, 100)
    assert float(rows[1]["l2_norm"]) == pytest.approx(expected, rel=1e-12)
    sidecar = json.loads((out / "pit.json").read_text())
    assert sidecar["complete"] and sidecar["rows"] == 2 and sidecar["seed"] == 0 and sidecar["classes"] == 100
    assert sidecar["input"]["batch_size"] == 8 and sidecar["seconds"]["l2_norm"]["architectures"] == 2
    assert sidecar["proxies"] == ["params", "l2_norm"] and sidecar["command"].endswith("--proxies params,l2_norm")
    capsys.readouterr()
    assert script.main(["--space", "pit", "--limit", "3", "--out", str(out), *columns]) == 0  # resumed: 2 kept
    assert "2 kept" in capsys.readouterr().err
    again = _rows(out / "pit.csv")
    assert again[:2] == rows and len(again) == 3
    assert json.loads((out / "pit.json").read_text())["seconds"]["l2_norm"]["architectures"] == 3


@pytest.mark.parametrize("name, space, count", [("autoformer", "autoformer", 100), ("pit", "pit", 100)])
def test_the_committed_tables_hold_the_benchmark_and_rank_s_values(name, space, count):
    path = TABLES / f"{name}.csv"
    if not path.is_file():
        pytest.skip(f"{path} is not computed yet")
    script = _script()
    bench = load_benchmark(REPO / "autoprox" / "resources" / "vit-bench-101" / f"gt_{space}.pth")
    rows = _rows(path)
    sidecar = json.loads((TABLES / f"{name}.json").read_text())
    assert sidecar["proxies"] == [p for p in script.PROXIES if p in sidecar["proxies"]]  # the columns computed
    assert list(rows[0]) == ["id", *bench.targets, *sidecar["proxies"]] and len(rows) == count
    assert sidecar["complete"] and sidecar["rows"] == count
    for index, row in enumerate(rows):
        arch = parse_arch(json.loads(row["id"]), space)
        assert arch == bench.archs[index]
        for target in bench.targets:
            value = bench.accuracies[target][index]
            assert (row[target] == "") if math.isnan(value) else float(row[target]) == pytest.approx(value)
        assert float(row["params"]) == pytest.approx(count_params(arch) / 1e6, rel=1e-12)
    empty = {p: sum(row[p] == "" for row in rows) for p in sidecar["proxies"]}
    assert {p: n for p, n in empty.items() if n} == {p: v["count"] for p, v in sidecar["empty_cells"].items()}
    assert "l2_norm" in sidecar["proxies"]
    smallest = min(range(count), key=lambda i: count_params(bench.archs[i]))  # one zoo value computed again
    expected = zoo_scores.raw_value("l2_norm", bench.archs[smallest], InputSpec(), 0, 100)
    assert float(rows[smallest]["l2_norm"]) == pytest.approx(expected, rel=1e-9)


def test_the_committed_timm_table_is_in_the_held_out_file_s_order():
    path = TABLES / "timm-imagenet.csv"
    if not path.is_file():
        pytest.skip(f"{path} is not computed yet")
    script = _script()
    bench = load_benchmark(REPO / "examples" / "timm_imagenet_heldout.csv")
    rows = _rows(path)
    sidecar = json.loads((TABLES / "timm-imagenet.json").read_text())
    assert list(rows[0]) == ["id", "imagenet", *sidecar["proxies"]]
    assert sidecar["proxies"] == [p for p in script.PROXIES if p in sidecar["proxies"]]
    names = [arch.model for arch in bench.archs]
    assert [row["id"] for row in rows] == [n for n in names if n in {row["id"] for row in rows}]  # finished rows, in order
    assert sidecar["rows"] == len(rows) and sidecar["complete"] == (len(rows) == len(names) == 49)
    for row in rows:
        index = names.index(row["id"])
        assert float(row["imagenet"]) == pytest.approx(bench.accuracies["imagenet"][index])


def test_a_column_added_later_is_the_only_one_computed(tmp_path, monkeypatch, capsys):
    script = _script()
    monkeypatch.setenv("AUTOPROX_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "tables"
    assert script.main(["--space", "pit", "--limit", "2", "--out", str(out), "--proxies", "params"]) == 0
    first = _rows(out / "pit.csv")
    marked = out / "pit.csv"  # a kept cell is read, not computed again: mark one
    marked.write_text(marked.read_text().replace(first[0]["params"], "123.5", 1))
    sidecar = json.loads((out / "pit.json").read_text())
    sidecar["left_out_as_empty"] = {"epe_nas": {"count": 2, "first_reason": "kept from the earlier sidecar"}}
    (out / "pit.json").write_text(json.dumps(sidecar))
    capsys.readouterr()
    both = ["--space", "pit", "--limit", "2", "--out", str(out), "--proxies", "params,l2_norm"]
    assert script.main([*both, "--minutes", "0"]) == 0  # stopped before any architecture: nothing is lost
    stopped = _rows(out / "pit.csv")
    assert [r["params"] for r in stopped] == ["123.5", first[1]["params"]] and [r["l2_norm"] for r in stopped] == ["", ""]
    assert json.loads((out / "pit.json").read_text())["pending_cells"] == {r["id"]: ["l2_norm"] for r in stopped}
    assert script.main(both) == 0
    rows = _rows(out / "pit.csv")
    assert list(rows[0])[-2:] == ["params", "l2_norm"] and len(rows) == 2
    assert rows[0]["params"] == "123.5" and rows[1]["params"] == first[1]["params"]
    arch = parse_arch(json.loads(rows[0]["id"]), "pit")
    expected = zoo_scores.raw_value("l2_norm", arch, InputSpec(), 0, 100)
    assert float(rows[0]["l2_norm"]) == pytest.approx(expected, rel=1e-12)
    again = json.loads((out / "pit.json").read_text())
    assert again["seconds"]["l2_norm"]["architectures"] == 2 and again["seconds"]["params"]["architectures"] == 2
    assert again["left_out_as_empty"]["epe_nas"]["count"] == 2 and "pending_cells" not in again and again["complete"]
