/* Polygon outlines of a label image: the passes outline.h describes.
 *
 * Two pixels that share a side are in one part exactly when their labels are equal, so
 * the scan and the walks read the label image itself. Only where a walk meets a pixel of
 * its label diagonally, both pixels between being of other labels (a pinch), does it ask
 * the parts' union-find whether that pixel is in its part. `parts` holds each
 * foreground pixel's union-find parent + 1 and, once numbered, each part's root (its
 * first pixel) holds ROOT | the part's canonical rank; background pixels' entries are
 * never written or read.
 */
#define _GNU_SOURCE /* madvise's MADV_HUGEPAGE under -std=c11 */
#include "outline.h"

#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

/* A numbered root in `parts`; pixel indices (below 2**31) never have this bit. */
#define ROOT 0x80000000u

/* A pixel's sides a walk crossed (marks): its top (walked east) and its bottom (walked
 * west); the horizontal edges where the scan may meet a ring first. */
enum { TOP = 1, BOTTOM = 2 };

/* Directions east, south, west, north (contract/outlines.py's geometry): d + 1 turns
 * left, d + 3 right; walking d, the part's pixel is on the left and the side crossed
 * faces the step d + 3 (east: the top side). */
static const int STEP_ROW[4] = {0, 1, 0, -1};
static const int STEP_COL[4] = {1, 0, -1, 0};
/* Where an edge walked in direction d ends, from its pixel's top-left corner. */
static const int END_X[4] = {1, 1, 0, 0};
static const int END_Y[4] = {0, 1, 1, 0};

/* Pixels the scans pass over at once where nothing happens (background, rows alike). */
#define BLOCK 16

static inline uint32_t label_at(const void *labels, int wide, int64_t i) {
    return wide ? ((const uint32_t *)labels)[i] : ((const uint16_t *)labels)[i];
}

/* The label at row r, column c, 0 outside the image. */
static inline uint32_t label_or_0(const gccl_outline *o, int wide, int64_t r, int64_t c) {
    if ((uint64_t)r >= (uint64_t)o->height || (uint64_t)c >= (uint64_t)o->width) return 0;
    return label_at(o->labels, wide, r * o->width + c);
}

/* The k-th 8 bytes from p. */
static inline uint64_t word(const void *p, int k) {
    uint64_t w;
    memcpy(&w, (const char *)p + 8 * k, sizeof w);
    return w;
}

/* Whether the BLOCK labels from a equal those from b (b NULL: are all 0). */
static inline int same_block(const void *a, const void *b, int wide) {
    const int words = wide ? BLOCK / 2 : BLOCK / 4;
    uint64_t any = 0;
    if (b) {
        for (int k = 0; k < words; k++) any |= word(a, k) ^ word(b, k);
    } else {
        for (int k = 0; k < words; k++) any |= word(a, k);
    }
    return any == 0;
}

/* An array of `count` items of `size` bytes (zeroed if asked), in huge pages where the
 * system has them (as numpy's large arrays): each 4 KiB page of fresh memory costs a
 * fault, and the parts map and the marks are touched all over. NULL when out of memory. */
static void *pages(size_t count, size_t size, int zeroed) {
    void *array = zeroed ? calloc(count ? count : 1, size) : malloc(count ? count * size : 1);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const uintptr_t huge = (uintptr_t)1 << 21;
    const uintptr_t start = ((uintptr_t)array + huge - 1) & ~(huge - 1);
    const uintptr_t end = ((uintptr_t)array + count * size) & ~(huge - 1);
    if (array && end > start) madvise((void *)start, end - start, MADV_HUGEPAGE);
#endif
    return array;
}

/* Room for one more item in a growing array of `*capacity` items; 0, or -1. */
static int make_room(void **array, int64_t used, int64_t *capacity, size_t size) {
    if (used < *capacity) return 0;
    int64_t more = *capacity ? 2 * *capacity : 4096;
    void *grown = realloc(*array, (size_t)more * size);
    if (!grown) return -1;
    *array = grown;
    *capacity = more;
    return 0;
}

