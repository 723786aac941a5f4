"""A user's own accuracy table: CSV benchmarks, every bad row reported, 'space' and 'model' entries."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest

from autoprox.cli.main import main as cli
from autoprox.core.errors import BenchmarkError
from autoprox.data.benchmark import load_benchmark, write_benchmark_jsonl
from autoprox.data.tables import read_csv_entries
from autoprox.spaces.architectures import arch_to_config
from autoprox.spaces.registry import REGISTRY
from tests.commands import run_cli
from tests.conftest import REPO

AF_FILE_SPACE = REPO / "examples" / "spaces" / "autoformer-ti.json"

PIT = {"base_dim": 16, "mlp_ratio": 6, "depth": [2, 8, 4], "num_heads": [2, 4, 4]}
PIT2 = {"base_dim": 24, "mlp_ratio": 2, "depth": [2, 8, 4], "num_heads": [2, 2, 2]}
PIT3 = {"base_dim": 32, "mlp_ratio": 4, "depth": [1, 4, 2], "num_heads": [2, 4, 8]}


def _write_csv(path: Path, header: list[str], rows: list[list], comments: str = "") -> Path:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        handle.write(comments)
        writer = csv.writer(handle)
        writer.writerow(header)
        for row in rows:
            writer.writerow([json.dumps(c) if isinstance(c, dict) else c for c in row])
    return path


def test_csv_reads_like_the_jsonl_it_came_from(pit_small, tmp_path):
    jsonl = tmp_path / "pit.jsonl"
    write_benchmark_jsonl(pit_small, jsonl)
    targets = pit_small.targets
    rows = [[arch_to_config(a), *("" if math.isnan(pit_small.accuracies[t][i]) else repr(float(pit_small.accuracies[t][i]))
                                  for t in targets)] for i, a in enumerate(pit_small.archs)]
    table = _write_csv(tmp_path / "pit.csv", ["arch", *(t + "_acc" for t in targets)], rows,
                       comments="# the 12 smallest PiT networks\n\n")
    from_csv, from_jsonl = load_benchmark(table), load_benchmark(jsonl)
    assert from_csv.space == from_jsonl.space == "pit" and from_csv.archs == from_jsonl.archs
    for target in targets:
        np.testing.assert_array_equal(from_csv.accuracies[target], from_jsonl.accuracies[target])
    assert from_csv.default_targets() == from_jsonl.default_targets()


def test_missing_cells_are_nan_and_comments_anywhere(tmp_path):
    table = _write_csv(tmp_path / "t.csv", ["arch", "c100_acc", "flower_acc"],
                       [[PIT, 71.5, ""], [PIT2, "", "60"], [PIT3, 70, 61]],
                       comments="# source: my own training runs\n")
    with open(table, "a", encoding="utf-8") as handle:
        handle.write("# a note after the rows\n\n")
    bench = load_benchmark(table)
    assert len(bench) == 3 and bench.targets == ["c100", "flower"]
    assert bench.accuracies["c100"][0] == 71.5 and math.isnan(bench.accuracies["c100"][1])
    assert math.isnan(bench.accuracies["flower"][0]) and bench.accuracies["flower"][1] == 60.0


def test_every_bad_row_is_reported_with_its_line(tmp_path, capsys):
    rows = [
        [PIT, "71.5"],                                    # line 3: fine
        ["{not json", "70"],                              # line 4
        [PIT, "seventy"],                                 # line 5
        [{**PIT, "base_dim": 17}, "70"],                  # line 6: not in the space
        ["", "70"],                                       # line 7: no architecture
        [PIT2, "inf"],                                    # line 8
        ["[1, 2]", "70"],                                 # line 9: JSON, not an object
    ]
    table = _write_csv(tmp_path / "bad.csv", ["arch", "c100_acc"], rows, comments="# my table\n")
    with open(table, "a", encoding="utf-8") as handle:
        handle.write('"{}",1,2\n')                        # line 10: too many cells
    with pytest.raises(BenchmarkError) as info:
        read_csv_entries(table)
    message = str(info.value)
    assert message.startswith(str(table)) and message.endswith("(7 bad rows)") and "\n" not in message
    for expected in ["line 4: arch is not JSON", "line 5: c100_acc 'seventy' is not a number",
                     "line 6: pit arch: base_dim=17 not in {16, 24, 32, 40}", "line 7: no arch or model",
                     "line 8: c100_acc 'inf' is not a finite number", "line 9: arch is not a JSON object",
                     "line 10: 3 cells, the header has 2"]:
        assert expected in message
    assert "line 3" not in message
    assert message.index("line 4") < message.index("line 6") < message.index("line 10")
    # the command line says it in one line, exit status 2, before computing anything
    assert cli(["rank", "--proxy", "params", "--bench", str(table)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and "line 4" in error and "line 10" in error


@pytest.mark.parametrize("header,message", [
    (["arch", "c100_acc", "notes"], "column 'notes' is not arch, model, space or an accuracy column"),
    (["arch", "c100_acc", "c100_acc"], "column 'c100_acc' appears twice"),
    (["arch", "c100"], "no accuracy column"),
    (["name", "c100_acc"], "no arch or model column"),
])
def test_bad_headers(header, message, tmp_path):
    table = _write_csv(tmp_path / "h.csv", header, [[PIT, "70", "70"][:len(header)]], comments="# x\n")
    with pytest.raises(BenchmarkError, match="header \\(line 2\\): .*" + message.replace("(", "\\(")):
        load_benchmark(table)


def test_empty_and_non_utf8_tables(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("# only a comment\n")
    with pytest.raises(BenchmarkError, match="no header row"):
        load_benchmark(empty)
    header_only = _write_csv(tmp_path / "header.csv", ["arch", "c100_acc"], [])
    with pytest.raises(BenchmarkError, match="no rows after the header"):
        load_benchmark(header_only)
    binary = tmp_path / "bin.csv"
    binary.write_bytes(b"arch,c100_acc\n\xff\xfe\n")
    with pytest.raises(BenchmarkError, match="not a UTF-8 text file"):
        load_benchmark(binary)


@pytest.mark.parametrize("packing, said", [("gzip", "gzip-compressed, not CSV text: decompress it"),
                                            ("zip", "a zip archive (a spreadsheet's .xlsx?), not CSV text")])
def test_a_compressed_file_named_csv_is_said_to_be_compressed(tmp_path, capsys, packing, said):
    """The packaged PiT table, gzip-compressed or zipped (as an .xlsx is) under a .csv name: it was called 'not a
    UTF-8 text file (byte 1)', which left the user to guess why."""
    import gzip
    import zipfile

    table = (REPO / "autoprox" / "resources" / "proxy-tables" / "pit.csv").read_bytes()
    path = tmp_path / "pit.csv"
    if packing == "gzip":
        path.write_bytes(gzip.compress(table))
    else:
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr("sheet.csv", table)
    with pytest.raises(BenchmarkError) as info:
        load_benchmark(path)
    assert said in str(info.value) and "byte" not in str(info.value)
    code, out, err = run_cli(capsys, "rank", "--proxy", "params", "--bench", path)
    assert code == 2 and said in err and "Traceback" not in err


