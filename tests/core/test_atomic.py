"""The output checks of :mod:`autoprox.core.atomic`: a file autoprox did not write is never replaced, a folder
holding someone else's files never written into, and each refusal is one line naming what to change."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from autoprox.core.atomic import check_new_folder, check_output_file, file_ends
from autoprox.core.errors import ExportError, RunDirError


def ours(head: bytes, tail: bytes) -> bool:
    """The recogniser of the tests' own files: a first line ``OURS`` or a last line ``END-OURS``."""
    return head.startswith(b"OURS\n") or tail.endswith(b"END-OURS\n")


def test_a_new_file_a_link_to_nothing_and_a_file_the_command_wrote_may_be_written(tmp_path):
    new = tmp_path / "sub" / "new.csv"
    assert check_output_file(new, "score", ours) == new
    own = tmp_path / "own.csv"
    own.write_text("OURS\n1,2\n")
    assert check_output_file(own, "score", ours) == own
    long_own = tmp_path / "long.html"  # recognised by its end, beyond the bytes read from its start
    long_own.write_text("x" * 20000 + "\nEND-OURS\n")
    assert check_output_file(long_own, "report", ours) == long_own
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere.csv")
    assert check_output_file(dangling, "score", ours) == tmp_path / "nowhere.csv"
    link = tmp_path / "link"
    link.symlink_to(own)
    assert check_output_file(link, "score", ours) == own.resolve()


def test_a_file_the_command_did_not_write_is_refused_in_one_line_and_left_as_it_is(tmp_path):
    mine = tmp_path / "mine.csv"
    mine.write_text("id,accuracy\n1,80\n")
    with pytest.raises(RunDirError) as caught:
        check_output_file(mine, "score", ours)
    assert str(caught.value) == (f"{mine} exists and was not written by `autoprox score`; choose another --out "
                                 "(nothing was overwritten)")
    link = tmp_path / "link.csv"  # a link is written through: the file at its end decides
    link.symlink_to(mine)
    with pytest.raises(ExportError, match="was not written by `autoprox export`; choose another --csv"):
        check_output_file(link, "export", ours, "--csv", ExportError)
    empty = tmp_path / "empty.csv"  # nothing in it to lose, but not ours either
    empty.write_text("")
    with pytest.raises(RunDirError, match="not written by"):
        check_output_file(empty, "score", ours)
    assert mine.read_text() == "id,accuracy\n1,80\n" and link.is_symlink()


def test_an_empty_path_a_folder_a_loop_of_links_and_a_device_are_refused(tmp_path):
    with pytest.raises(RunDirError, match="^--out is empty: give the file to write$"):
        check_output_file("", "score", ours)
    with pytest.raises(RunDirError, match=f"^cannot write {tmp_path}: it is a directory; choose another --out$"):
        check_output_file(tmp_path, "score", ours)
    (tmp_path / "loopA").symlink_to(tmp_path / "loopB")
    (tmp_path / "loopB").symlink_to(tmp_path / "loopA")
    with pytest.raises(RunDirError, match="loop of symbolic links; choose another --out"):
        check_output_file(tmp_path / "loopA", "score", ours)
    if Path("/dev/null").exists():
        with pytest.raises(RunDirError, match="^cannot write /dev/null: it is not a regular file"):
            check_output_file("/dev/null", "curves", ours)


def test_file_ends_reads_both_ends_of_a_long_file_once_and_nothing_of_an_unreadable_one(tmp_path):
    short = tmp_path / "short"
    short.write_bytes(b"abc")
    assert file_ends(short) == (b"abc", b"abc")
    long = tmp_path / "long"
    long.write_bytes(b"a" * 5000 + b"b" * 5000)
    head, tail = file_ends(long)
    assert head == b"a" * 4096 and tail == b"b" * 4096
    assert file_ends(tmp_path / "missing") == (b"", b"")


