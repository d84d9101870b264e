/* Polygon outlines of a label image (--polygons) in the canonical form of
 * ccl_cli/contract/outlines.py, and their GeoJSON text.
 *
 * Tracing (outline.c) runs in three passes over the image and keeps memory bounded per
 * pixel: every array it makes has one element per pixel, part, ring, vertex or label,
 * and an image has at most one part and one ring per pixel and four vertices per pixel
 * (a vertex ends a boundary edge, and a pixel has four sides).
 *  0. parts: the 4-connected parts of each label (label equality) by union-find, numbered
 *     1..P in raster order of their first pixel; the pixel count of every label; each
 *     part's canonical rank (by label, then part number).
 *  1. count: every ring is found where a raster scan of the horizontal grid lines first
 *     meets one of its edges, which ends or starts at its smallest (y, x) vertex, and
 *     is walked once, marking its horizontal edges; rings and vertices are counted per
 *     part.
 *  2. write: the same walks, in the order pass 1 met the rings, write each ring's
 *     vertices into its part's place. A part's rings are met in the order of their
 *     start vertices, its exterior first (its start is the part's first pixel's
 *     corner), which is the canonical order within a part.
 */
#ifndef GCCL_OUTLINE_H
#define GCCL_OUTLINE_H

#include <stdint.h>

/* One label image's tracing: inputs, working arrays and sizes, outputs. */
typedef struct {
    const void *labels;  /* (height, width) labels 0..count, 0 = background */
    int64_t label_bytes; /* 2 (uint16) or 4 (uint32) */
    int64_t height, width, count; /* height * width < 2**31 */
    /* working arrays (gccl_outline_count makes them, gccl_outline_free frees them) */
    uint32_t *parts;      /* (height, width) the parts' union-find (outline.c) */
    uint8_t *marks;       /* (height, width) horizontal sides a walk crossed */
    int64_t *ring_next;   /* (P) by rank: rings counted, then the next ring's slot */
    int64_t *vertex_next; /* (P) by rank: vertices counted, then the next ring's first */
    int64_t *starts;      /* each set's first pixel, then where pass 1 met each ring */
    /* sizes, known after gccl_outline_count */
    int64_t part_count, ring_count, vertex_count;
    /* outputs (Outlines' arrays): areas and feature_offsets filled by gccl_outline_count,
     * the rest by gccl_outline_write */
    int64_t *areas;           /* (count) */
    int64_t *feature_offsets; /* (count + 1) */
    int32_t *vertices;        /* (vertex_count, 2) x, y */
    int64_t *ring_offsets;    /* (ring_count + 1) */
    int64_t *part_offsets;    /* (part_count + 1) */
} gccl_outline;

enum { GCCL_OUTLINE_OK = 0, GCCL_OUTLINE_NO_MEMORY = -1, GCCL_OUTLINE_BAD_LABEL = -2 };

/* Passes 0 and 1: the sizes, areas and feature_offsets (a label without pixels gets no
 * part: feature_offsets repeats). GCCL_OUTLINE_NO_MEMORY, or GCCL_OUTLINE_BAD_LABEL when
 * a label exceeds count; the working arrays are made here. */
int gccl_outline_count(gccl_outline *o);
/* Pass 2: vertices, ring_offsets and part_offsets, after a successful count. */
void gccl_outline_write(gccl_outline *o);
/* Frees the working arrays (any time; twice is harmless). */
void gccl_outline_free(gccl_outline *o);

/* Where the GeoJSON encoder stands between pieces (zeroed at the start). */
typedef struct {
    int64_t stage, feature, part, ring, vertex;
} gccl_geojson_cursor;

/* Room a piece needs at least: one feature's opening or a few vertices. */
#define GCCL_GEOJSON_MIN_PIECE 512

/* The next bytes (at most `capacity`, at least GCCL_GEOJSON_MIN_PIECE) of the GeoJSON
 * FeatureCollection text of the outlines into `out`: what json.dumps(..., separators=
 * (",", ":")) writes for the nested lists, one line ending in a newline. Returns the
 * bytes written, 0 once the text is complete, -1 when the offsets are not those of
 * Outlines (out of range, decreasing, or an empty ring, part or feature). */
int64_t gccl_geojson_piece(const int32_t *vertices, int64_t vertex_count,
                           const int64_t *ring_offsets, int64_t ring_count,
                           const int64_t *part_offsets, int64_t part_count,
                           const int64_t *feature_offsets, const int64_t *areas,
                           int64_t feature_count, gccl_geojson_cursor *cursor, char *out,
                           int64_t capacity);

#endif
