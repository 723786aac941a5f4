"""scripts/runs_archive.py: the archived parts of committed runs pack, unpack and check (runs/README.md)."""

from __future__ import annotations

import importlib.util
import io
import json
import tarfile

import pytest

from tests.conftest import REPO, tracked_files

_spec = importlib.util.spec_from_file_location("runs_archive", REPO / "scripts" / "runs_archive.py")
runs_archive = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(runs_archive)


def _tree(folder) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def protocol_dir(tmp_path):
    """A finished protocol folder as ``autoprox evaluate`` leaves it: protocol.json and one fold run."""
    folder = tmp_path / "protocol" / "demo"
    fold = folder / "repeat-0" / "fold-0"
    fold.mkdir(parents=True)
    result = {"proxy": "best", "genome": "block_mean(frobenius_norm(F1))", "search_jcm": 0.4,
              "kendall": {"proxy": {"c100_kd": 0.5}}, "jcm": {"proxy": 0.5},
              "scores": {"proxy": {"c100_kd": [0.1, 0.2]}}, "choices": {"params": {}}, "ensemble": {"targets": {}}}
    record = {"protocol": {"folds": 1, "repeats": 1}, "finished": True, "summary": {"jcm": {"test": {}}},
              "folds": [{"repeat": 0, "fold": 0, "run": "repeat-0/fold-0", "search": [0], "test": [1],
                         "result": result}]}
    (folder / "protocol.json").write_text(json.dumps(record, indent=2) + "\n")
    (fold / "config.json").write_text('{"settings": {}}\n')
    (fold / "log.jsonl").write_text('{"iteration": 1}\n{"iteration": 2}\n')
    return folder


def test_committed_archives_agree_with_their_folders():
    archives = tracked_files("runs/**/archive.tar.xz")
    assert archives, "no committed archive"
    for archive in archives:
        assert runs_archive.check(archive.parent) == [], archive
    # a committed protocol.json beside an archive keeps its figures and names the archive
    for path in tracked_files("runs/protocol/*/protocol.json"):
        record = json.loads(path.read_text())
        assert record["archive"]["file"] == "archive.tar.xz" and (path.parent / "archive.tar.xz").is_file()
        assert record["summary"] and all("scores" not in (f["result"] or {}) for f in record["folds"])


def test_pack_keeps_the_figures_and_unpack_gives_back_every_byte(protocol_dir):
    before = _tree(protocol_dir)
    runs_archive.pack(protocol_dir)
    assert sorted(_tree(protocol_dir)) == ["archive.tar.xz", "protocol.json"]
    trimmed = json.loads((protocol_dir / "protocol.json").read_text())
    assert set(trimmed["folds"][0]["result"]) == {"proxy", "genome", "search_jcm", "kendall", "jcm"}
    assert trimmed["summary"] == {"jcm": {"test": {}}} and trimmed["archive"]["file"] == "archive.tar.xz"
    assert runs_archive.check(protocol_dir) == []
    assert runs_archive.unpack(protocol_dir) == 3
    after = _tree(protocol_dir)
    assert after.pop("archive.tar.xz") and after == before


def test_check_finds_a_protocol_json_that_is_not_the_archived_one(protocol_dir):
    runs_archive.pack(protocol_dir)
    record = json.loads((protocol_dir / "protocol.json").read_text())
    record["folds"][0]["result"]["jcm"]["proxy"] = 0.9
    (protocol_dir / "protocol.json").write_text(json.dumps(record))
    assert "neither the archived protocol.json nor its trim" in runs_archive.check(protocol_dir)[0]
    assert runs_archive.main(["check", str(protocol_dir.parent)]) == 1


def test_pack_refuses_a_protocol_still_running_and_a_second_pack(protocol_dir, capsys):
    record = json.loads((protocol_dir / "protocol.json").read_text())
    (protocol_dir / "protocol.json").write_text(json.dumps({**record, "finished": False}))
    assert runs_archive.main(["pack", str(protocol_dir)]) == 2
    assert "has not finished" in capsys.readouterr().err
    assert not (protocol_dir / "archive.tar.xz").exists() and (protocol_dir / "repeat-0" / "fold-0").is_dir()
    (protocol_dir / "protocol.json").write_text(json.dumps(record))
    runs_archive.pack(protocol_dir)
    assert runs_archive.main(["pack", str(protocol_dir)]) == 2
    assert "exists; unpack it first" in capsys.readouterr().err


def test_unpack_refuses_a_member_outside_its_folder(tmp_path, capsys):
    folder = tmp_path / "run"
    folder.mkdir()
    with tarfile.open(folder / "archive.tar.xz", "w:xz") as tar:
        data = b"x"
        info = tarfile.TarInfo("../outside.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    assert runs_archive.main(["unpack", str(folder)]) == 2
    assert "runs_archive: error:" in capsys.readouterr().err
    assert not (tmp_path / "outside.txt").exists()