def test_check_new_folder_takes_a_new_or_empty_folder_and_refuses_anything_else(tmp_path):
    assert check_new_folder(tmp_path / "new", "ViT search (vit_search.json)") == tmp_path / "new"
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / ".autoprox.lock").write_text("")
    check_new_folder(empty, "run", ignore=(".autoprox.lock",))
    full = tmp_path / "full"
    full.mkdir()
    (full / "important.txt").write_text("mine")
    with pytest.raises(RunDirError) as caught:
        check_new_folder(full, "ViT search (vit_search.json)")
    assert str(caught.value) == (f"{full} is not empty and holds no ViT search (vit_search.json); its files are "
                                 "left as they are: choose another --out")
    assert sorted(os.listdir(full)) == ["important.txt"]
    check_new_folder(full, "run", ignore=("important.txt",))
    with pytest.raises(RunDirError, match="is a file, not a directory; choose another --out"):
        check_new_folder(full / "important.txt", "run")
    with pytest.raises(RunDirError, match="^--out is empty"):
        check_new_folder("", "run")


DEEP = "[" * 10_000 + "]" * 10_000  # deeper than Python's JSON decoder recurses


def test_json_nested_too_deeply_is_a_json_error_naming_it(tmp_path):
    """``json.loads`` of a text nested 10,000 deep raises RecursionError, which no reading of a user's file caught
    (``rank --proxy deep.json``, ``show RUN`` with such a config.json, ``spaces --space-file``, ``build_vit``: each
    a traceback); :func:`load_json` makes it the JSONDecodeError every reading already names."""
    from autoprox.core.atomic import JSONTooDeep, json_problem, load_json, read_json_file

    with pytest.raises(json.JSONDecodeError) as caught:
        load_json(DEEP)
    assert isinstance(caught.value, JSONTooDeep) and str(caught.value) == "nested too deeply to read"
    assert json_problem(caught.value) == "nested too deeply to read"
    assert load_json("[[1]]") == [[1]] and load_json(b'{"a": 1}') == {"a": 1}
    path = tmp_path / "deep.json"
    path.write_text(DEEP)
    with pytest.raises(ExportError, match=r"deep.json: not a proxy \(nested too deeply to read\)$"):
        read_json_file(path, "a proxy", ExportError)


@pytest.mark.parametrize("command, says", [
    (["rank", "--proxy", "{deep}", "--space", "pit"], "{deep}: not a JSON proxy file (nested too deeply to read)"),
    (["show", "{run}"], "{run}/config.json is not valid JSON (nested too deeply to read)"),
    (["export", "{run}", "--out", "{tmp}/p.py"], "{run}/config.json is not valid JSON (nested too deeply to read)"),
    (["spaces", "--space-file", "{deep}"], "{deep}: not JSON (nested too deeply to read)"),
], ids=["rank-proxy", "show", "export", "space-file"])
def test_a_file_nested_too_deeply_is_refused_in_one_line(tmp_path, capsys, command, says):
    from autoprox.cli.main import main

    deep, run = tmp_path / "deep.json", tmp_path / "run"
    deep.write_text(DEEP)
    run.mkdir()
    (run / "config.json").write_text(DEEP)
    fill = {"deep": str(deep), "run": str(run), "tmp": str(tmp_path)}
    assert main([part.format(**fill) for part in command]) == 2
    assert capsys.readouterr().err == f"autoprox: error: {says.format(**fill)}\n"


def test_build_vit_refuses_a_top_json_nested_too_deeply(tmp_path):
    import autoprox
    from autoprox.core.errors import VitSearchError

    top = tmp_path / "top.json"
    top.write_text(DEEP)
    with pytest.raises(VitSearchError, match="cannot be read as JSON \\(nested too deeply to read\\)"):
        autoprox.build_vit(top)


def test_an_atomic_write_over_a_folder_is_refused_in_one_line_and_leaves_no_temporary_file(tmp_path):
    """A file of a command's own (a ViT search's ``top.json``, a run's ``best.json``) replaced by a folder ended the
    write in ``IsADirectoryError`` from ``os.replace``, a traceback after the work was done."""
    from autoprox.core.atomic import atomic_write_json

    (tmp_path / "top.json").mkdir()
    with pytest.raises(RunDirError, match=r"^cannot write .*top.json: it is a directory; move it away"):
        atomic_write_json(tmp_path / "top.json", {"a": 1})
    assert [p.name for p in tmp_path.iterdir()] == ["top.json"] and (tmp_path / "top.json").is_dir()
