"""scripts/bootstrap.sh: what it says it installs, and torch held to constraints.txt."""

from __future__ import annotations

import pytest

from tests.conftest import REPO


@pytest.mark.slow
def test_bootstrap_says_what_it_installs_and_holds_torch_to_the_constraints():
    import torch

    script = (REPO / "scripts" / "bootstrap.sh").read_text()
    pins = [line for line in (REPO / "constraints.txt").read_text().splitlines() if line and not line.startswith("#")]
    assert pins == [f"torch=={torch.__version__}"]
    assert "-c constraints.txt" in script
    lines = script.splitlines()
    installs = [n for n, line in enumerate(lines) if line.strip().startswith(("quiet_pip --", 'if ! "${PIP[@]}"'))]
    assert len(installs) == 3  # torch from pip's indexes, else from PyTorch's CPU index; then the project
    for number in installs:  # each install is announced just before it runs
        assert any(line.strip().startswith("say ") for line in lines[max(0, number - 3):number]), lines[number]
    pyproject = (REPO / "pyproject.toml").read_text()
    assert '"hypothesis' in pyproject.split("[project.optional-dependencies]")[1].split("\n\n")[0]