def test_space_column_names_a_registered_space_or_a_space_file(tmp_path):
    af_s = [{"embed_dim": 320, "depth": d, "num_heads": [5] * d, "mlp_ratio": [3.0] * d} for d in (12, 13, 14)]
    table = _write_csv(tmp_path / "s.csv", ["arch", "space", "c100_acc"], [[af_s[0], "autoformer-s", "1.0"],
                                                                           [af_s[1], "", "2.0"], [af_s[2], "", "3.0"]])
    assert load_benchmark(table).space == "autoformer-s"
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "mine.json").write_text(AF_FILE_SPACE.read_text())
    afs = [{"embed_dim": 192, "depth": d, "num_heads": [3] * d, "mlp_ratio": [4.0] * d} for d in (12, 13, 14)]
    try:
        table = _write_csv(tmp_path / "f.csv", ["arch", "space", "c100_acc"],
                           [[af, "sub/mine.json", str(70 + i)] for i, af in enumerate(afs)])
        bench = load_benchmark(table)
        assert bench.space == "autoformer-ti-file" and REGISTRY.is_from_file(REGISTRY.get(bench.space))
        jsonl = tmp_path / "f.jsonl"
        jsonl.write_text("".join(json.dumps({"arch": af, "space": "sub/mine.json", "c100_acc": 70.0 + i}) + "\n"
                                 for i, af in enumerate(afs)))
        assert load_benchmark(jsonl).archs == bench.archs
    finally:
        REGISTRY.unregister("autoformer-ti-file")
    mixed = _write_csv(tmp_path / "m.csv", ["arch", "space", "c100_acc"], [[PIT, "pit", "1"], [PIT2, "autoformer", "2"],
                                                                           [PIT3, "pit", "3"]])
    with pytest.raises(BenchmarkError, match="entries name different spaces \\(autoformer, pit\\)"):
        load_benchmark(mixed)
    unknown = _write_csv(tmp_path / "u.csv", ["arch", "space", "c100_acc"],
                         [[PIT, "vit-x", "1"], [PIT2, "vit-x", "2"], [PIT3, "vit-x", "3"]])
    with pytest.raises(BenchmarkError, match="space 'vit-x': unknown search space 'vit-x'"):
        load_benchmark(unknown)
    missing = _write_csv(tmp_path / "n.csv", ["arch", "space", "c100_acc"], [[PIT, "nowhere.json", "1"]])
    with pytest.raises(BenchmarkError, match="space file not found: .*nowhere.json"):
        load_benchmark(missing)


