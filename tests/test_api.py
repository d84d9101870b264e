"""The Python API on the host: labels only, out=, Labeler, option checks, PyTorch CPU tensors."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from oracles import bfs_labels, filter_min_area
from scipy import ndimage

import ccl_cli
from ccl_cli import api
from ccl_cli.contract.params import LabelParams
from ccl_cli.errors import UsageError


def sample(shape=(3, 37, 53), seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.random(shape) < 0.5).astype(np.uint8) * rng.integers(1, 4, shape).astype(np.uint8)


def reference(batch: np.ndarray, params: LabelParams) -> np.ndarray:
    labels = [bfs_labels(image, params) for image in batch]
    if params.min_area:
        labels = [filter_min_area(image, params.min_area) for image in labels]
    return np.stack(labels).astype(np.uint32)


@pytest.mark.parametrize("min_area", [0, 3])
@pytest.mark.parametrize("connectivity", [4, 8])
def test_labels_only_batch_matches_the_oracle(connectivity, min_area):
    batch = sample()
    params = LabelParams(connectivity=connectivity, min_area=min_area)
    labels, counts = ccl_cli.label(
        batch, stats=False, connectivity=connectivity, min_area=min_area, device="cpu"
    )
    want = reference(batch, params)
    np.testing.assert_array_equal(labels, want)
    assert isinstance(counts, np.ndarray) and counts.dtype == np.uint32
    assert counts.tolist() == [int(image.max()) for image in want]


def test_single_image_counts_are_zero_dimensional():
    image = sample((1, 20, 30), seed=1)[0]
    labels, count = ccl_cli.label(image, stats=False, device="cpu")
    assert labels.shape == image.shape and isinstance(count, np.ndarray) and count.shape == ()
    assert int(count) == int(labels.max()) > 0


def test_labels_land_in_out():
    batch = sample(seed=2)
    out = np.full(batch.shape, 99, np.uint32)
    labels, tables = ccl_cli.label(batch, out=out, device="cpu")
    assert labels is out
    np.testing.assert_array_equal(out, reference(batch, LabelParams()))
    assert [len(t) for t in tables] == [int(image.max()) for image in out]


@pytest.mark.parametrize(
    "out",
    [
        np.zeros((3, 37, 53), np.int32),
        np.zeros((3, 37, 52), np.uint32),
        np.zeros((3, 53, 37), np.uint32).transpose(0, 2, 1),
        [[0]],
    ],
    ids=["dtype", "shape", "strided", "list"],
)
def test_bad_out_is_a_usage_error(out):
    with pytest.raises(UsageError, match="out"):
        ccl_cli.label(sample(seed=3), out=out, device="cpu")


def test_labeler_checks_options_once_and_labels_like_label():
    with pytest.raises(UsageError):
        ccl_cli.Labeler(connectivity=5)
    with pytest.raises(UsageError):
        ccl_cli.Labeler(device="tpu")
    with pytest.raises(UsageError, match="stats"):
        ccl_cli.Labeler(stats="no")  # type: ignore[arg-type]
    labeler = ccl_cli.Labeler(connectivity=4, min_area=2, stats=False, device="cpu")
    batch = sample(seed=4)
    for _ in range(2):
        labels, counts = labeler(batch)
        want, want_counts = ccl_cli.label(
            batch, connectivity=4, min_area=2, stats=False, device="cpu"
        )
        np.testing.assert_array_equal(labels, want)
        np.testing.assert_array_equal(counts, want_counts)


def test_label_rejects_unknown_and_bad_options():
    with pytest.raises(TypeError, match="colour"):
        ccl_cli.label(sample(seed=5), colour="red")  # type: ignore[call-arg]
    with pytest.raises(UsageError, match="tau"):
        ccl_cli.label(sample(seed=5), tau=[1], device="cpu")  # unhashable: checked uncached


def test_label_and_labeler_take_the_same_options():
    import inspect

    def keywords(function):
        parameters = inspect.signature(function).parameters.values()
        return {p.name: p.default for p in parameters if p.kind is p.KEYWORD_ONLY}

    assert keywords(api.label) == {**keywords(api.Labeler), "out": None, "batch": None}


def test_torch_cpu_tensors_give_tensors():
    torch = pytest.importorskip("torch")
    batch = sample(seed=6)
    tensor = torch.from_numpy(batch)
    labels, counts = ccl_cli.label(tensor, stats=False, device="cpu")
    assert isinstance(labels, torch.Tensor) and labels.dtype == torch.int32
    np.testing.assert_array_equal(labels.numpy(), reference(batch, LabelParams()))
    assert isinstance(counts, torch.Tensor) and counts.tolist() == [
        int(image.max()) for image in labels.numpy()
    ]
    out = torch.zeros((3, 19, 53), dtype=torch.int32)
    labels, tables = ccl_cli.label(tensor[:, ::2], out=out, device="cpu")
    assert labels is out and len(tables) == 3
    want = reference(np.ascontiguousarray(batch[:, ::2]), LabelParams())
    np.testing.assert_array_equal(out.numpy(), want)


def test_the_api_does_not_import_cupy_or_torch_for_numpy():
    code = (
        "import sys, numpy as np, ccl_cli\n"
        "ccl_cli.label(np.eye(5, dtype=np.uint8), stats=False, device='cpu')\n"
        "ccl_cli.Labeler(device='cpu')(np.eye(4, dtype=np.uint8))\n"
        "assert 'cupy' not in sys.modules and 'torch' not in sys.modules, sorted(sys.modules)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# The API as scipy, scikit-image and cc3d users call it.


def test_help_shows_the_real_signature_and_the_package_lists_the_api():
    import pydoc

    text = pydoc.render_doc(ccl_cli.label, renderer=pydoc.plaintext)
    assert "**options" not in text
    for keyword in ("tau: float | None = None", "connectivity: int = 8", "min_area: int = 0"):
        assert keyword in text, keyword
    assert "Returns (labels, tables)" in text  # the docstring, not a wrapper's
    assert "connectivity: int = 8" in pydoc.render_doc(ccl_cli.Labeler, renderer=pydoc.plaintext)
    assert {"label", "Labeler", "StatsTable", "DeviceTable"} <= set(dir(ccl_cli))
    from ccl_cli import Labeler, StatsTable

    assert Labeler is api.Labeler and ccl_cli.label is api.label
    assert isinstance(ccl_cli.label(np.eye(3, dtype=np.uint8), device="cpu")[1][0], StatsTable)


@pytest.mark.parametrize(
    ("options", "error", "words"),
    [
        ({"connectivity": 5}, ValueError, "'connectivity' must be 4 or 8 (images), or 6, 18 or 26"),
        ({"connectivity": "8"}, TypeError, "'connectivity' must be an int, not str '8'"),
        ({"min_area": -1}, ValueError, "'min_area' must be a whole number >= 0, got -1"),
        ({"min_area": 2.0}, TypeError, "'min_area' must be an int, not float 2.0"),
        ({"invert": 1}, TypeError, "'invert' must be True or False, not int 1"),
        ({"tau": "5"}, TypeError, "'tau' must be a number or None, not str '5'"),
        ({"tau": -1}, ValueError, "'tau' must be a number >= 0, got -1"),
        ({"tau_relative": -0.1}, ValueError, "'tau_relative' must be a number >= 0, got -0.1"),
        ({"tau_quadratic": float("inf")}, ValueError, "'tau_quadratic' must be a finite number"),
        ({"tau_quadratic": "1e-6"}, TypeError, "'tau_quadratic' must be a number or None"),
        ({"device": "tpu"}, ValueError, "'device' must be auto, cpu, cuda or cuda:N"),
        ({"stats": "no"}, TypeError, "'stats' must be True or False"),
        ({"min_aera": 3}, TypeError, "unexpected keyword argument 'min_aera'; did you mean"),
    ],
)
def test_bad_options_raise_value_and_type_errors_with_one_line(options, error, words):
    image = np.eye(4, dtype=np.uint8)
    for make in (lambda: ccl_cli.label(image, **options), lambda: ccl_cli.Labeler(**options)):
        with pytest.raises(error) as raised:
            make()
        assert words in str(raised.value) and "\n" not in str(raised.value)


def test_a_growing_tolerance_matches_the_oracle_and_turns_tau_mode_on():
    ramp = np.add.outer(np.arange(20) * 9, np.arange(30) * 4).astype(np.uint16) + 900
    for keywords in ({"tau": 2, "tau_quadratic": 1e-5}, {"tau_relative": 0.008}):
        params = LabelParams(**{"tau": 0, **keywords})
        labels, tables = ccl_cli.label(ramp, device="cpu", **keywords)
        np.testing.assert_array_equal(labels, bfs_labels(ramp, params))
        assert len(tables[0]) == bfs_labels(ramp, params).max()
    # an absolute tau that small splits the ramp into its rows and columns
    assert ccl_cli.label(ramp, tau=2, device="cpu", stats=False)[1] == 600


def test_numpy_scalars_are_taken_as_python_numbers():
    image = sample((12, 15), seed=7)
    want, _ = ccl_cli.label(image, connectivity=4, min_area=2, device="cpu")
    got, _ = ccl_cli.label(
        image, connectivity=np.int64(4), min_area=np.uint8(2), invert=np.bool_(False), device="cpu"
    )
    np.testing.assert_array_equal(got, want)


def test_nested_lists_and_int64_arrays_are_labeled_as_numpy_takes_them():
    rows = [[0, 5, 0, 0], [0, 5, 0, 7], [9, 0, 0, 7]]
    want = np.array([[0, 1, 0, 0], [0, 1, 0, 2], [1, 0, 0, 2]], np.uint32)  # 8-connectivity
    labels, tables = ccl_cli.label(rows, device="cpu")
    np.testing.assert_array_equal(labels, want)
    assert tables[0]["max"].tolist() == [9, 7]
    as_int64 = np.array(rows)  # numpy's default integer
    assert as_int64.dtype == np.int64
    np.testing.assert_array_equal(ccl_cli.label(as_int64, device="cpu")[0], want)
    big = np.array(rows, np.int64) * 2**33
    with pytest.raises(ValueError, match="do not fit in 32 bits"):
        ccl_cli.label(big, device="cpu")
    high = np.array(rows, np.int64) + 3_000_000_000  # beyond int32, within uint32
    labels, tables = ccl_cli.label(high, tau=2, background=3_000_000_000, device="cpu")
    want, _ = ccl_cli.label(high.astype(np.uint32), tau=2, background=3_000_000_000)
    np.testing.assert_array_equal(labels, want)
    assert tables[0]["max"].tolist() == [3_000_000_005, 3_000_000_007, 3_000_000_009]


@pytest.mark.parametrize("dtype", [">i2", ">u2", ">f4", ">f8", ">i8"])
def test_big_endian_arrays_are_labeled_as_their_values_say(dtype):
    # nibabel hands NIfTI volumes over in the file's byte order, often big-endian.
    rng = np.random.default_rng(7)
    values = rng.integers(0, 300, (9, 11, 13)).astype(dtype)
    assert not values.dtype.isnative
    structure = ndimage.generate_binary_structure(3, 3)
    want, count = ndimage.label(values > 150, structure)
    labels, tables = ccl_cli.label(values, threshold=150, connectivity=26, device="cpu")
    np.testing.assert_array_equal(labels, want)
    assert len(tables[0]) == count
    assert tables[0]["max"].tolist() == ndimage.maximum(values, want, range(1, count + 1)).tolist()
    image = values[4]
    labels, tables = ccl_cli.label(image, tau=40, background=None, device="cpu")
    native, _ = ccl_cli.label(image.astype(image.dtype.newbyteorder("=")), tau=40, background=None)
    np.testing.assert_array_equal(labels, native)


@pytest.mark.parametrize(
    "array", [[[1, 2], [3]], ["a", "b"], object(), [[1 + 2j]]], ids=["ragged", "text", "obj", "c"]
)
def test_what_is_not_an_array_of_numbers_is_a_type_error_saying_what_is(array):
    with pytest.raises(TypeError, match="expected an array of numbers"):
        ccl_cli.label(array, device="cpu")


@pytest.mark.parametrize("channels", [3, 4])
def test_a_colour_image_is_refused_with_what_to_do(channels):
    rng = np.random.default_rng(channels)
    colour = rng.integers(0, 2, (30, 20, channels), dtype=np.uint8)
    with pytest.raises(ValueError) as raised:
        ccl_cli.label(colour, device="cpu")
    message = str(raised.value)
    assert "colour image" in message and "convert it to gray" in message and "batch=True" in message
    for kind in (np.float64, np.uint16):  # skimage's float images, 16-bit RGB
        with pytest.raises(ValueError, match="colour image"):
            ccl_cli.label(colour.astype(kind), device="cpu")
    labels, tables = ccl_cli.label(colour, batch=True, device="cpu")  # said explicitly
    assert labels.shape == colour.shape and len(tables) == 30
    want = reference(colour, LabelParams())
    np.testing.assert_array_equal(labels, want)


def test_batch_says_what_the_array_is():
    image = sample((9, 11), seed=8)
    with pytest.raises(ValueError, match=r"expected an \(N, H, W\) batch \(batch=True\)"):
        ccl_cli.label(image, batch=True, device="cpu")
    with pytest.raises(ValueError, match=r"expected an \(H, W\) image \(batch=False\)"):
        ccl_cli.label(image[None], batch=False, device="cpu")
    with pytest.raises(ValueError, match=r"got shape \(2, 3, 4, 5\)"):
        ccl_cli.label(np.zeros((2, 3, 4, 5), np.uint8), device="cpu")
    labels, count = ccl_cli.label(image, batch=False, stats=False, device="cpu")
    assert labels.shape == image.shape and count.shape == ()


@pytest.mark.parametrize(
    ("dtype", "options"),
    [
        (np.uint8, {"background": 300}),
        (np.uint16, {"background": 70000}),
        (np.uint8, {"background": 0.5}),
        (np.int8, {"background": 200}),
        (np.uint8, {"background": -1, "invert": True}),
    ],
)
def test_a_background_the_dtype_cannot_hold_is_refused_as_the_cli_refuses_it(dtype, options):
    with pytest.raises(ValueError, match=f"background={options['background']} is not a"):
        ccl_cli.label(np.ones((4, 5), dtype), device="cpu", **options)
    ccl_cli.label(np.ones((4, 5), np.float32), device="cpu", **options)  # floats hold it


def test_stats_tables_are_tables_as_regionprops_users_expect():
    from skimage.measure import regionprops_table

    image = sample((40, 50), seed=9)
    labels, (table,) = ccl_cli.label(image, connectivity=4, device="cpu")
    props = regionprops_table(
        labels.astype(np.int64), image, properties=("label", "area", "intensity_max")
    )
    assert len(table) == len(props["label"]) > 3
    np.testing.assert_array_equal(table.label, props["label"])
    np.testing.assert_array_equal(table["area"], props["area"])
    rows = list(table)
    assert [row.label for row in rows] == list(range(1, len(table) + 1))
    assert rows[2] == table[2] and table[-1].label == len(table)
    assert rows[2].area == props["area"][2] and rows[2].max == props["intensity_max"][2]
    assert isinstance(rows[2].max, int)  # integer images: as the CSV writes it
    with pytest.raises(IndexError):
        table[len(table)]
    with pytest.raises(KeyError, match="the columns are label, area"):
        table["perimeter"]
    columns = table.to_dict()
    assert list(columns) == [
        "label", "area", "x", "y", "width", "height",
        "centroid_x", "centroid_y", "mean", "min", "max",
    ]  # fmt: skip
    frame = table.to_pandas()
    assert list(frame.columns) == list(columns) and len(frame) == len(table)
    np.testing.assert_array_equal(frame["centroid_y"].to_numpy(), props_centroid(labels, 0))


def props_centroid(labels: np.ndarray, axis: int) -> np.ndarray:
    from skimage.measure import regionprops_table

    return regionprops_table(labels.astype(np.int64), properties=("centroid",))[f"centroid-{axis}"]


@pytest.mark.parametrize(
    "options",
    [
        {"smooth": "box:1"},  # needs tau
        {"device": "cuda:99"},  # no such device here (or no CUDA at all)
        {"threshold": -1},  # every uint8 value passes: a flood
        {"background": 300},
        {"max_area": 1, "min_area": 5},
        {"connectivity": 26},  # a 2-D array
    ],
)
def test_api_errors_begin_with_the_function_and_name_no_command_line_option(options):
    with pytest.raises(Exception) as raised:
        ccl_cli.label(np.eye(4, dtype=np.uint8), **options)
    message = str(raised.value)
    assert message.startswith("ccl_cli.label: "), message
    assert "--" not in message, message
