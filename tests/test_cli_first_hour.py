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

    monkeypatch.setattr("autoprox.apps.outer_folds.fold_result", terminated)
    out = tmp_path / "my protocol"
    code = main(["evaluate", "--bench", str(af_small_file), "--folds", "2", "--iterations", "1", "--population", "4",
                 "--batch-size", "2", "--workers", "1", "--quiet", "--cache-dir", str(session_cache.root),
                 "--targets", "c100_kd", "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 130  # Terminated raised by hand here; the real signal's 143 is main's (tests/test_cli.py)
    assert err[-2:] == [f"interrupted; what was computed is kept: continue with: autoprox evaluate --resume --out "
                        f"{shlex.quote(str(out))}", "autoprox: terminated"]