/* During pass 0: the root of i's set (parents are never larger than their children). */
static inline int64_t root_of(uint32_t *parts, int64_t i) {
    while ((int64_t)parts[i] - 1 != i) {
        int64_t parent = (int64_t)parts[i] - 1;
        parts[i] = parts[parent]; /* halves the path */
        i = parent;
    }
    return i;
}

/* After pass 0: the canonical rank of i's part. */
static inline uint32_t rank_of(uint32_t *parts, int64_t i) {
    while (!(parts[i] & ROOT)) {
        int64_t parent = (int64_t)parts[i] - 1;
        parts[i] = parts[parent]; /* halves the path */
        i = parent;
    }
    return parts[i] & ~ROOT;
}

/* Pass 0a: the parts' union-find over the label image and the labels' pixel counts;
 * each set's first pixel into `made` (o->starts, in raster order). Returns the number of
 * parts, GCCL_OUTLINE_BAD_LABEL or GCCL_OUTLINE_NO_MEMORY. */
static inline int64_t join_parts(gccl_outline *o, int wide, int64_t *made) {
    const int64_t height = o->height, width = o->width;
    const uint32_t count = (uint32_t)o->count;
    uint32_t *parts = o->parts;
    int64_t sets = 0, capacity = 0;
    *made = 0;
    for (int64_t y = 0; y < height; y++) {
        for (int64_t x = 0; x < width; x++) {
            const int64_t i = y * width + x;
            if (x + BLOCK <= width && same_block(wide ? (const void *)((const uint32_t *)o->labels + i)
                                                      : (const void *)((const uint16_t *)o->labels + i),
                                                 NULL, wide)) {
                x += BLOCK - 1;
                continue;
            }
            const uint32_t label = label_at(o->labels, wide, i);
            if (label == 0) continue;
            if (label > count) return GCCL_OUTLINE_BAD_LABEL;
            o->areas[label - 1]++;
            const int left = x > 0 && label_at(o->labels, wide, i - 1) == label;
            const int up = y > 0 && label_at(o->labels, wide, i - width) == label;
            if (left && up && label_at(o->labels, wide, i - width - 1) != label) {
                /* left and up meet here first, unless joined through the pixel up-left */
                int64_t a = root_of(parts, i - 1), b = root_of(parts, i - width);
                if (a != b) {
                    int64_t low = a < b ? a : b, high = a < b ? b : a;
                    parts[high] = (uint32_t)(low + 1);
                    sets--;
                }
                parts[i] = parts[i - 1];
            } else if (left) {
                parts[i] = parts[i - 1];
            } else if (up) {
                parts[i] = parts[i - width];
            } else {
                if (make_room((void **)&o->starts, *made, &capacity, sizeof *o->starts) != 0)
                    return GCCL_OUTLINE_NO_MEMORY;
                o->starts[(*made)++] = i;
                parts[i] = (uint32_t)(i + 1);
                sets++;
            }
        }
    }
    return sets;
}

/* Pass 0b: the parts numbered in raster order of their first pixel (the sets' first
 * pixels still their own parents), and each part's canonical rank (by label, then by
 * number) stored in its root. 0, or GCCL_OUTLINE_NO_MEMORY. */
static int number_parts(gccl_outline *o, int wide, int64_t made) {
    uint32_t *parts = o->parts;
    int64_t *roots = o->starts, *features = o->feature_offsets;
    uint32_t *rank = malloc((size_t)(o->part_count ? o->part_count : 1) * sizeof *rank);
    if (!rank) return GCCL_OUTLINE_NO_MEMORY;
    int64_t number = 0;
    for (int64_t k = 0; k < made; k++) {
        const int64_t i = roots[k];
        if ((int64_t)parts[i] - 1 != i) continue; /* joined to an earlier set */
        const uint32_t label = label_at(o->labels, wide, i);
        roots[number] = i;
        rank[number++] = label; /* until the ranks below */
        features[label]++;      /* parts of each label, until the sums below */
    }
    /* features[l] becomes the end of label l's parts; a cursor per label gives each
     * part its rank; then features[l] is the start of label l's parts again. */
    for (int64_t l = 1; l <= o->count; l++) features[l] += features[l - 1];
    for (int64_t p = 0; p < number; p++) rank[p] = (uint32_t)features[rank[p] - 1]++;
    for (int64_t l = o->count; l > 0; l--) features[l] = features[l - 1];
    features[0] = 0;
    for (int64_t p = 0; p < number; p++) parts[roots[p]] = ROOT | rank[p];
    free(rank);
    return GCCL_OUTLINE_OK;
}

