"""scripts/runs_archive.py: the archived parts of committed runs pack, unpack and check (runs/README.md)."""

from __future__ import annotations

import importlib.util
import io
import json
import lzma
import shutil
import tarfile

import pytest

from autoprox.apps.protocols.outer_folds import run_protocol
from autoprox.core.errors import RunDirError
from autoprox.search.engine import run_search
from autoprox.search.rundir import RunDirectory
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


LOG_LINES = '{"iteration": 1, "best_jcm": 0.1}\n{"iteration": 2, "best_jcm": 0.2}\n'


@pytest.fixture
def run_dir(tmp_path):
    """A finished search run as ``autoprox search`` leaves it (the files that matter here)."""
    folder = tmp_path / "runs" / "demo-run"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"settings": {}}\n')
    (folder / "best.json").write_text('{"genome": "block_mean(A_params)", "finished": true}\n')
    (folder / "hall_of_fame.json").write_text('{"entries": []}\n')
    (folder / "checkpoint.json").write_text('{"iteration": 2}\n')
    (folder / "evaluations.jsonl").write_text('{"iteration": 1, "genome": "x"}\n')
    (folder / "log.jsonl").write_text(LOG_LINES)
    return folder


@pytest.fixture
def leave_space_out_dir(tmp_path):
    """A finished leave-one-space-out protocol as ``autoprox evaluate --leave-space-out`` leaves it."""
    folder = tmp_path / "leave-space-out" / "demo"
    searches = [{"seed": 0, "run": "leave-out-pit/seed-0", "scores": {"c100_kd": [1.0, 2.0]}, "genome": "g",
                 "search_jcm": 0.5, "iteration": 7}]
    record = {"protocol": {"mode": "leave-space-out", "seeds": 1}, "finished": True, "summary": {"pit": {}},
              "directions": [{"left_out": "pit", "trained_on": ["autoformer"], "run": "leave-out-pit",
                              "baselines": {"scores": {"params": {"c100_kd": [3.0, 4.0]}}, "choices": {},
                                            "invalid": {}},
                              "searches": searches}]}
    (folder / "leave-out-pit" / "seed-0").mkdir(parents=True)
    (folder / "protocol.json").write_text(json.dumps(record, indent=2) + "\n")
    for name, text in (("config.json", "{}\n"), ("best.json", '{"iteration": 7}\n'), ("log.jsonl", LOG_LINES),
                       ("checkpoint.json", "{}\n"), ("evaluations.jsonl", "{}\n"), ("hall_of_fame.json", "{}\n")):
        (folder / "leave-out-pit" / "seed-0" / name).write_text(text)
    return folder


