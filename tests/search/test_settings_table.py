"""Issue 33: a search option is one row of the option table. A row registered at run time is a command-line
option, a ``ProxySearch`` parameter, a field of ``config.json`` and part of the settings digest, so that a resume
given another value of it is refused, without a line anywhere else."""

from __future__ import annotations

import inspect
import json

import pytest

from autoprox.api import ProxySearch
from autoprox.cli.main import main
from autoprox.core.errors import ConfigError, RunDirError
from autoprox.search.conversions import number
from autoprox.search.options import Option, option_values, register_option, unregister_option
from autoprox.search.resume import check_resume
from autoprox.search.settings import SearchSettings, settings_from_options


@pytest.fixture
def noise_floor():
    """A real row: a number at least 0, default 0, recorded as ``noise_floor`` when it is not 0."""
    row = Option("noise_floor", 0.0, "scores closer than this count as equal (a test option)", number(0.0),
                 setting="noise_floor")
    register_option(row)
    yield row
    unregister_option("noise_floor")


def test_a_registered_option_is_a_command_line_option_and_an_api_parameter(noise_floor, capsys):
    with pytest.raises(SystemExit):
        main(["search", "--help"])
    assert "--noise-floor NOISE_FLOOR" in capsys.readouterr().out
    parameter = inspect.signature(ProxySearch).parameters["noise_floor"]
    assert parameter.default == 0.0 and parameter.kind is inspect.Parameter.KEYWORD_ONLY
    assert ProxySearch(space="pit", noise_floor="0.5").noise_floor == 0.5
    with pytest.raises(ConfigError, match="noise_floor: expected a number in"):
        ProxySearch(space="pit", noise_floor=-1)


def test_the_option_table_is_the_signature_of_proxy_search():
    from autoprox.search.options import options_for

    signature = inspect.signature(ProxySearch).parameters
    assert [(p.name, p.default) for p in signature.values()] == [(o.name, o.default) for o in options_for("search")]


def test_a_registered_option_is_recorded_only_when_it_differs_from_its_default(noise_floor):
    plain = settings_from_options(option_values({"space": "pit"}))
    assert "noise_floor" not in plain.to_json()  # earlier runs' configurations read as before
    assert plain.option("noise_floor") == 0.0
    chosen = settings_from_options(option_values({"space": "pit", "noise_floor": 0.5}))
    recorded = json.loads(json.dumps(chosen.to_json()))
    assert recorded["noise_floor"] == 0.5
    again = SearchSettings.from_json(recorded)
    assert again == chosen and again.option("noise_floor") == 0.5
    assert chosen.digest("0" * 64) != plain.digest("0" * 64)
    with pytest.raises(ConfigError, match="setting 'noise_floor' has a value of the wrong type"):
        SearchSettings.from_json({**recorded, "noise_floor": "high"})
    with pytest.raises(ConfigError, match="unknown setting 'noise_ceiling'"):
        SearchSettings.from_json({**recorded, "noise_ceiling": 1.0})
    with pytest.raises(ConfigError, match=r"--noise-floor 0.25 \(the run has 0.5\)"):
        check_resume({"noise_floor": 0.25}, chosen, "pit", "RUN")
    check_resume({"noise_floor": 0.5}, chosen, "pit", "RUN")


def test_a_resume_with_another_value_of_a_registered_option_is_refused(noise_floor, af_small_file, session_cache,
                                                                       tmp_path, capsys):
    out = tmp_path / "run"
    line = ["search", "--bench", str(af_small_file), "--targets", "c100_kd,flower_kd", "--population", "4",
            "--batch-size", "2", "--workers", "1", "--cache-dir", str(session_cache.root), "--retry-cap", "2",
            "--search-fraction", "0.75", "--quiet", "--out", str(out)]
    assert main(line + ["--iterations", "1", "--noise-floor", "0.5"]) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["settings"]["noise_floor"] == 0.5
    capsys.readouterr()
    assert main(line + ["--resume", "--iterations", "2", "--noise-floor", "0.25"]) == 2
    assert "--noise-floor 0.25 (the run has 0.5)" in capsys.readouterr().err
    # config.json edited to another value: its digest is not the checkpoint's, and the resume names the setting
    config["settings"]["noise_floor"] = 0.25
    (out / "config.json").write_text(json.dumps(config))
    with pytest.raises(RunDirError, match="noise_floor 0.25 \\(then 0.5\\)"):
        ProxySearch(out=str(out), resume=True, quiet=True).fit()
    config["settings"]["noise_floor"] = 0.5
    (out / "config.json").write_text(json.dumps(config))
    assert main(line + ["--resume", "--iterations", "2", "--noise-floor", "0.5"]) == 0
    assert json.loads((out / "checkpoint.json").read_text())["iteration"] == 2


# ======================================== issue 42: one declaration per setting
def test_every_settings_field_takes_its_default_from_its_row():
    """``SearchSettings`` and ``EvolutionConfig`` declare no default of their own for a setting of the table: each
    field's default is its row's (:attr:`Option.field_default`), the option's default unless the row says what a
    setting resolved from the other options stands for (``iterations``, ``kernels``, ``evaluation``)."""
    from dataclasses import MISSING, fields

    from autoprox.search.evolution import EvolutionConfig
    from autoprox.search.options import setting_options

    records = {"": {f.name: f for f in fields(SearchSettings)}, "evolution": {f.name: f for f in fields(EvolutionConfig)}}
    seen = set()
    for option in setting_options():
        head, _, sub = option.setting.partition(".")
        spec = records["evolution"].get(sub) if sub else records[""].get(head)
        if spec is None:  # a row held among the settings' options
            continue
        seen.add(option.setting)
        default = spec.default_factory() if spec.default is MISSING and spec.default_factory is not MISSING \
            else spec.default
        if option.setting == "bench":  # the one setting every search must give
            assert default is MISSING
            continue
        assert default == option.field_default, option.name
        assert option.default is None or option.field_default == option.default, option.name  # one default each
    assert len(seen) == len(setting_options())
    assert SearchSettings(bench="x").workers == option_values({})["workers"] == 2  # the command line's
    assert EvolutionConfig().iterations == 200 and option_values({})["iterations"] is None  # None: "not given"


def test_the_session_settings_are_declared_once_on_the_table():
    """The settings a resume may change are the table's session rows with a setting; the digest leaves exactly
    those out, and a resume neither compares them nor refuses them."""
    from dataclasses import replace

    from autoprox.search.options import session_options
    from autoprox.search.resume import resume_conflicts

    assert [option.setting for option in session_options()] == ["bench", "evolution.iterations", "cache_dir",
                                                                 "workers"]
    settings = SearchSettings(bench="x")
    changed = replace(settings, bench="y", cache_dir="/elsewhere", workers=7,
                      evolution=replace(settings.evolution, iterations=9))
    assert changed.compared() == settings.compared()
    assert replace(settings, split_seed=1).compared() != settings.compared()
    assert resume_conflicts({"bench": "y", "cache_dir": "/elsewhere", "workers": 7, "iterations": 9}, settings,
                            None) == []