/* Walks the ring through side `d` of pixel i (row r, column c). Counting (out NULL), it
 * marks the horizontal sides it crosses; writing, it writes its vertices from its
 * smallest (y, x) one to `out` (as x, y pairs). The side is the ring's first in raster
 * order of the grid lines: its top (d east) or its bottom (d west) on the ring's first
 * line, leftmost, so the ring's smallest vertex is where that edge starts (east) or
 * ends (west). Returns the ring's vertex count. */
static inline int64_t walk(gccl_outline *o, int wide, int64_t r, int64_t c, int d,
                           uint32_t own_rank, int32_t *out) {
    const int64_t width = o->width, first_r = r, first_c = c;
    const uint32_t own = label_at(o->labels, wide, r * width + c);
    const int first_d = d, from_start = d == 0;
    int64_t n = 0;
    if (from_start) { /* the start vertex comes first, and the walk ends at it */
        if (out) out[0] = (int32_t)c, out[1] = (int32_t)r;
        n = 1;
    }
    do {
        if (!out && d == 0) o->marks[r * width + c] |= TOP;
        if (!out && d == 2) o->marks[r * width + c] |= BOTTOM;
        const int64_t x = c + END_X[d], y = r + END_Y[d];
        const int right = (d + 3) & 3;
        const int64_t ahead_r = r + STEP_ROW[d], ahead_c = c + STEP_COL[d];
        const int64_t right_r = ahead_r + STEP_ROW[right], right_c = ahead_c + STEP_COL[right];
        const uint32_t ahead = label_or_0(o, wide, ahead_r, ahead_c);
        int turn = 1;
        if (label_or_0(o, wide, right_r, right_c) == own &&
            (ahead == own || rank_of(o->parts, right_r * width + right_c) == own_rank)) {
            r = right_r, c = right_c, d = right; /* the pixel ahead-right: turn right */
        } else if (ahead == own) {
            r = ahead_r, c = ahead_c, turn = 0; /* the pixel ahead: straight on */
        } else {
            d = (d + 1) & 3; /* the same pixel's next side: turn left */
        }
        if (turn && !(from_start && r == first_r && c == first_c && d == first_d)) {
            if (out) out[2 * n] = (int32_t)x, out[2 * n + 1] = (int32_t)y;
            n++;
        }
    } while (r != first_r || c != first_c || d != first_d);
    return n;
}

/* Pass 1's ring: counted for its part, and its first side kept for pass 2 (pixel index
 * * 2, + 1 for a bottom side). 0, or GCCL_OUTLINE_NO_MEMORY. */
static inline int count_ring(gccl_outline *o, int wide, int64_t r, int64_t c, int d,
                             int64_t *capacity) {
    const int64_t i = r * o->width + c;
    if (make_room((void **)&o->starts, o->ring_count, capacity, sizeof *o->starts) != 0)
        return GCCL_OUTLINE_NO_MEMORY;
    o->starts[o->ring_count++] = 2 * i + (d == 2);
    const uint32_t q = rank_of(o->parts, i);
    o->ring_next[q]++;
    o->vertex_next[q] += walk(o, wide, r, c, d, q, NULL);
    return GCCL_OUTLINE_OK;
}

/* Pass 1: the scan of the horizontal grid lines, walking each ring where it first meets
 * one of the ring's unmarked sides. `zeros`: a row of background. */
static inline int scan(gccl_outline *o, int wide, const void *zeros) {
    const int64_t height = o->height, width = o->width, bytes = wide ? 4 : 2;
    int64_t capacity = 0;
    for (int64_t y = 0; y <= height; y++) {
        const char *above = y > 0 ? (const char *)o->labels + (y - 1) * width * bytes : zeros;
        const char *below = y < height ? (const char *)o->labels + y * width * bytes : zeros;
        for (int64_t x = 0; x < width; x++) {
            if (x + BLOCK <= width && same_block(above + x * bytes, below + x * bytes, wide)) {
                x += BLOCK - 1;
                continue;
            }
            const uint32_t a = label_at(above, wide, x), b = label_at(below, wide, x);
            if (a == b) continue;
            int code = GCCL_OUTLINE_OK;
            if (b && !(o->marks[y * width + x] & TOP)) code = count_ring(o, wide, y, x, 0, &capacity);
            if (code == GCCL_OUTLINE_OK && a && !(o->marks[(y - 1) * width + x] & BOTTOM))
                code = count_ring(o, wide, y - 1, x, 2, &capacity);
            if (code != GCCL_OUTLINE_OK) return code;
        }
    }
    return GCCL_OUTLINE_OK;
}