def test_the_committed_runs_stay_under_5_mb():
    """runs/ is cloned with the code (runs/README.md: what is packed or left out to keep it under 5 MB), counted as
    ``git ls-files runs | xargs du -ck`` counts it: each file in whole 4 KiB blocks, under 5,000 KiB."""
    kib = [-(-path.stat().st_size // 4096) * 4 for path in tracked_files("runs/**")]
    assert len(kib) > 100 and sum(kib) < 5_000, sum(kib)


def test_committed_archives_agree_with_their_folders():
    archives = tracked_files("runs/**/archive.tar.xz")
    assert archives, "no committed archive"
    for archive in archives:
        assert runs_archive.check(archive.parent) == [], archive
    # a committed protocol.json beside an archive keeps its figures and names the archive
    # (or, for a re-selection of committed searches, says its archive was dropped and how to make it again)
    protocols = [path for path in tracked_files("runs/**/protocol.json") if "folds" in json.loads(path.read_text())]
    assert len(protocols) >= 30
    for path in protocols:
        record = json.loads(path.read_text())
        if "dropped" in record["archive"]:
            source = runs_archive.reused_searches(record, path.parent.relative_to(REPO))
            assert source and (REPO / source / "archive.tar.xz").is_file(), path
            grown = json.loads((REPO / source / "protocol.json").read_text())["protocol"]["repeats"]
            assert grown == record["protocol"]["repeats"] and not (path.parent / "archive.tar.xz").exists()
            assert f"--reuse-searches {source} --selection {record['protocol']['selection']} " \
                   in record["archive"]["remake"]
        else:
            assert record["archive"]["file"] == "archive.tar.xz" and (path.parent / "archive.tar.xz").is_file()
        assert record["summary"] and all("scores" not in (f["result"] or {}) for f in record["folds"])


def _reselection(folder, source) -> dict:
    """A finished re-selection of ``source``'s searches as ``autoprox evaluate --reuse-searches`` leaves it."""
    folder.mkdir(parents=True)
    result = {"proxy": "best", "genome": "g", "search_jcm": 0.4, "kendall": {"proxy": {"c100_kd": 0.5}},
              "jcm": {"proxy": 0.5}, "scores": {"proxy": {"c100_kd": [0.1, 0.2]}}}
    record = {"command": ["autoprox", "evaluate", "--reuse-searches", str(source), "--selection", "hof-average",
                          "--out", str(folder)],
              "protocol": {"folds": 1, "repeats": 1, "selection": "hof-average", "searches": str(source)},
              "finished": True,
              "summary": {"jcm": {"test": {}}},
              "folds": [{"repeat": 0, "fold": 0, "run": "repeat-0/fold-0", "search": [0], "test": [1],
                         "result": result}]}
    (folder / "protocol.json").write_text(json.dumps(record, indent=2) + "\n")
    return record


def test_drop_leaves_out_a_reselection_s_archive_and_says_how_to_make_it_again(protocol_dir, tmp_path, capsys):
    """A re-selection's archive holds only its whole protocol.json, which its command makes again from the searches
    it re-scores: ``drop`` removes it, the trimmed record names the command and the folder to unpack, and ``check``
    then asks only that those searches are there; any other protocol keeps its archive."""
    runs_archive.pack(protocol_dir)
    folder = tmp_path / "protocol" / "demo-hof-average"
    _reselection(folder, protocol_dir)
    runs_archive.pack(folder)
    with tarfile.open(folder / "archive.tar.xz") as tar:
        assert tar.getnames() == ["protocol.json"]
    trimmed = json.loads((folder / "protocol.json").read_text())
    assert runs_archive.main(["drop", str(folder)]) == 0
    assert "archive.tar.xz dropped" in capsys.readouterr().out
    assert sorted(_tree(folder)) == ["protocol.json"]
    dropped = json.loads((folder / "protocol.json").read_text())
    assert {k: v for k, v in dropped.items() if k != "archive"} == {k: v for k, v in trimmed.items() if k != "archive"}
    assert dropped["archive"]["remake"].startswith(f"python scripts/runs_archive.py unpack {protocol_dir}, then")
    assert runs_archive.check_dropped(folder) == []
    with pytest.raises(runs_archive.ArchiveError, match="its archive was dropped already"):
        runs_archive.drop(folder)
    assert runs_archive.main(["check", str(tmp_path)]) == 0
    assert "1 archives agree with their folders (1 protocols' archives dropped)" in capsys.readouterr().out
    (tmp_path / "protocol" / "torn").mkdir()
    (tmp_path / "protocol" / "torn" / "protocol.json").write_text('{"folds": [')
    assert runs_archive.main(["check", str(tmp_path)]) == 2
    assert "torn/protocol.json is not valid JSON" in capsys.readouterr().err
    (tmp_path / "protocol" / "torn" / "protocol.json").unlink()
    with pytest.raises(RunDirError, match=r"whose archive was not committed; to make it again: python "
                                          r"scripts/runs_archive.py unpack .*, then autoprox evaluate "
                                          r"--reuse-searches .* --selection hof-average --out NEW_FOLDER"):
        run_protocol(None, folder, resume=True, quiet=True)
    # a protocol with searches of its own keeps its archive; so does a re-selection not yet packed
    assert runs_archive.main(["drop", str(protocol_dir)]) == 2
    assert "not a re-selection protocol" in capsys.readouterr().err and (protocol_dir / "archive.tar.xz").is_file()
    unpacked = tmp_path / "protocol" / "unpacked"
    _reselection(unpacked, protocol_dir)
    with pytest.raises(runs_archive.ArchiveError, match="not packed"):
        runs_archive.drop(unpacked)
    # searches grown since (more repeats) would give other folds: checked, and refused by drop
    source = runs_archive._read_protocol(protocol_dir)
    source["protocol"]["repeats"] = 2
    (protocol_dir / "protocol.json").write_text(json.dumps(source))
    assert "have 2 repeats, it 1: its command would make other folds" in runs_archive.check_dropped(folder)[0]
    runs_archive.pack(unpacked)
    with pytest.raises(runs_archive.ArchiveError, match="have 2 repeats"):
        runs_archive.drop(unpacked)
    (protocol_dir / "protocol.json").unlink()
    assert "the searches it re-scores" in runs_archive.check_dropped(folder)[0]


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


def test_a_trimmed_protocol_keeps_each_repeat_s_jcm_rows_and_test_figures_not_its_target_differences(protocol_dir):
    """The per-target paired differences of each repeat stay in the archive; what the docs tables and the HTML report
    read of a repeat (its fold count, its JCM rows with their differences, its per-target test figures) stays beside."""
    record = json.loads((protocol_dir / "protocol.json").read_text())
    test = {"proxy": {"mean": 0.5, "sd": 0.1, "n": 1}}
    difference = {"blend": {"mean": 0.1, "ci": [0.0, 0.2], "ahead": 1, "n": 1}}
    record["repeat_summaries"] = [{"folds": 1, "jcm": {"test": test, "difference": difference},
                                   "targets": {"c100_kd": {"test": test, "difference": difference}}}]
    (protocol_dir / "protocol.json").write_text(json.dumps(record, indent=2) + "\n")
    runs_archive.pack(protocol_dir)
    trimmed = json.loads((protocol_dir / "protocol.json").read_text())
    assert trimmed["repeat_summaries"] == [{"folds": 1, "jcm": {"test": test, "difference": difference},
                                            "targets": {"c100_kd": {"test": test}}}]
    assert runs_archive.check(protocol_dir) == []
    runs_archive.unpack(protocol_dir)
    assert json.loads((protocol_dir / "protocol.json").read_text()) == record


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
    assert "unpack it first" in capsys.readouterr().err


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


def test_a_packed_run_keeps_what_reports_read_and_its_log_reads_as_before(run_dir):
    before = _tree(run_dir)
    records = RunDirectory(run_dir).log()
    assert runs_archive.main(["pack", str(run_dir)]) == 0
    assert sorted(_tree(run_dir)) == ["archive.tar.xz", "best.json", "config.json", "hall_of_fame.json",
                                      "log.jsonl.xz"]
    assert lzma.decompress((run_dir / "log.jsonl.xz").read_bytes()).decode() == LOG_LINES
    run = RunDirectory(run_dir)
    assert run.log_path().name == "log.jsonl.xz" and run.log() == records
    assert run.checkpoint() is None and runs_archive.check(run_dir) == []
    with tarfile.open(run_dir / "archive.tar.xz") as tar:
        assert sorted(tar.getnames()) == ["checkpoint.json", "evaluations.jsonl"]
    assert runs_archive.unpack(run_dir) == 2
    after = _tree(run_dir)
    assert after.pop("archive.tar.xz") and after.pop("log.jsonl.xz") and after == {
        k: v for k, v in before.items() if k != "log.jsonl"}
    # unpacked, it packs again (a resumed run is committed the same way); the same files give the same bytes
    archive = (run_dir / "archive.tar.xz").read_bytes()
    runs_archive.pack(run_dir)
    assert (run_dir / "archive.tar.xz").read_bytes() == archive and not (run_dir / "checkpoint.json").exists()


def test_pack_refuses_a_run_that_has_not_finished(run_dir, capsys):
    (run_dir / "best.json").write_text('{"genome": "block_mean(A_params)", "finished": false}\n')
    assert runs_archive.main(["pack", str(run_dir)]) == 2
    assert "has not finished" in capsys.readouterr().err and (run_dir / "log.jsonl").read_text() == LOG_LINES
    assert not (run_dir / "archive.tar.xz").exists()


def test_a_resumed_packed_run_continues_its_log_in_log_jsonl(run_dir):
    """Resume cuts the log back to the checkpoint (here: iteration 1) from the compressed log, into
    log.jsonl; the compressed file stays as the pack wrote it, and log.jsonl is what is read from then on."""
    runs_archive.pack(run_dir)
    packed = (run_dir / "log.jsonl.xz").read_bytes()
    run = RunDirectory(run_dir)
    run.truncate_logs(1)
    assert (run_dir / "log.jsonl").read_text() == LOG_LINES.splitlines(keepends=True)[0]
    run.append_log({"iteration": 2, "best_jcm": 0.3})
    assert run.log_path().name == "log.jsonl" and [r["best_jcm"] for r in run.log()] == [0.1, 0.3]
    assert (run_dir / "log.jsonl.xz").read_bytes() == packed


def test_a_log_that_is_not_xz_data_is_refused_by_name(run_dir):
    (run_dir / "log.jsonl").unlink()
    (run_dir / "log.jsonl.xz").write_bytes(b"not xz at all")
    with pytest.raises(RunDirError, match=r"log.jsonl.xz is not a readable xz file"):
        RunDirectory(run_dir).log()


def test_resume_of_a_packed_run_says_to_unpack_it_and_changes_nothing(tmp_path):
    """The committed runs are packed: --resume names the command that gives back their checkpoint."""
    run = shutil.copytree(REPO / "runs" / "pit-reference", tmp_path / "pit-reference")
    assert (run / "archive.tar.xz").is_file() and not (run / "checkpoint.json").exists()
    before = _tree(run)
    with pytest.raises(RunDirError, match=r"checkpoint.json is packed in .*archive.tar.xz; unpack it first: "
                                          r"python scripts/runs_archive.py unpack"):
        run_search(None, run, resume=True, quiet=True)
    assert _tree(run) == before
    runs_archive.unpack(run)
    assert json.loads((run / "checkpoint.json").read_text())["iteration"] == 200
    assert (run / "evaluations.jsonl").is_file()


def test_a_leave_space_out_protocol_packs_all_but_what_the_tables_read(leave_space_out_dir, capsys):
    """Everything but the trimmed protocol.json goes into the archive: its record of each search (genome,
    figures, iterations) is what the cross-space tables read."""
    folder = leave_space_out_dir
    before = _tree(folder)
    assert runs_archive.main(["pack", str(folder)]) == 0
    assert "7 files packed" in capsys.readouterr().out
    assert sorted(_tree(folder)) == ["archive.tar.xz", "protocol.json"]
    trimmed = json.loads((folder / "protocol.json").read_text())
    direction = trimmed["directions"][0]
    assert "scores" not in direction["baselines"] and "scores" not in direction["searches"][0]
    assert direction["searches"][0]["search_jcm"] == 0.5 and trimmed["summary"] == {"pit": {}}
    assert direction["searches"][0]["iteration"] == 7
    assert trimmed["archive"]["file"] == "archive.tar.xz" and runs_archive.check(folder) == []
    unrecorded = json.loads(json.dumps(trimmed))
    del unrecorded["directions"][0]["searches"][0]["iteration"]
    (folder / "protocol.json").write_text(json.dumps(unrecorded))
    assert "no iterations recorded for leave-out-pit/seed-0" in "\n".join(runs_archive.check(folder))
    (folder / "protocol.json").write_text(json.dumps(trimmed, indent=2) + "\n")
    assert runs_archive.unpack(folder) == 7
    after = _tree(folder)
    assert after.pop("archive.tar.xz") and after == before
    archive = (folder / "archive.tar.xz").read_bytes()
    runs_archive.pack(folder)  # unpacked, it packs again to the same bytes
    assert (folder / "archive.tar.xz").read_bytes() == archive


def test_a_protocol_archive_leaves_out_the_checkpoints_of_finished_folds(protocol_dir):
    """Nothing reads a finished fold's checkpoint.json or evaluations.jsonl (the protocol's resume takes the
    fold as it is; they serve only to resume its search): the archive leaves them out; every other file
    comes back on unpack."""
    fold = protocol_dir / "repeat-0" / "fold-0"
    (fold / "best.json").write_text('{"finished": true}\n')
    (fold / "checkpoint.json").write_text('{"iteration": 2}\n')
    (fold / "evaluations.jsonl").write_text('{"iteration": 1, "genome": "x"}\n')
    before = _tree(protocol_dir)
    assert runs_archive.pack(protocol_dir) == 4
    with tarfile.open(protocol_dir / "archive.tar.xz") as tar:
        assert "repeat-0/fold-0/checkpoint.json" not in tar.getnames()
        assert "repeat-0/fold-0/evaluations.jsonl" not in tar.getnames()
        assert "repeat-0/fold-0/best.json" in tar.getnames()
    assert not fold.exists() and runs_archive.check(protocol_dir) == []
    runs_archive.unpack(protocol_dir)
    after = _tree(protocol_dir)
    kept = {k: v for k, v in before.items() if not k.endswith(("checkpoint.json", "evaluations.jsonl"))}
    assert after.pop("archive.tar.xz") and after == kept


def test_committed_protocol_archives_hold_no_checkpoint_of_a_finished_fold():
    archives = tracked_files("runs/protocol/*/archive.tar.xz") + tracked_files("runs/few-labels/*/*/archive.tar.xz")
    assert any("few-labels" in str(a) for a in archives)
    for archive in archives:
        with tarfile.open(archive) as tar:
            assert not [n for n in tar.getnames() if n.endswith(("checkpoint.json", "evaluations.jsonl"))], archive


def test_the_trimmed_protocol_json_is_one_line_of_compact_json(protocol_dir):
    """runs/ stays under 5 MB: the indents of some 50 trimmed protocol.json files were a quarter of it."""
    runs_archive.pack(protocol_dir)
    text = (protocol_dir / "protocol.json").read_text()
    assert '"search":[0],' in text and '"proxy":{"c100_kd":0.5}' in text and text.endswith("}\n")
    assert text.count("\n") == 1
    nested = {"a": [], "b": {}, "c": [{"x": [1.5, None, "s"]}, 2], "d": {"e": {"f": True}}}
    assert json.loads(runs_archive._dump(nested)) == nested


def test_a_vit_search_packs_its_scores_and_its_resume_says_to_unpack(tmp_path, capsys):
    """A committed training-free ViT search keeps its ranking (top.json, top.csv) and packs scores.jsonl;
    resuming it packed would score every architecture again, so it is refused with the unpack line."""
    from autoprox.apps.vitsearch import VitSearchSettings, run_vit_search
    from autoprox.proxies.proxy import Proxy

    folder = shutil.copytree(REPO / "runs" / "vit-pit-reference-seed0", tmp_path / "vit")
    assert (folder / "archive.tar.xz").is_file() and not (folder / "scores.jsonl").exists()
    assert runs_archive.check(folder) == []
    before = _tree(folder)
    recorded = json.loads((folder / "vit_search.json").read_text())["settings"]
    with pytest.raises(RunDirError, match=r"scores.jsonl is packed in .*; unpack it first: python scripts/"):
        run_vit_search(VitSearchSettings(**{**recorded, "budget": tuple(recorded["budget"])}), Proxy("params"), folder)
    assert _tree(folder) == before
    assert runs_archive.unpack(folder) == 1
    assert sum(1 for _ in (folder / "scores.jsonl").open()) == json.loads((folder / "top.json").read_text())["samples"]
    (folder / "top.json").write_text(json.dumps({**json.loads((folder / "top.json").read_text()), "finished": False}))
    (folder / "archive.tar.xz").unlink()
    assert runs_archive.main(["pack", str(folder)]) == 2 and "no top.json saying so" in capsys.readouterr().err


def test_a_run_committed_without_its_evaluations_refuses_resume_and_keeps_its_hall_of_fame(tmp_path):
    """The single-split runs were committed without evaluations.jsonl, from which a resume rebuilds the hall
    of fame: resuming one (unpacked) would have emptied hall_of_fame.json; it is refused, the run untouched."""
    run = shutil.copytree(REPO / "runs" / "ablation" / "pit-sum", tmp_path / "pit-sum")
    assert sorted(_tree(run)) == ["best.json", "config.json", "hall_of_fame.json", "log.jsonl.xz"]
    before = _tree(run)
    with pytest.raises(RunDirError, match=r"has no evaluations.jsonl, from which a resume rebuilds the hall of fame: "
                                          r"resuming would drop the 20 proxies hall_of_fame.json holds"):
        run_search(None, run, resume=True, quiet=True)
    assert _tree(run) == before


def test_a_run_without_its_evaluations_keeps_no_checkpoint(run_dir, capsys):
    """Without evaluations.jsonl no resume can rebuild the hall of fame (``search --resume`` refuses it):
    the pack keeps the compressed log and no checkpoint, and makes no archive."""
    (run_dir / "evaluations.jsonl").unlink()
    assert runs_archive.main(["pack", str(run_dir)]) == 0
    assert sorted(_tree(run_dir)) == ["best.json", "config.json", "hall_of_fame.json", "log.jsonl.xz"]
    assert "log.jsonl compressed" in capsys.readouterr().out
    assert runs_archive.main(["pack", str(run_dir)]) == 2 and "nothing to archive" in capsys.readouterr().err
