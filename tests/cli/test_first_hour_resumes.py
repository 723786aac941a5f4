"""Rough edges of a newcomer's first hour, fourth pass: a resumed ``vit-search`` said nothing of resuming,
``rank`` dropped a repeated proxy in silence and said "1 proxies", and ``show`` and ``select`` of a folder another
command wrote named only a file it lacked."""

from __future__ import annotations

from tests.commands import run_cli


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

