"""Settings: defaults < config files < flags; every bad key or value is a usage error."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest
import yaml

from ccl_cli.config import Settings, resolve
from ccl_cli.errors import UsageError

ROOT = Path(__file__).resolve().parents[1]


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults() -> None:
    settings = resolve([], {})
    assert settings.connectivity == 8
    assert settings.background == 0
    assert settings.tau is None
    assert settings.params.mode == "binary"


def test_file_then_flags_win(tmp_path: Path) -> None:
    first = write(tmp_path / "a.yaml", "tau: 5\nmin-area: 10\nconnectivity: 4\n")
    second = write(tmp_path / "b.yaml", "min_area: 20\n")
    settings = resolve([first, second], {"connectivity": 8, "tau": None})
    assert settings.tau == 5
    assert settings.min_area == 20
    assert settings.connectivity == 8
    assert settings.params.mode == "tau"


def test_a_coefficient_of_the_tolerance_turns_tau_mode_on(tmp_path: Path) -> None:
    path = write(tmp_path / "depth.yaml", "tau-quadratic: 3.5e-6\nsmooth: binomial:1\n")
    params = resolve([path], {}).params
    assert (params.mode, params.tau, params.tau_relative, params.tau_quadratic) == (
        "tau",
        0,
        0.0,
        3.5e-6,
    )
    params = resolve([path], {"tau": "5", "tau_relative": "0.01"}).params
    assert (params.tau, params.tau_relative, params.tau_quadratic) == (5, 0.01, 3.5e-6)
    assert resolve([], {}).params.tau_quadratic == 0.0  # binary mode: no tolerance


def test_label_params_are_made_once_per_settings_and_follow_a_replace() -> None:
    """Every module of a run reads the one LabelParams of its settings."""
    import pickle
    from dataclasses import replace

    settings = resolve([], {"tau": "3", "erode": "1"})
    assert settings.params is settings.params
    assert settings.params.morphology == (("erode", 1),)
    changed = replace(settings, tau=4)
    assert (changed.params.tau, settings.params.tau) == (4, 3)
    copied = pickle.loads(pickle.dumps(settings))  # as worker processes receive them
    assert copied == settings and copied.params == settings.params


def test_numbers_keep_their_kind() -> None:
    assert resolve([], {"tau": "2.5"}).tau == 2.5
    assert isinstance(resolve([], {"tau": "3"}).tau, int)
    assert resolve([], {"background": "none"}).background is None
    assert resolve([], {"background": "-7"}).background == -7
    assert resolve([], {"batch_size": "16"}).batch_size == 16
    assert resolve([], {"device": "CUDA:1"}).device == "cuda:1"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("colour: 3\n", "unknown key 'colour'"),
        ("tau: fast\n", "'tau' must be a number"),
        ("tau: -1\n", "'tau' must be a number >= 0"),
        ("tau-relative: -1\n", "'tau-relative' must be a number >= 0"),
        ("tau_quadratic: .inf\n", "'tau-quadratic' must be a finite number >= 0"),
        ("connectivity: 5\n", "'connectivity' must be 4 or 8 (images), or 6, 18 or 26"),
        ("min-area: 2.5\n", "'min-area' must be a whole number"),
        ("invert: yes please\n", "'invert' must be true or false"),
        ("device: gpu\n", "'device' must be auto, cpu, cuda or cuda:N"),
        ("label-format: jpeg\n", "'label-format' must be one of auto, png, tiff"),
        ("tiff-compression: lzw\n", "'tiff-compression' must be one of deflate, zstd"),
        ("- a list\n", "a config file holds 'key: value' lines"),
        ("tau: [1\n", "not valid YAML"),
    ],
)
def test_bad_file_names_key_and_file(tmp_path: Path, text: str, needle: str) -> None:
    path = write(tmp_path / "bad.yaml", text)
    with pytest.raises(UsageError) as raised:
        resolve([path], {})
    assert needle in str(raised.value)
    assert str(path) in str(raised.value)


def test_bad_flag_names_the_command_line() -> None:
    with pytest.raises(UsageError, match="command line: 'threshold' must be a number"):
        resolve([], {"threshold": "abc"})


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot read config file"):
        resolve([tmp_path / "nope.yaml"], {})


def test_show_round_trips(tmp_path: Path) -> None:
    settings = resolve([], {"tau": "2.5", "background": "none", "min_area": 3, "out": Path("x")})
    again = resolve([write(tmp_path / "s.yaml", settings.as_yaml())], {})
    assert again == settings


@pytest.mark.parametrize("name", ["default.yaml", "document-scans.yaml", "depth-maps.yaml"])
def test_shipped_configs_load(name: str) -> None:
    path = ROOT / "configs" / name
    settings = resolve([path], {})
    keys = yaml.safe_load(path.read_text())
    assert settings.sources == (str(path),)
    if "tau" in keys and keys["tau"] is not None:
        assert settings.tau == keys["tau"]


def test_default_config_matches_defaults() -> None:
    assert resolve([ROOT / "configs" / "default.yaml"], {}) == Settings()


def test_default_config_lists_every_option() -> None:
    keys = set(yaml.safe_load((ROOT / "configs" / "default.yaml").read_text()))
    options = {f.name.replace("_", "-") for f in fields(Settings)}
    assert keys == options - {"sources"}


def test_default_config_is_the_schema_written_out_values_and_comments() -> None:
    # Its comments are the options' help, so that they cannot say something else than
    # --help and the behaviour (processes: auto is one per core).
    text = (ROOT / "configs" / "default.yaml").read_text()
    assert text == Settings().as_yaml(), "regenerate: gccl config show > configs/default.yaml"
    assert "one per core" in text and "one per two cores" not in text
    assert "max-image-bytes: 4GiB" in text


@pytest.mark.parametrize(
    ("text", "value"),
    [('"false"', False), ("'true'", True), ('"No"', False), ("'on'", True), ("false", False)],
)
def test_quoted_yaml_booleans_are_booleans(tmp_path: Path, text: str, value: bool) -> None:
    settings = resolve([write(tmp_path / "c.yaml", f"invert: {text}\n")], {})
    assert settings.invert is value


def test_a_word_that_is_no_boolean_says_what_is(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="'invert' must be true or false, got 'maybe'"):
        resolve([write(tmp_path / "c.yaml", "invert: maybe\n")], {})


def test_an_unknown_key_names_the_close_one(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"unknown key 'min_aera' \(did you mean 'min-area'\?\)"):
        resolve([write(tmp_path / "c.yaml", "min_aera: 3\n")], {})
    with pytest.raises(UsageError, match=r"unknown key 'colormap'$"):
        resolve([write(tmp_path / "c.yaml", "colormap: 3\n")], {})
