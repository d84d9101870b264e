"""The options schema is the one home of every option: the settings, the config file, the
command line's flags and help, the Python API's keywords, configs/default.yaml and the
README's option table all follow ccl_cli.options.OPTIONS."""

from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from ccl_cli import api
from ccl_cli.cli import app
from ccl_cli.config import Settings, resolve
from ccl_cli.errors import UsageError
from ccl_cli.options import BY_NAME, OPTIONS

ROOT = Path(__file__).resolve().parents[1]


def test_settings_have_one_field_per_option_with_its_default():
    fields = [f for f in dataclasses.fields(Settings) if f.name != "sources"]
    assert [f.name for f in fields] == [option.name for option in OPTIONS]
    defaults = Settings()
    for option in OPTIONS:
        assert getattr(defaults, option.name) == option.default, option.name


def test_default_config_file_spells_out_every_default():
    written = yaml.safe_load((ROOT / "configs" / "default.yaml").read_text())
    keys = {key.replace("-", "_") for key in written}
    assert keys == {option.name for option in OPTIONS}
    for key, value in written.items():
        option = BY_NAME[key.replace("-", "_")]
        assert option.check(value) == option.default, key


def test_api_keywords_are_options_with_the_same_defaults():
    keywords = {
        name: parameter.default
        for name, parameter in inspect.signature(api.label).parameters.items()
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY
        and name not in ("stats", "out", "batch")  # the API's own: tables or counts, a
        # labels buffer, what a 3-D array is
    }
    assert keywords
    for name, default in keywords.items():
        assert name in BY_NAME, name
        assert default == BY_NAME[name].default, name


def test_readme_option_table_has_a_row_per_option():
    rows = [line for line in (ROOT / "README.md").read_text().splitlines() if line.startswith("|")]
    for option in OPTIONS:
        assert any(f"`{option.flag}" in row.split("|")[1] for row in rows), option.flag


def test_help_lists_every_option_within_80_columns():
    result = CliRunner().invoke(app, ["label", "--help"], env={"COLUMNS": "80"}, terminal_width=80)
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert max(len(line) for line in lines) <= 80
    for option in OPTIONS:
        spelled = option.flag if option.is_switch else f"{option.flag} {option.metavar}"
        assert spelled in result.output, spelled
    assert "<int>" not in result.output and "<str>" not in result.output
    assert "Examples:" in result.output and "gccl label frames/ --tau 20" in result.output


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        (
            "connectivity",
            "5",
            "'connectivity' must be 4 or 8 (images), or 6, 18 or 26 (volumes), got '5'",
        ),
        (
            "connectivity",
            "abc",
            "'connectivity' must be 4 or 8 (images), or 6, 18 or 26 (volumes), got 'abc'",
        ),
        ("min_area", "1.5", "'min-area' must be a whole number, got '1.5'"),
        ("tau", "-1", "'tau' must be a number >= 0, got '-1'"),
        (
            "label_format",
            "jpeg",
            "'label-format' must be one of auto, png, tiff, npy, nifti, nrrd, metaimage, "
            "got 'jpeg'",
        ),
    ],
)
def test_a_bad_value_names_the_option_and_what_it_must_be(flag: str, value: str, message: str):
    with pytest.raises(UsageError) as error:
        resolve([], {flag: value})
    assert str(error.value) == f"command line: {message}"


def test_command_line_values_reach_the_settings_through_the_checks():
    settings = resolve([], {"connectivity": "4", "min_area": "7", "background": "none"})
    assert (settings.connectivity, settings.min_area, settings.background) == (4, 7, None)


def test_bad_flag_values_are_one_line_errors_with_exit_2(tmp_path: Path):
    result = CliRunner().invoke(
        app, ["label", str(tmp_path), "--out", str(tmp_path / "o"), "--min-area", "1.5"]
    )
    assert result.exit_code == 2
    assert re.fullmatch(
        r"gccl: error: command line: 'min-area' must be a whole number, got '1\.5'\n",
        result.stderr,
    )


def test_click_usage_errors_get_the_same_one_line_form(tmp_path: Path):
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "ccl_cli", "label", str(tmp_path), "--bogus"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("gccl: error: No such option: --bogus")
    assert len(done.stderr.splitlines()) == 1


