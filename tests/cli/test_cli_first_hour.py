"""The command line's own weak spots of issue 43: ``--version``, what ``rank --help`` names, ``show`` of a finished
run whose best.json is broken, and SIGTERM during an evaluate fold's final report."""

from __future__ import annotations

import pytest

from autoprox.cli.main import main


def test_autoprox_version_prints_the_package_version(capsys):
    from autoprox import __version__

    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0 and capsys.readouterr().out.strip() == f"autoprox {__version__}"


def test_rank_help_names_the_recommended_proxies_and_the_rank_formulas(capsys):
    from autoprox.genome.rank_formula import TRANSFORMS

    with pytest.raises(SystemExit):
        main(["rank", "--help"])
    text = " ".join(capsys.readouterr().out.split())  # argparse's line breaks undone
    assert "recommended:SPACE/TARGET" in text and "recommended:any/joint" in text
    assert "rank formula" in text and "lrsum(params, nwot)" in text and "first(r(params), r(flops))" in text
    assert all(f"{name}," in text or f"{name}:" in text for name in TRANSFORMS.names())


@pytest.mark.parametrize("broken", ["[1, 2]", "{not json"])
def test_show_of_a_finished_run_with_a_broken_best_json_does_not_call_it_in_progress(tmp_path, capsys, broken):
    """It used to say ``(in progress or interrupted)`` for a run whose log records every iteration."""
    import shutil

    from tests.conftest import REPO

    run = tmp_path / "run"
    shutil.copytree(REPO / "runs" / "pit-reference", run)
    (run / "best.json").write_text(broken)
    assert main(["show", str(run), "--top", "1", "--no-simplify"]) == 0
    captured = capsys.readouterr()
    first = captured.out.splitlines()[0]
    assert "iteration 200 of 200 (every iteration done; best.json unreadable)" in first, first
    assert "in progress" not in first and "best.json" in captured.err


@pytest.mark.slow
def test_a_signal_during_a_fold_s_final_report_still_says_how_to_continue(capsys, tmp_path, af_small_file,
                                                                          session_cache, monkeypatch):
    """Once in four tries, a SIGTERM during an evaluate fold's final report (after its search, outside the
    search's own signal handling) ended with ``autoprox: terminated`` and no continue hint. Here the signal
    lands in the fold's scoring, every time."""
    import shlex

    from autoprox.cli.main import Terminated

    def terminated(*args, **kwargs):
        raise Terminated()

    monkeypatch.setattr("autoprox.apps.protocols.folds.fold_result", terminated)
    out = tmp_path / "my protocol"
    code = main(["evaluate", "--bench", str(af_small_file), "--folds", "2", "--iterations", "1", "--population", "4",
                 "--batch-size", "2", "--workers", "1", "--quiet", "--cache-dir", str(session_cache.root),
                 "--targets", "c100_kd", "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 130  # Terminated raised by hand here; the real signal's 143 is main's (tests/cli/test_cli.py)
    assert err[-2:] == [f"interrupted; what was computed is kept: continue with: autoprox evaluate --resume --out "
                        f"{shlex.quote(str(out))}", "autoprox: terminated"]


def test_vit_search_writes_its_scores_with_one_number_of_decimals_and_its_budget_in_millions(capsys):
    """``vit-search`` printed scores with 2 or 3 decimals in one column (``%.6g``) and a budget given in
    parameters as ``(1.58409e+06M-1.7281e+06M)``."""
    from autoprox.cli.vitsearch import top_table
    from autoprox.core.numbers import format_column, format_millions

    top = [{"rank": 1, "score": 1234.5678, "params": 15513060, "macs": 6348815680, "arch": {"d": 1}},
           {"rank": 2, "score": 714.6771172, "params": 22085860, "macs": 7211060800, "arch": {"d": 2}}]
    rows = [line.split() for line in top_table(top).splitlines()[1:]]
    assert [r[1] for r in rows] == ["1234.57", "714.68"]
    assert format_column([3e15, 2.5e14]) == ["3.00000e+15", "2.50000e+14"] and format_column([float("nan")]) == ["nan"]
    assert [format_millions(x) for x in (4e6, 2.5e6, 1584090e6)] == ["4M", "2.5M", "1,584,090M"]
    # a budget given in parameters instead of millions: refused, the budget readable
    assert main(["vit-search", "--space", "pit", "--proxy", "params", "--params", "1584090:1728100", "--samples", "2",
                 "--out", "/nonexistent/never-written"]) == 2
    err = capsys.readouterr().err
    assert "no pit architecture has 1,584,090M to 1,728,100M parameters" in err and "e+06" not in err


def test_python_dash_m_autoprox_is_the_autoprox_command():
    """``python -m autoprox`` said ``No module named autoprox.__main__``; only ``python -m autoprox.cli`` worked."""
    import subprocess
    import sys

    from autoprox import __version__
    from tests.conftest import REPO

    done = subprocess.run([sys.executable, "-m", "autoprox", "--version"], capture_output=True, text=True,
                          cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"autoprox {__version__}"
    done = subprocess.run([sys.executable, "-m", "autoprox", "score", "--proxy", "params"], capture_output=True,
                          text=True, cwd=REPO, timeout=120)
    assert done.returncode == 2 and "--out" in done.stderr and "Traceback" not in done.stderr


def test_spaces_lists_the_packaged_table_spaces_too(capsys):
    """``autoprox spaces`` listed the ViT spaces only, so nb201 and flexibert, which rank and evaluate take by
    --space, could be found nowhere but in the manual; ``spaces nb201`` said it was unknown."""
    import json

    assert main(["spaces"]) == 0
    out = capsys.readouterr().out
    assert "nb201  (proxy table, packaged" in out and "flexibert  (proxy table, packaged" in out
    assert "tables  nb201-cifar10 (targets val_acc), nb201-imagenet16-120 (targets val_acc)" in out
    assert main(["spaces", "flexibert", "pit", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [e["name"] for e in listed] == ["pit", "flexibert"]
    assert listed[1]["tables"] == [{"name": "flexibert-glue", "targets": ["glue"]}]
    # an unknown name lists the proxy tables beside the spaces (the space registry's message named the spaces alone)
    assert main(["spaces", "nosuch"]) == 2
    err = capsys.readouterr().err
    assert "unknown space 'nosuch'; known: autoformer, pit" in err and "the proxy tables nb201, flexibert" in err
