/* The GeoJSON text of outlines (outline.h), in pieces: a cursor says where the text
 * stands, so that a long text is written piece by piece in bounded memory. The text is
 * json.dumps(..., separators=(",", ":")) of
 *   {"type": "FeatureCollection", "features": [
 *     {"type": "Feature", "properties": {"label": k + 1, "area": areas[k]},
 *      "geometry": {"type": "Polygon", "coordinates": polygon}          (one part)
 *               or {"type": "MultiPolygon", "coordinates": [polygon, ...]}}, ...]}
 * with a polygon [ring, ...], a ring [[x, y], ..., [x0, y0]] (its first vertex again),
 * and a newline. */
#include <stdint.h>
#include <string.h>

#include "outline.h"

/* Where the cursor stands: before the text, at a feature, a part or a ring of the
 * feature, at a vertex of the ring, or after the text. */
enum { AT_START, AT_FEATURE, AT_PART, AT_RING, AT_VERTEX, AT_END };

/* Most bytes one step below writes: a feature's opening with two 20-digit numbers. */
#define STEP_BYTES 192
_Static_assert(GCCL_GEOJSON_MIN_PIECE >= 2 * STEP_BYTES, "a piece holds a step");

static const char PAIRS[] = "00010203040506070809101112131415161718192021222324252627282930313233"
                            "34353637383940414243444546474849505152535455565758596061626364656667"
                            "6869707172737475767778798081828384858687888990919293949596979899";

static inline char *put_text(char *p, const char *text) {
    size_t n = strlen(text);
    memcpy(p, text, n);
    return p + n;
}

/* The decimal digits of v. */
static inline char *put_unsigned(char *p, uint64_t v) {
    int n = 1;
    for (uint64_t t = v; t >= 10; t /= 10) n++;
    char *end = p + n;
    while (v >= 100) {
        unsigned pair = (unsigned)(v % 100) * 2;
        v /= 100;
        *--end = PAIRS[pair + 1];
        *--end = PAIRS[pair];
    }
    if (v >= 10) {
        *--end = PAIRS[v * 2 + 1];
        *--end = PAIRS[v * 2];
    } else {
        *--end = (char)('0' + v);
    }
    return p + n;
}

static inline char *put_signed(char *p, int64_t v) {
    if (v < 0) {
        *p++ = '-';
        return put_unsigned(p, (uint64_t)0 - (uint64_t)v);
    }
    return put_unsigned(p, (uint64_t)v);
}

static inline char *put_vertex(char *p, const int32_t *vertex) {
    *p++ = '[';
    p = put_signed(p, vertex[0]);
    *p++ = ',';
    p = put_signed(p, vertex[1]);
    *p++ = ']';
    return p;
}

/* offsets[i] < offsets[i + 1] <= limit, for an i that has a successor (i < items). */
static inline int spans(const int64_t *offsets, int64_t i, int64_t items, int64_t limit) {
    return i >= 0 && i < items && offsets[i] >= 0 && offsets[i] < offsets[i + 1] &&
           offsets[i + 1] <= limit;
}

int64_t gccl_geojson_piece(const int32_t *vertices, int64_t vertex_count,
                           const int64_t *ring_offsets, int64_t ring_count,
                           const int64_t *part_offsets, int64_t part_count,
                           const int64_t *feature_offsets, const int64_t *areas,
                           int64_t feature_count, gccl_geojson_cursor *cursor, char *out,
                           int64_t capacity) {
    gccl_geojson_cursor c = *cursor;
    char *p = out, *const stop = out + capacity - STEP_BYTES;
    /* Where the cursor stands inside a feature, its feature, part and ring must span
     * (checked on entering each, and again here for a cursor given back). */
    if (c.stage >= AT_PART && c.stage <= AT_VERTEX &&
        !(spans(feature_offsets, c.feature, feature_count, part_count) &&
          c.part >= feature_offsets[c.feature] && c.part <= feature_offsets[c.feature + 1]))
        return -1;
    if (c.stage >= AT_RING && c.stage <= AT_VERTEX &&
        !(spans(part_offsets, c.part, part_count, ring_count) &&
          c.ring >= part_offsets[c.part] && c.ring <= part_offsets[c.part + 1]))
        return -1;
    if (c.stage == AT_VERTEX &&
        !(spans(ring_offsets, c.ring, ring_count, vertex_count) &&
          c.vertex >= ring_offsets[c.ring] && c.vertex <= ring_offsets[c.ring + 1]))
        return -1;
    while (p <= stop && c.stage != AT_END) {
        switch (c.stage) {
        case AT_START:
            p = put_text(p, "{\"type\":\"FeatureCollection\",\"features\":[");
            c.stage = AT_FEATURE;
            c.feature = 0;
            break;
        case AT_FEATURE: {
            if (c.feature == feature_count) {
                p = put_text(p, "]}\n");
                c.stage = AT_END;
                break;
            }
            if (c.feature < 0 || c.feature > feature_count ||
                !spans(feature_offsets, c.feature, feature_count, part_count))
                return -1;
            const int multi = feature_offsets[c.feature + 1] - feature_offsets[c.feature] > 1;
            if (c.feature) *p++ = ',';
            p = put_text(p, "{\"type\":\"Feature\",\"properties\":{\"label\":");
            p = put_signed(p, c.feature + 1);
            p = put_text(p, ",\"area\":");
            p = put_signed(p, areas[c.feature]);
            p = put_text(p, multi ? "},\"geometry\":{\"type\":\"MultiPolygon\",\"coordinates\":["
                                  : "},\"geometry\":{\"type\":\"Polygon\",\"coordinates\":");
            c.part = feature_offsets[c.feature];
            c.stage = AT_PART;
            break;
        }
        case AT_PART:
            if (c.part == feature_offsets[c.feature + 1]) {
                const int multi = c.part - feature_offsets[c.feature] > 1;
                p = put_text(p, multi ? "]}}" : "}}");
                c.feature++;
                c.stage = AT_FEATURE;
                break;
            }
            if (!spans(part_offsets, c.part, part_count, ring_count)) return -1;
            if (c.part != feature_offsets[c.feature]) *p++ = ',';
            *p++ = '[';
            c.ring = part_offsets[c.part];
            c.stage = AT_RING;
            break;
        case AT_RING:
            if (c.ring == part_offsets[c.part + 1]) {
                *p++ = ']';
                c.part++;
                c.stage = AT_PART;
                break;
            }
            if (!spans(ring_offsets, c.ring, ring_count, vertex_count)) return -1;
            if (c.ring != part_offsets[c.part]) *p++ = ',';
            *p++ = '[';
            c.vertex = ring_offsets[c.ring];
            c.stage = AT_VERTEX;
            break;
        case AT_VERTEX: {
            const int64_t end = ring_offsets[c.ring + 1];
            while (c.vertex < end && p <= stop) {
                p = put_vertex(p, vertices + 2 * c.vertex++);
                *p++ = ',';
            }
            if (c.vertex == end && p <= stop) { /* closed by its first vertex */
                p = put_vertex(p, vertices + 2 * ring_offsets[c.ring]);
                *p++ = ']';
                c.ring++;
                c.stage = AT_RING;
            }
            break;
        }
        default:
            return -1;
        }
    }
    *cursor = c;
    return p - out;
}
