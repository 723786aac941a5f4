"""One float formatter for every table the command line prints, with one spelling of NaN."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from autoprox.apps.protocols.summary import format_protocol
from autoprox.apps.protocols.transfer import format_transfer
from autoprox.core.numbers import UNDEFINED, format_float
from tests.conftest import REPO


@pytest.mark.parametrize("value, text", [(0.5484, "+0.548"), (-0.0174, "-0.017"), (0.0, "+0.000"), (1, "+1.000"),
                                         (np.float32(0.25), "+0.250"), (np.float64(-1.0), "-1.000")])
def test_numbers_are_signed_with_three_decimals(value, text):
    assert format_float(value) == text


@pytest.mark.parametrize("value", [None, math.nan, math.inf, -math.inf, np.float32("nan"), True, "0.5"])
def test_every_missing_or_undefined_figure_reads_nan(value):
    assert format_float(value) == UNDEFINED == "nan"


def test_digits_and_sign_are_the_callers():
    assert format_float(0.43214, digits=4) == "+0.4321"
    assert format_float(0.0771, signed=False) == "0.077"
    assert format_float(78.481, 2, signed=False) == "78.48"


def _figures(kendall):
    return {"proxy": {"kendall": kendall}, "params": {"kendall": 0.5}, "beats_params": False,
            "beyond_size": {"bar": {"descriptor": "depth", "kendall": None}, "beats_bar": False}}


def test_the_cli_tables_spell_an_undefined_figure_the_same_way():
    """A NaN stored as null reads ``nan`` in the protocol and transfer tables alike, never n/a."""
    figure = {"mean": None, "sd": None, "n": 0}
    difference = {"mean": None, "ci": [None, None], "ahead": 0, "n": 0}
    row = {"test": {"proxy": figure, "params": {"mean": 0.5, "sd": 0.1, "n": 5}},
           "difference": {"params": difference}}
    protocol = {"space": "pit", "protocol": {"folds": 5, "repeats": 1, "seed": 0}, "folds": [],
                "summary": {"methods": ["proxy", "params"], "targets": {"c100_kd": row}, "jcm": row}}
    table = format_protocol(protocol)
    # a mean alone where the sd is undefined (no "+- nan"), and the one spelling of an undefined figure
    assert "+- nan" not in table and "+0.500 +- 0.100" in table and "   nan 0/0" in table
    study = {"folds": [{"held_out": "c100_kd", "searched_on": ["flower_kd"], "searched": {"test_jcm": None},
                        "held_out_figures": {"test": _figures(None)}}], "targets": ["c100_kd"], "finished": True}
    row = format_transfer(study).splitlines()[-1].split()
    assert row[2] == "nan" and row[3] == "+0.500" and row[4:6] == ["depth", "nan"] and row[-1] == "nan"
    assert "n/a" not in table + format_transfer(study)


def _partial_protocol(finished: int) -> dict:
    from autoprox.apps.protocols.summary import REFERENCE, summarise
    from autoprox.data.benchmark import load_benchmark
    from tests.conftest import PIT_FILE

    protocol = json.loads((REPO / "runs" / "protocol" / "pit-best" / "protocol.json").read_text())
    for fold in protocol["folds"][finished:]:
        fold["result"] = None
    spec, bench = protocol["protocol"], load_benchmark(PIT_FILE)
    protocol["summary"] = summarise(protocol["folds"][:finished], bench.accuracies, protocol["targets"],
                                    protocol["settings"]["weights"], [REFERENCE, *spec["baselines"]], samples=0,
                                    size=len(bench))
    return protocol


def test_a_partial_protocol_summary_prints_no_nan_and_no_empty_table():
    from autoprox.apps.protocols.summary import format_protocol

    one = format_protocol(_partial_protocol(1))
    assert "nan" not in one and "+-" not in one.split("\n", 3)[3]
    assert "one fold finished: the sd and the intervals need two" in one
    none = format_protocol(_partial_protocol(0))
    assert none.splitlines()[1:] == ["no fold has finished yet: no figures"]
    full = format_protocol(_partial_protocol(2))
    assert "+-" in full and "[" in full and "nan" not in full
