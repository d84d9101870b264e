"""--polygons on the CPU: the outlines checked against the pixels, shapely, rasterio and a
reference tracer.

For every kept component: the geometry is valid (shapely), its area is the
pixel count, the pixel centres inside it are exactly the component's pixels,
rings follow the canonical rules (orientation, start vertex, no collinear
vertices, ordering), where rasterio is installed the geometry equals the
union of rasterio.features.shapes' polygons of that label, and the arrays
equal those of the plain-Python tracer of outline_reference.py. The GeoJSON
text equals json.dumps of the nested lists.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from outline_reference import reference_outlines
from polygon_cases import POLYGON_CASES
from shapes import checkerboard

from ccl_cli.backends.cpu.backend import CpuBackend
from ccl_cli.backends.cpu.outlines import outlines as cpu_outlines
from ccl_cli.contract.outlines import Outlines, split_batch
from ccl_cli.contract.params import LabelParams
from ccl_cli.io.geojson import PIECE_BYTES, geojson, geojson_pieces

shapely = pytest.importorskip("shapely")
geometry = pytest.importorskip("shapely.geometry")


def traced(values: np.ndarray, params: LabelParams) -> tuple[np.ndarray, Outlines]:
    """(labels, outlines) of one image from the CPU backend."""
    result = CpuBackend(threads=1).label(values[np.newaxis], params)
    assert result.polygons is not None and len(result.polygons) == 1
    return result.labels[0], result.polygons[0]


def signed_area(ring: np.ndarray) -> int:
    """Twice the shoelace area of an open ring of (x, y) integers."""
    x, y = ring[:, 0].astype(np.int64), ring[:, 1].astype(np.int64)
    return int(np.sum(x * np.roll(y, -1) - np.roll(x, -1) * y))


def yx(vertex: np.ndarray) -> tuple[int, int]:
    return int(vertex[1]), int(vertex[0])


def reference_geojson(outlines: Outlines) -> bytes:
    """The GeoJSON text by json.dumps of the nested lists (what the fast encoder must match)."""
    features = []
    for k in range(len(outlines)):
        polygons = [
            [[*ring.tolist(), ring[0].tolist()] for ring in polygon]
            for polygon in outlines.rings(k)
        ]
        geometry = (
            {"type": "Polygon", "coordinates": polygons[0]}
            if len(polygons) == 1
            else {"type": "MultiPolygon", "coordinates": polygons}
        )
        properties = {"label": k + 1, "area": int(outlines.areas[k])}
        features.append({"type": "Feature", "properties": properties, "geometry": geometry})
    collection = {"type": "FeatureCollection", "features": features}
    return json.dumps(collection, separators=(",", ":")).encode() + b"\n"


def assert_equals_reference(labels: np.ndarray, outlines: Outlines) -> None:
    """The arrays (values and dtypes) are the reference tracer's."""
    want = reference_outlines(labels, len(outlines))
    for name, array in want.items():
        got = getattr(outlines, name)
        assert got.dtype == array.dtype, name
        np.testing.assert_array_equal(got, array, err_msg=name)


