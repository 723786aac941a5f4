"""``show`` of a table search's run directory (:mod:`autoprox.reports.table_run`)."""

from __future__ import annotations

import pytest

from autoprox.search.table_run import run_table_search
from tests.commands import one_error_line, run_cli
from tests.search.test_table_search import SMALL, write_table


def test_show_top_0_of_a_table_run_is_refused_as_for_a_run_of_the_statistics(tmp_path, capsys):
    path, _, _ = write_table(tmp_path / "t.csv", rows=40, labelled=30, seed=2)
    run_table_search(path, ["val_acc"], tmp_path / "run", SMALL, quiet=True)
    with pytest.raises(SystemExit) as stopped:  # a usage error, as every option's bounds
        run_cli(capsys, "show", tmp_path / "run", "--top", "0")
    out, err = capsys.readouterr()
    assert stopped.value.code == 2 and "--top: expected at least 1, got 0" in err and "Traceback" not in err
    assert out == ""


def test_show_options_for_formulas_of_the_statistics_are_refused_on_a_table_run(tmp_path, capsys):
    """--latex, --no-simplify, --timeout, --save and --beyond-size were accepted on a table run and did nothing."""
    path, _, _ = write_table(tmp_path / "t.csv", rows=40, labelled=30, seed=2)
    run_table_search(path, ["val_acc"], tmp_path / "run", SMALL, quiet=True)
    for given in (["--latex"], ["--no-simplify"], ["--timeout", "3"], ["--save"], ["--beyond-size"]):
        code, out, err = run_cli(capsys, "show", tmp_path / "run", *given)
        assert code == 2 and out == "", given
        assert one_error_line(err).startswith(f"autoprox: error: {given[0]} does not apply to a table search's run")
    code, out, err = run_cli(capsys, "show", tmp_path / "run", "--top", "2")
    assert code == 0 and "top 2 of" in out, err


def test_show_repeats_the_no_signal_warning_of_a_table_run(tmp_path, capsys):
    """The warning a table search ends with when its labels show no signal was said once, on stderr, and lost:
    ``show`` reads it again from best.json (nothing recorded besides the figures it holds)."""
    import numpy as np
    import pytest

    noise, _, _ = write_table(tmp_path / "noise.csv", rows=40, labelled=12, seed=1,
                              labels=np.random.default_rng(101).normal(size=40))
    signal, _, _ = write_table(tmp_path / "signal.csv", rows=40, labelled=30, seed=2)
    with pytest.warns(UserWarning, match="no better than chance"):
        run_table_search(noise, ["val_acc"], tmp_path / "noise", SMALL, quiet=True)
    run_table_search(signal, ["val_acc"], tmp_path / "signal", SMALL, quiet=True)
    code, out, err = run_cli(capsys, "show", tmp_path / "noise")
    assert code == 0 and "\nwarning: val_acc: the proxy ranks the labelled rows no better than chance: " in out, err
    code, out, err = run_cli(capsys, "show", tmp_path / "signal")
    assert code == 0 and "warning" not in out, err