/* Passes 0 and 1 for labels of one width. */
static inline int count_passes(gccl_outline *o, int wide) {
    const size_t pixels = (size_t)(o->height * o->width);
    o->parts = pages(pixels, sizeof *o->parts, 0); /* read only where written */
    if (!o->parts) return GCCL_OUTLINE_NO_MEMORY;
    int64_t made;
    const int64_t parts = join_parts(o, wide, &made);
    if (parts < 0) return (int)parts;
    o->part_count = parts;
    if (number_parts(o, wide, made) != GCCL_OUTLINE_OK) return GCCL_OUTLINE_NO_MEMORY;
    free(o->starts); /* the roots: ranked now */
    o->starts = NULL;
    o->ring_next = calloc((size_t)(parts ? parts : 1), sizeof *o->ring_next);
    o->vertex_next = calloc((size_t)(parts ? parts : 1), sizeof *o->vertex_next);
    o->marks = pages(pixels, sizeof *o->marks, 1);
    void *zeros = calloc((size_t)(o->width ? o->width : 1), 4);
    int code = GCCL_OUTLINE_NO_MEMORY;
    if (o->ring_next && o->vertex_next && o->marks && zeros) code = scan(o, wide, zeros);
    free(zeros);
    free(o->marks);
    o->marks = NULL;
    for (int64_t q = 0; q < parts; q++) o->vertex_count += o->vertex_next[q];
    return code;
}

int gccl_outline_count(gccl_outline *o) {
    o->ring_count = o->vertex_count = o->part_count = 0;
    memset(o->areas, 0, (size_t)o->count * sizeof *o->areas);
    memset(o->feature_offsets, 0, (size_t)(o->count + 1) * sizeof *o->feature_offsets);
    return o->label_bytes == 4 ? count_passes(o, 1) : count_passes(o, 0);
}

/* Pass 2 for labels of one width. */
static inline void write_pass(gccl_outline *o, int wide) {
    /* ring_next and vertex_next: counts per part, then where each part's next ring goes */
    int64_t rings = 0, vertices = 0;
    o->part_offsets[0] = 0;
    o->ring_offsets[0] = 0;
    for (int64_t q = 0; q < o->part_count; q++) {
        const int64_t ring_total = o->ring_next[q], vertex_total = o->vertex_next[q];
        o->ring_next[q] = rings;
        o->vertex_next[q] = vertices;
        rings += ring_total;
        vertices += vertex_total;
        o->part_offsets[q + 1] = rings;
    }
    /* the rings in the order pass 1 met them (by start vertex), each into its part's
     * next place */
    for (int64_t k = 0; k < o->ring_count; k++) {
        const int64_t i = o->starts[k] >> 1;
        const int d = o->starts[k] & 1 ? 2 : 0;
        const uint32_t q = rank_of(o->parts, i);
        const int64_t slot = o->ring_next[q]++, start = o->vertex_next[q];
        o->vertex_next[q] += walk(o, wide, i / o->width, i % o->width, d, q,
                                  o->vertices + 2 * start);
        o->ring_offsets[slot + 1] = o->vertex_next[q];
    }
}

void gccl_outline_write(gccl_outline *o) {
    if (o->label_bytes == 4) {
        write_pass(o, 1);
    } else {
        write_pass(o, 0);
    }
}

void gccl_outline_free(gccl_outline *o) {
    free(o->parts);
    free(o->marks);
    free(o->ring_next);
    free(o->vertex_next);
    free(o->starts);
    o->parts = NULL;
    o->marks = NULL;
    o->ring_next = o->vertex_next = o->starts = NULL;
}
