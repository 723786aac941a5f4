"""benchmarks/space_ceiling.py: the in-sample ceiling of the N-space protocol, on the packaged proxy tables."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
import space_ceiling  # noqa: E402 (beside the other benchmark scripts)


def test_every_space_then_each_set_of_all_but_one():
    sets = space_ceiling.space_sets(("a", "b", "c"))
    assert sets == [("a", "b", "c"), ("b", "c"), ("a", "c"), ("a", "b")]


def test_the_best_worst_lead_over_the_set_alone_is_chosen():
    figures = {"f": {"a": 0.50, "b": 0.62, "c": 0.10},   # worst lead over a, b: 0.00
               "g": {"a": 0.55, "b": 0.61, "c": 0.90},   # worst lead over a, b: +0.01, the best
               "h": {"a": 0.70, "b": 0.55, "c": 0.95}}   # -0.05 on b
    sizes = {"a": 0.50, "b": 0.60, "c": 0.40}
    assert space_ceiling.best_in_sample(["f", "g", "h"], ("a", "b"), figures, sizes) == ("g", pytest.approx(0.01))
    # c's figures count only when c is in the set
    assert space_ceiling.best_in_sample(["f", "g", "h"], ("a", "c"), figures, sizes)[0] == "h"


@pytest.mark.slow
def test_the_ceiling_record_on_the_packaged_spaces(tmp_path):
    assert space_ceiling.main(["--seeds", "1", "--iterations", "8", "--samples", "20", "--out", str(tmp_path)]) == 0
    record = json.loads((tmp_path / "ceiling.json").read_text())
    assert record["format"] == space_ceiling.CEILING_FORMAT
    assert [r["spaces"] for r in record["sets"]] == [list(s) for s in space_ceiling.space_sets()]
    for entry in record["sets"]:
        per_space = entry["per_space"]
        assert list(per_space) == list(space_ceiling.SPACES)
        assert {name for name, e in per_space.items() if e["labels_read"]} == set(entry["spaces"])
        # the worst lead is over the set's own spaces only, each lead over that space's better size count
        assert entry["worst_lead"] == pytest.approx(min(per_space[n]["lead"] for n in entry["spaces"]), abs=2e-6)
        for name, e in per_space.items():
            assert e["lead"] == pytest.approx(e["figure"] - e["size"], abs=2e-6)
            sides = [e[k]["difference"] for k in ("vs_params", "vs_flops") if k in e]
            assert min(sides) == pytest.approx(e["lead"], abs=2e-6)  # ahead of both by the lead, no more
            assert ("vs_flops" in e) == (name != "flexibert")  # FlexiBERT has no MAC count
