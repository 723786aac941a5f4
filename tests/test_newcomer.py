"""The first hour of a new user, and adversarial input to the newer surfaces (issue 24).

Each test reproduces one bug or weak spot of a newcomer run and checks the fix; each has a
row in docs/failures.md.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autoprox.cli.main import main
from autoprox.core.errors import ArchitectureError
from autoprox.spaces.family import FamilySpace, load_family

REPO = Path(__file__).resolve().parent.parent
AUTOFORMER_FILE = REPO / "examples" / "spaces" / "autoformer-ti.json"


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _space_file(tmp_path: Path, **changes) -> Path:
    definition = json.loads(AUTOFORMER_FILE.read_text())
    definition["name"] = "huge"
    for key, value in changes.items():
        if key in definition["choices"]:
            definition["choices"][key] = value
        else:
            definition[key] = value
    path = tmp_path / "huge.json"
    path.write_text(json.dumps(definition))
    return path


# ---------------------------------------------------------------- bug 1: space-file bounds
def test_a_space_file_beyond_the_parameter_bound_is_refused_in_one_line(capsys, tmp_path):
    path = _space_file(tmp_path, embed_dim=[1_200_000_000], num_heads={"values": [3, 4], "per": "block"})
    code, out, err = run_cli(capsys, "spaces", "--space-file", str(path))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "largest architecture has" in err and "more than the bound of 1,000,000,000" in err
    assert "limits.max_params" in err


def test_a_space_file_beyond_the_activation_bound_is_refused(tmp_path):
    # few parameters, but a 1x1 patch makes 50,177 tokens: terabytes of attention matrices
    path = _space_file(tmp_path, patch_size=1, embed_dim=[192], depth=[12])
    with pytest.raises(Exception, match=r"GB of activations at batch 8, more than the bound of 64 GB") as caught:
        load_family(path)
    assert type(caught.value).__name__ == "SpaceDefinitionError"


def test_the_bounds_can_be_set_in_the_file(tmp_path):
    definition = json.loads(AUTOFORMER_FILE.read_text())
    definition["limits"] = {"max_params": 1_000_000}
    with pytest.raises(Exception, match="more than the bound of 1,000,000"):
        FamilySpace(definition)
    definition["limits"] = {"max_params": 1e9, "max_activation_gb": 64}
    space = FamilySpace(definition)
    assert space.digest == FamilySpace(json.loads(AUTOFORMER_FILE.read_text())).digest  # same networks, same cache
    with pytest.raises(Exception, match="limits.max_params"):
        FamilySpace(definition | {"limits": {"max_params": -1}})


def test_an_architecture_this_machine_cannot_hold_is_refused_before_any_allocation(tmp_path):
    from autoprox.networks.models import build_model

    path = _space_file(tmp_path, embed_dim=[120_000], depth=[12], limits={"max_params": 1e13, "max_activation_gb": 1e9})
    space = load_family(path)
    arch = space.extremes()[1]
    with pytest.raises(ArchitectureError, match="more than the .* GB of memory available on this machine; not built"):
        build_model(arch)
