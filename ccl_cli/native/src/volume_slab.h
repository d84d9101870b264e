/* What the files of the volume engine share (volume.h says how a batch of volumes is
 * labeled): the slab's rows of foreground bits and their runs, the neighbouring rows of
 * each connectivity, and the slab memory's owner (volume_memory.c). volumes.py calls each
 * entry point on ranges lo..hi-1 of tasks or volumes from several threads at once; every
 * call writes only its own part of the arrays and of the slabs' state, so the ranges change
 * no result. */
#ifndef GCCL_VOLUME_SLAB_H
#define GCCL_VOLUME_SLAB_H

#include <stddef.h>
#include <stdint.h>

#include "pool.h"
#include "rows.h"
#include "volume.h"

/* Whether the first pass counts each label's voxels: min-area, the selection and a float
 * volume's statistics (its float-mean shift) need each component's. */
static inline int counts_voxels(const gccl_volumes *b) {
    return b->min_area > 1 || b->selecting || (b->statistics && b->floating);
}

/* Volume n's new labels by component (kept_id, from 1), or NULL where every component
 * keeps its number (nothing that counts voxels can drop one: kept_of is then c itself). */
static inline const int64_t *kept_ids(const gccl_volumes *b, int64_t n) {
    return counts_voxels(b) ? b->kept_id + b->component_first[n] - 1 : NULL;
}

/* The new label of component c (kept_ids: its volume's). */
static inline int64_t kept_of(const int64_t *kept_id, int64_t c) {
    return kept_id ? kept_id[c] : c;
}

/* Whether the first pass keeps each label's largest finite |v| (float volumes' statistics:
 * their float-mean shift). */
static inline int keeps_magnitude(const gccl_volumes *b) { return b->statistics && b->floating; }

/* One run of a row: voxels [start, end) and the label they took. */
typedef struct {
    int32_t start, end, label;
} gccl_run;

/* Voxel index of row (z, y) of volume n. */
static inline int64_t row_index(const gccl_volumes *b, int64_t n, int64_t z, int64_t y) {
    return ((n * b->depth + z) * b->height + y) * b->width;
}

/* A slab's foreground as bits (gccl_slab's bits): row r's voxel x is bit x + 64 of words
 * bits + r * stride, stride = voxel words + 1, so that a word of 0s lies before and after
 * every row (shared by neighbouring rows, one more at each end of the slab). 64 bits from
 * any x in -64..width are read without a bounds check; past width + 1 they may be the next
 * row's, which every reader masks off. */
static inline int64_t voxel_words(int64_t width) { return (width + 63) >> 6; }
static inline int64_t bit_stride(int64_t width) { return voxel_words(width) + 1; }

/* Row r (of the slab's rows, plane by plane) of a slab's bits. */
static inline uint64_t *bit_row(const gccl_slab *slab, int64_t width, int64_t r) {
    return slab->bits + r * bit_stride(width);
}

/* The first run of set bits at or after voxel `from` of a row's bits (voxels: its words,
 * 0 past width): [*s, *e). Returns 0 where there is none. */
static inline int next_run(const uint64_t *voxels, int64_t words, int64_t from, int64_t *s,
                           int64_t *e) {
    int64_t w = from >> 6;
    if (w >= words) return 0;
    uint64_t word = voxels[w] & (~UINT64_C(0) << (from & 63));
    while (!word) {
        if (++w == words) return 0;
        word = voxels[w];
    }
    *s = 64 * w + __builtin_ctzll(word);
    word = ~voxels[w] & (~UINT64_C(0) << (*s & 63));
    while (!word) {
        if (++w == words) {
            *e = 64 * words;
            return 1;
        }
        word = ~voxels[w];
    }
    *e = 64 * w + __builtin_ctzll(word);
    return 1;
}

/* The runs of set bits of a row's bits (voxels: its words, 0 past width) into runs (their
 * labels left as they are); returns their number (at most (width + 1) / 2). */
static inline int64_t bit_runs(const uint64_t *voxels, int64_t words, gccl_run *runs) {
    int64_t k = 0;
    uint64_t carry = 0; /* whether the voxel before is set */
    for (int64_t w = 0; w <= words; w++) {
        const uint64_t word = w < words ? voxels[w] : 0; /* a word past: the last end */
        uint64_t edges = word ^ ((word << 1) | carry);  /* each run's start and end */
        carry = word >> 63;
        while (edges) {
            const int32_t x = (int32_t)(64 * w + __builtin_ctzll(edges));
            edges &= edges - 1;
            if ((word >> (x & 63)) & 1) {
                runs[k].start = x;
            } else {
                runs[k++].end = x;
            }
        }
    }
    return k;
}

/* The bytes of a slab's row_labels and bits of `rows` rows. */
static inline size_t row_label_bytes(int64_t rows) { return sizeof(int32_t) * (size_t)rows; }
static inline size_t bits_bytes(int64_t rows, int64_t width) {
    return sizeof(uint64_t) * (size_t)(rows * bit_stride(width) + 2);
}

/* A row before the current one whose runs the current row's runs may touch: the plane
 * (0: this one, -1: the one before) and row (-1, 0, +1) it is at, and how far across
 * (0: face to face, 1: diagonally too). */
typedef struct {
    int dz, dy, grow;
} neighbour;

#define NEAR_ROWS 4

/* The neighbouring rows of `connectivity` (6, 18 or 26); returns how many. */
static inline int neighbours_of(int64_t connectivity, const neighbour **list) {
    static const neighbour NEIGHBOURS_6[] = {{0, -1, 0}, {-1, 0, 0}};
    static const neighbour NEIGHBOURS_18[] = {{0, -1, 1}, {-1, -1, 0}, {-1, 0, 1}, {-1, 1, 0}};
    static const neighbour NEIGHBOURS_26[] = {{0, -1, 1}, {-1, -1, 1}, {-1, 0, 1}, {-1, 1, 1}};
    if (connectivity == 6) {
        *list = NEIGHBOURS_6;
        return 2;
    }
    *list = connectivity == 18 ? NEIGHBOURS_18 : NEIGHBOURS_26;
    return 4;
}

/* The slab memory (volume_memory.c): blocks kept between slabs and calls, within the
 * engine's bound (gccl_set_spare_limit). */

/* A block of at least `bytes`: a kept one that holds them, else a new one (NULL out of
 * memory); *got = its size. */
void *gccl_obtain(size_t bytes, size_t *got);

/* A block of `bytes` (or NULL) given back: kept for a later slab where the bound allows,
 * else freed. */
void gccl_release(void *block, size_t bytes);

/* The slab's label arrays grown to twice their room. Returns 0, or -1 out of memory. */
int gccl_grow_labels(gccl_slab *slab, int magnitudes);

/* A slab of `rows` rows its row_labels and bits. Returns 0, or -1 out of memory. */
int gccl_start_slab(gccl_slab *slab, int64_t rows, int64_t width);

#endif