def assert_outlines_describe(labels: np.ndarray, outlines: Outlines) -> None:
    """Every rule of the canonical form, and the geometry against the pixels."""
    count = int(labels.max(initial=0))
    assert len(outlines) == count
    assert_equals_reference(labels, outlines)
    text = geojson(outlines)
    assert text == reference_geojson(outlines)
    collection = json.loads(text)
    assert collection["type"] == "FeatureCollection"
    assert len(collection["features"]) == count
    height, width = labels.shape
    rows, cols = np.indices(labels.shape)
    centres_x, centres_y = (cols + 0.5).ravel(), (rows + 0.5).ravel()
    for k, feature in enumerate(collection["features"]):
        label = k + 1
        mask = labels == label
        assert feature["properties"] == {"label": label, "area": int(mask.sum())}
        polygons = outlines.rings(k)
        kind = "Polygon" if len(polygons) == 1 else "MultiPolygon"
        assert feature["geometry"]["type"] == kind
        shape = geometry.shape(feature["geometry"])
        assert shape.is_valid, shapely.is_valid_reason(shape)
        assert shape.area == mask.sum()
        inside = shapely.contains_xy(shape, centres_x, centres_y).reshape(labels.shape)
        np.testing.assert_array_equal(inside, mask)
        exterior_starts = [yx(polygon[0][0]) for polygon in polygons]
        assert exterior_starts == sorted(exterior_starts)
        for polygon in polygons:
            hole_starts = [yx(ring[0]) for ring in polygon[1:]]
            assert hole_starts == sorted(hole_starts)
            for index, ring in enumerate(polygon):
                assert (signed_area(ring) > 0) == (index == 0)
                assert yx(ring[0]) == min(yx(v) for v in ring)
                before, after = np.roll(ring, 1, axis=0), np.roll(ring, -1, axis=0)
                turn = (ring - before)[:, 0] * (after - ring)[:, 1] - (ring - before)[:, 1] * (
                    after - ring
                )[:, 0]
                assert np.all(turn != 0), "collinear or repeated vertex"
                assert ring[:, 0].min() >= 0 and ring[:, 0].max() <= width
                assert ring[:, 1].min() >= 0 and ring[:, 1].max() <= height


def assert_matches_rasterio(labels: np.ndarray, outlines: Outlines) -> None:
    """Each label's geometry equals the union of GDAL's polygons of that value."""
    features = pytest.importorskip("rasterio.features")
    pieces: dict[int, list[object]] = {}
    for shape, value in features.shapes(labels.astype(np.int32), mask=labels > 0, connectivity=4):
        pieces.setdefault(int(value), []).append(geometry.shape(shape))
    assert sorted(pieces) == list(range(1, len(outlines) + 1))
    text = json.loads(geojson(outlines))
    for feature in text["features"]:
        ours = geometry.shape(feature["geometry"])
        theirs = shapely.union_all(pieces[feature["properties"]["label"]])
        assert ours.equals(theirs)


@pytest.mark.parametrize("connectivity", [4, 8])
@pytest.mark.parametrize("name", POLYGON_CASES)
def test_nasty_cases(name: str, connectivity: int) -> None:
    params = LabelParams(tau=0, connectivity=connectivity, polygons=True)
    labels, outlines = traced(POLYGON_CASES[name], params)
    assert_outlines_describe(labels, outlines)
    assert_matches_rasterio(labels, outlines)


@st.composite
def label_images(draw: st.DrawFn) -> tuple[np.ndarray, LabelParams]:
    """Small images of a few values (tau 0: labels touching labels) or binary masks."""
    height, width = draw(st.integers(1, 14)), draw(st.integers(1, 14))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    values = rng.integers(0, draw(st.integers(2, 4)), (height, width)).astype(np.uint8)
    tau = draw(st.sampled_from([None, 0]))
    params = LabelParams(
        tau=tau,
        connectivity=draw(st.sampled_from([4, 8])),
        min_area=draw(st.sampled_from([0, 0, 2, 4])),
        polygons=True,
    )
    return values, params


@pytest.mark.slow
@settings(max_examples=300)
@given(label_images())
def test_random_images(case: tuple[np.ndarray, LabelParams]) -> None:
    labels, outlines = traced(*case)
    assert_outlines_describe(labels, outlines)
    assert_matches_rasterio(labels, outlines)


def test_min_area_removed_components_have_no_feature() -> None:
    values = np.array([[1, 0, 1, 1], [0, 0, 1, 1], [1, 0, 0, 0]], np.uint8)
    labels, outlines = traced(values, LabelParams(connectivity=4, min_area=2, polygons=True))
    assert labels.max() == 1 and len(outlines) == 1
    assert json.loads(geojson(outlines))["features"][0]["geometry"] == {
        "type": "Polygon",
        "coordinates": [[[2, 0], [4, 0], [4, 2], [2, 2], [2, 0]]],
    }