def help_of(*command: str) -> str:
    result = CliRunner().invoke(
        app, [*command, "--help"], env={"COLUMNS": "80"}, terminal_width=80, prog_name="gccl"
    )
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize(
    ("command", "usage"),
    [
        (["label"], "Usage: gccl label [OPTIONS] INPUT..."),
        (["watch"], "Usage: gccl watch [OPTIONS] DIR..."),
        (["bench"], "Usage: gccl bench [OPTIONS] [INPUT...]"),
        (["config", "show"], "Usage: gccl config show [OPTIONS]"),
    ],
)
def test_usage_lines_name_the_arguments_as_a_shell_user_reads_them(command, usage):
    text = help_of(*command)
    assert text.splitlines()[0] == usage
    assert "{" not in text.splitlines()[0]


@pytest.mark.parametrize("command", [["label"], ["watch"], ["bench"], ["config", "show"]])
def test_each_default_shows_once_as_the_user_types_it(command):
    text = help_of(*command)
    assert "\\" not in text  # no escaped markup
    assert "<int>" not in text and "<str>" not in text and "<path>" not in text
    joined = " ".join(text.split())  # the help, unwrapped
    for option in OPTIONS:
        if option.flag not in joined or option.default_text is None:
            continue
        entry = joined.split(f"{option.flag} {option.metavar}", 1)[-1].split(" --", 1)[0]
        assert entry.count("[default:") <= 1, option.flag
    if command == ["label"]:
        assert "[default: 4GiB]" in joined and "4294967296" not in joined
        assert joined.count("4GiB") == 1


def test_bench_takes_its_shared_options_from_the_schema():
    text = " ".join(help_of("bench").split())
    for name in ("tau", "connectivity", "invert", "threshold", "background"):
        option = BY_NAME[name]
        spelled = (
            f"{option.flag}/--no-{name}" if option.is_switch else f"{option.flag} {option.metavar}"
        )
        assert spelled.replace("/", " / ") in text or spelled in text, spelled
    assert "[default: both, 8 first]" in text and "[default: 0]" in text
    result = CliRunner().invoke(app, ["bench", "--connectivity", "5"])
    assert result.exit_code == 2
    assert "--connectivity must be 4 or 8 (images), or 6, 18 or 26 (volumes), got '5'" in " ".join(
        result.output.split()
    )
    result = CliRunner().invoke(app, ["bench", "--connectivity", "6"])
    assert result.exit_code == 2
    assert "'connectivity' 6 labels 3-D volumes" in " ".join(result.output.split())


@pytest.mark.parametrize(
    ("typed", "suggested"),
    [
        ("--colormap", None),
        ("--verbose", None),
        ("--min-aera", "--min-area"),
        ("--tua", "--tau"),
        ("--recursiv", "--recursive"),
    ],
)
def test_typo_hints_name_only_close_options(tmp_path: Path, typed, suggested):
    result = CliRunner().invoke(app, ["label", str(tmp_path), typed, "1"])
    assert result.exit_code == 2
    if suggested is None:
        assert "did you mean" not in result.output.lower()
        assert "Possible options" not in result.output
    else:
        assert f"(did you mean {suggested}?)" in result.output


def test_config_show_takes_the_label_options_and_prints_what_a_run_would_use(tmp_path: Path):
    config = tmp_path / "c.yaml"
    config.write_text("min-area: 7\ninvert: true\n")
    result = CliRunner().invoke(
        app, ["config", "show", "--config", str(config), "--min-area", "9", "--tau", "2"]
    )
    assert result.exit_code == 0, result.output
    shown = yaml.safe_load(result.output)
    assert (shown["min-area"], shown["invert"], shown["tau"]) == (9, True, 2)
    assert resolve([config], {"min_area": "9", "tau": "2"}) == resolve(
        [_write(tmp_path, result.output)], {}
    )


def _write(folder: Path, text: str) -> Path:
    path = folder / "shown.yaml"
    path.write_text(text)
    return path


def test_info_lines_fit_100_columns():
    result = CliRunner().invoke(app, ["info"])
    assert result.exit_code == 0
    assert max(len(line) for line in result.output.splitlines()) <= 100