def test_jsonl_reports_every_bad_entry_and_both_arch_and_model(tmp_path):
    path = tmp_path / "b.jsonl"
    entries = [{"arch": PIT, "c100_acc": 1.0}, {"arch": {**PIT, "base_dim": 17}, "c100_acc": 1.0},
               {"arch": {**PIT, "mlp_ratio": 3}, "c100_acc": 1.0}]
    path.write_text("\n".join(json.dumps(e) for e in entries) + "\n")
    with pytest.raises(BenchmarkError) as info:
        load_benchmark(path)
    assert "entry 1: pit arch: base_dim=17" in str(info.value) and "entry 2: pit arch: mlp_ratio=3" in str(info.value)
    assert str(info.value).endswith("(2 bad entries)")
    path.write_text(json.dumps({"arch": PIT, "model": "timm:deit_tiny_patch16_224", "c100_acc": 1.0}) + "\n")
    with pytest.raises(BenchmarkError, match="entry 0 has both 'arch' and 'model'"):
        load_benchmark(path)


def _csv(tmp_path: Path, af_small, delimiter: str = ",", repeat_first: bool = False) -> Path:
    import csv

    from autoprox.spaces.architectures import arch_to_config

    path = tmp_path / "table.csv"
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle, delimiter=delimiter)
        writer.writerow(["arch", "c100_kd_acc"])
        rows = [(json.dumps(arch_to_config(a)), f"{af_small.accuracies['c100_kd'][i]:g}")
                for i, a in enumerate(af_small.archs)]
        writer.writerows(rows + (rows[:1] if repeat_first else []))
    return path


def test_a_csv_with_another_delimiter_names_it(capsys, tmp_path, af_small):
    code, _, err = run_cli(capsys, "rank", "--proxy", "params", "--bench", str(_csv(tmp_path, af_small, ";")))
    assert code == 2
    assert "the header is one column holding ';': the file seems to use ';' as its delimiter" in err
    assert "not arch" not in err and "no accuracy column" not in err  # the column checks only restated it


def test_a_duplicate_csv_row_names_its_line(capsys, tmp_path, af_small):
    path = _csv(tmp_path, af_small, repeat_first=True)
    code, _, err = run_cli(capsys, "rank", "--proxy", "params", "--bench", str(path))
    assert code == 2
    assert err.strip() == (f"autoprox: error: {path}: line {len(af_small) + 2}: entry {len(af_small)} repeats the "
                           "architecture of entry 0 with the same accuracies; list each architecture once")
