"""Rough edges of a newcomer's first hour, fourth pass: a resumed ``vit-search`` said nothing of resuming,
``rank`` dropped a repeated proxy in silence and said "1 proxies", and ``show`` and ``select`` of a folder another
command wrote named only a file it lacked."""

from __future__ import annotations

import pytest

from tests.commands import one_error_line, run_cli
from tests.conftest import REPO


def test_a_resumed_vit_search_says_so_in_one_line(capsys, tmp_path):
    out = tmp_path / "vit"
    argv = ("vit-search", "--space", "pit", "--proxy", "params", "--samples", "3", "--out", out)
    code, _, err = run_cli(capsys, *argv)
    assert code == 0 and "resuming" not in err
    lines = (out / "scores.jsonl").read_text().splitlines()
    (out / "scores.jsonl").write_text(lines[0] + "\n")  # as if stopped after the first architecture
    code, _, err = run_cli(capsys, *argv)
    assert code == 0
    assert [line for line in err.splitlines() if "resuming" in line] == [
        f"resuming with 1 of 3 architectures scored in {out}"]
    assert len((out / "scores.jsonl").read_text().splitlines()) == 3


@pytest.mark.parametrize("space", ["pit", "nb201"])
def test_rank_names_a_repeated_proxy_and_counts_one_proxy_in_the_singular(capsys, space):
    code, out, err = run_cli(capsys, "rank", "--proxy", "params,params,params", "--space", space)
    assert code == 0 and "params" in out
    assert [line for line in err.splitlines() if "warning" in line] == [
        "autoprox: warning: the proxy list names params more than once; each is kept once"]
    if space == "pit":  # the ranking table of networks says how many it ranks
        assert "ranking 1 proxy on 100 architectures" in err and "proxies" not in err


def test_resolve_proxies_warns_of_each_repeated_name_once():
    from autoprox.proxies.proxy import resolve_proxies

    with pytest.warns(UserWarning, match=r"^the proxy list names params, flops more than once; each is kept once$"):
        proxies = resolve_proxies("params,flops,params,flops,params")
    assert [p.name for p in proxies] == ["params", "flops"]


@pytest.mark.parametrize("command", ["show", "select"])
@pytest.mark.parametrize("folder, what, reader", [
    ("protocol/autoformer-default-patience30", "a protocol that autoprox evaluate wrote (protocol.json",
     "autoprox report {} reads it"),
    ("few-labels", "a few-label protocol that autoprox evaluate --few-labels wrote (few_labels.json",
     "autoprox report {} reads it"),
    ("transfer/pit", "a transfer study that autoprox transfer wrote (transfer.json",
     "autoprox transfer --resume --out {} continues it; it holds the runs"),
    ("vit-pit-reference-seed0", "a ViT search that autoprox vit-search wrote (vit_search.json",
     "its best architectures are in {}/top.json"),
], ids=["protocol", "few-labels", "transfer", "vit-search"])
def test_show_and_select_of_a_folder_another_command_wrote_say_what_it_is_and_what_reads_it(
        capsys, tmp_path, command, folder, what, reader):
    """``show`` of a protocol said only ``not a run directory (no config.json)``; ``select`` of a ViT search said
    ``best.json not found``."""
    path = REPO / "runs" / folder
    argv = [command, path] + (["--out", tmp_path / "chosen.json"] if command == "select" else [])
    code, out, err = run_cli(capsys, *argv)
    line = one_error_line(err)
    assert code == 2 and out == ""
    assert line.startswith(f"autoprox: error: {command} reads a run directory, and {path} is {what}, no config.json)")
    assert reader.format(path) in line
    assert not (tmp_path / "chosen.json").exists()
