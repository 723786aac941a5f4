"""Rough edges of a newcomer's first hour, fourth pass: a resumed ``vit-search`` said nothing of resuming,
``rank`` dropped a repeated proxy in silence and said "1 proxies", and ``show`` and ``select`` of a folder another
command wrote named only a file it lacked."""

from __future__ import annotations

import pytest

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