def test_a_component_without_outline_is_an_error() -> None:
    """The batch check both backends' arrays pass: every component has a polygon."""
    labels = np.array([[1, 0, 2]], np.uint32)
    assert len(cpu_outlines(labels, 2)) == 2
    with pytest.raises(AssertionError, match="every kept component"):
        cpu_outlines(labels, 3)
    with pytest.raises(ValueError, match="exceeds count"):
        cpu_outlines(labels, 1)
    vertices = np.zeros((4, 2), np.int32)
    offsets = np.array([0, 4], np.int64)
    missing = np.array([0, -1, 1], np.int64)  # the CUDA backend's mark of a feature never seen
    with pytest.raises(AssertionError, match="every kept component"):
        split_batch(
            vertices, offsets, np.array([0, 1]), missing, np.ones(2, np.int64), np.array([0, 2])
        )


def test_no_polygons_unless_asked() -> None:
    result = CpuBackend().label(np.ones((1, 3, 3), np.uint8), LabelParams())
    assert result.polygons is None


def test_geojson_text_with_wide_coordinates() -> None:
    values = np.zeros((3, 123457), np.uint8)
    values[1, [0, 9, 10, 99, 100, 999, 1000, 9999, 10000, 99999, 100000, 123456]] = 1
    values[0, 123450:] = 1
    labels, outlines = traced(values, LabelParams(connectivity=4, polygons=True))
    assert geojson(outlines) == reference_geojson(outlines)
    assert len(outlines) == int(labels.max()) == 7


@pytest.mark.parametrize("shape", [(1, 1), (1, 57), (63, 1), (40, 70), (97, 131)])
@pytest.mark.parametrize("values", [2, 5])
def test_larger_random_label_images_equal_the_reference(
    shape: tuple[int, int], values: int
) -> None:
    """Labels touching labels (tau 0, 8-connectivity: many diagonal pinches) and binary
    masks, traced from uint16 and uint32 labels alike."""
    rng = np.random.default_rng(shape[0] * shape[1] + values)
    image = rng.integers(0, values, shape).astype(np.uint8)
    for params in (LabelParams(tau=0, polygons=True), LabelParams(polygons=True)):
        labels, outlines = traced(image, params)
        assert_equals_reference(labels, outlines)
        count = len(outlines)
        for dtype in (np.uint16, np.uint32):
            assert cpu_outlines(labels.astype(dtype), count).equals(outlines)


def test_geojson_in_several_pieces_is_one_text() -> None:
    """A text longer than a piece: the pieces join to exactly json.dumps' text."""
    checker = checkerboard(200, 200).astype(np.uint8)
    labels, outlines = traced(checker, LabelParams(connectivity=4, polygons=True))
    pieces = list(geojson_pieces(outlines))
    assert len(pieces) > 2 and all(len(piece) <= PIECE_BYTES for piece in pieces)
    assert b"".join(pieces) == reference_geojson(outlines)
    assert_matches_rasterio(labels, outlines)


def test_geojson_refuses_offsets_that_are_not_outlines() -> None:
    """Arrays that do not describe outlines fail with ValueError, never read out of bounds."""
    _, good = traced(np.array([[1, 0, 1]], np.uint8), LabelParams(polygons=True))
    bad = [
        {"ring_offsets": np.array([0, 4, 99], np.int64)},  # past the vertices
        {"part_offsets": np.array([0, 1, 1], np.int64)},  # an empty part
        {"feature_offsets": np.array([0, 5], np.int64), "areas": np.ones(1, np.int64)},
        {"ring_offsets": np.array([0, 8, 4], np.int64)},  # decreasing
    ]
    for change in bad:
        fields = {name: getattr(good, name) for name in Outlines.__dataclass_fields__}
        with pytest.raises(ValueError, match="not Outlines"):
            geojson(Outlines(**{**fields, **change}))
