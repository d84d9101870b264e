"""The GeoJSON text of outlines (--polygons; contract/outlines.py and docs/design.md give its
exact form), made by the compiled encoder (ccl_cli/native/src/geojson.c) in pieces of
bounded size, so that writing a large one takes no more memory than a piece."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ..contract.outlines import Outlines
from ..native import gccl_cpu

#: Bytes of text per piece.
PIECE_BYTES = 1 << 20


def geojson_pieces(outlines: Outlines) -> Iterator[bytes]:
    """The GeoJSON FeatureCollection text, piece after piece (what OutDir.write takes).

    The text is json.dumps(..., separators=(",", ":")) of the nested structure:
    compact, fixed key order, closed rings, one line ending in a newline.
    """
    vertices = np.ascontiguousarray(outlines.vertices, np.int32)
    rings, parts, features, areas = (
        np.ascontiguousarray(array, np.int64)
        for array in (
            outlines.ring_offsets,
            outlines.part_offsets,
            outlines.feature_offsets,
            outlines.areas,
        )
    )
    cursor = np.zeros(5, np.int64)  # native/src/outline.h's gccl_geojson_cursor
    while piece := gccl_cpu.geojson_piece(
        vertices, rings, parts, features, areas, cursor, PIECE_BYTES
    ):
        yield piece


def geojson(outlines: Outlines) -> bytes:
    """The whole GeoJSON text at once (geojson_pieces joined)."""
    return b"".join(geojson_pieces(outlines))
