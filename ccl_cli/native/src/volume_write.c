/* The volume engine's last pass (volume.h): every voxel's final label written and, with
 * statistics, the kept components' records gathered run by run, added across seams and
 * read out as the table's columns. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "volume_slab.h"

_Static_assert(sizeof(gccl_volume_record) % sizeof(int64_t) == 0,
               "a record is whole int64 words (the host allocates records as int64)");

/* The statistics columns of a batch's kept components (gccl_volumes' ints, floats and
 * sums), row r the r-th kept component of the batch. */
typedef struct {
    int64_t *area, *x, *y, *z, *width, *height, *depth;
    double *centroid_x, *centroid_y, *centroid_z, *mean, *v_min, *v_max;
    int64_t *sums;
} table_columns;

static table_columns columns_of(const gccl_volumes *b) {
    const int64_t rows = b->kept_first[b->count];
    table_columns c;
    c.area = b->ints, c.x = c.area + rows, c.y = c.x + rows, c.z = c.y + rows;
    c.width = c.z + rows, c.height = c.width + rows, c.depth = c.height + rows;
    c.centroid_x = b->floats, c.centroid_y = c.centroid_x + rows;
    c.centroid_z = c.centroid_y + rows, c.mean = c.centroid_z + rows;
    c.v_min = c.mean + rows, c.v_max = c.v_min + rows;
    c.sums = b->sums;
    return c;
}

/* Row r of the columns from the statistics of its component's voxels: area, x, y, z,
 * width, height, depth; centroid x, y, z, mean, min, max (float volumes' means are the
 * host's, from their float-mean integer sums in `sums`). */
static inline void put_row(const table_columns *c, int64_t r, const gccl_volume_record *s,
                           int floating) {
    const double voxels = (double)s->area;
    c->area[r] = s->area;
    c->x[r] = s->x_min;
    c->y[r] = s->y_min;
    c->z[r] = s->z_min;
    c->width[r] = s->x_max - s->x_min + 1;
    c->height[r] = s->y_max - s->y_min + 1;
    c->depth[r] = s->z_max - s->z_min + 1;
    c->centroid_x[r] = (double)s->sum_x / voxels;
    c->centroid_y[r] = (double)s->sum_y / voxels;
    c->centroid_z[r] = (double)s->sum_z / voxels;
    if (floating) {
        c->sums[r] = (int64_t)s->sum_low;
        c->mean[r] = 0.0; /* the host's (float_mean) */
        c->v_min[r] = bits_float(order_key(s->lo));
        c->v_max[r] = bits_float(order_key(s->hi));
    } else {
        const __int128 sum = ((__int128)s->sum_high << 64) | (__int128)s->sum_low;
        c->mean[r] = (double)sum / voxels;
        c->v_min[r] = (double)s->lo;
        c->v_max[r] = (double)s->hi;
    }
}

/* The values of a stretch of voxels (values_of_run): integer volumes their sum and
 * extremes; float volumes the sum of their float-mean terms and the extremes' keys. */
typedef struct {
    int64_t total, lo, hi;
} run_values;

/* Where a stretch of voxels lies (its row and plane) and whether values are floats. */
typedef struct {
    int64_t y, z;
    int floating;
} stretch_place;

/* Run [s, e) of a row of labels given label `final`, as 8 where it has at most 8 voxels and
 * 8 are in the row from s (those past it written back as they are), as the first pass
 * writes them. */
static inline void put_run_labels(uint32_t *row, int64_t s, int64_t e, int64_t width,
                                  uint32_t final) {
    if (e - s <= 8 && s + 8 <= width) {
        const int length = (int)(e - s);
        for (int j = 0; j < 8; j++) row[s + j] = j < length ? final : row[s + j];
    } else {
        for (int64_t j = s; j < e; j++) row[j] = final;
    }
}

/* The statistics of one or more stretches of a row that took one local id, summed before
 * they go into its record: voxels, the sum of their x, the first and last x, the values. */
typedef struct {
    int64_t area, sum_x, first, last;
    run_values v;
} stretch_sum;

/* The sum of stretch [s, e) with values v. */
static inline stretch_sum sum_of_stretch(int64_t s, int64_t e, run_values v) {
    return (stretch_sum){e - s, (e - s) * (s + e - 1) / 2, s, e - 1, v};
}

/* g with stretch [s, e) (values v), which lies after g's stretches in their row, added. */
static inline void extend_sum(stretch_sum *g, int64_t s, int64_t e, run_values v) {
    g->area += e - s;
    g->sum_x += (e - s) * (s + e - 1) / 2;
    g->last = e - 1;
    g->v.total += v.total;
    g->v.lo = v.lo < g->v.lo ? v.lo : g->v.lo;
    g->v.hi = v.hi > g->v.hi ? v.hi : g->v.hi;
}

/* Record r set to (`fresh`) or added to (else) the statistics of stretches g of a row,
 * without a branch on which. */
static inline __attribute__((always_inline)) void add_stretches(gccl_volume_record *r,
                                                                int64_t fresh,
                                                                const stretch_place *at,
                                                                const stretch_sum *g) {
    const int64_t keep = fresh - 1; /* all ones where r adds up, else 0 */
    r->area = (r->area & keep) + g->area;
    r->sum_x = (r->sum_x & keep) + g->sum_x;
    r->sum_y = (r->sum_y & keep) + g->area * at->y;
    r->sum_z = (r->sum_z & keep) + g->area * at->z;
    if (at->floating) {
        r->sum_low = (uint64_t)(((int64_t)r->sum_low & keep) + g->v.total);
    } else {
        const __int128 sum = (((__int128)(r->sum_high & keep) << 64) |
                              (__int128)(r->sum_low & (uint64_t)keep)) +
                             g->v.total;
        r->sum_low = (uint64_t)sum;
        r->sum_high = (int64_t)(sum >> 64);
    }
    const int64_t lo = fresh ? INT64_MAX : r->lo, hi = fresh ? INT64_MIN : r->hi;
    r->lo = g->v.lo < lo ? g->v.lo : lo;
    r->hi = g->v.hi > hi ? g->v.hi : hi;
    const int32_t first = (int32_t)g->first, last = (int32_t)g->last;
    const int32_t row_y = (int32_t)at->y, plane = (int32_t)at->z;
    const int32_t x_min = fresh ? INT32_MAX : r->x_min, x_max = fresh ? -1 : r->x_max;
    const int32_t y_min = fresh ? INT32_MAX : r->y_min, y_max = fresh ? -1 : r->y_max;
    r->x_min = first < x_min ? first : x_min;
    r->x_max = last > x_max ? last : x_max;
    r->y_min = row_y < y_min ? row_y : y_min;
    r->y_max = row_y > y_max ? row_y : y_max;
    r->z_min = fresh ? plane : r->z_min; /* planes are met in order */
    r->z_max = plane;
}

#define PIXEL_TEMPLATE "volume_gather.h"
#include "pixel_types.h"

typedef int (*gather_slab_of)(const gccl_volumes *, const gccl_slab *, int64_t, const int64_t *,
                              gccl_volume_record *, gccl_run *, uint32_t *);
static const gather_slab_of GATHER_SLAB[GCCL_TYPES] = BY_TYPE(gather_slab);

/* Record dst += record src (float volumes: their float-mean sums add as integers too). */
static void merge_volume_record(gccl_volume_record *dst, const gccl_volume_record *src,
                                int floating) {
    dst->area += src->area;
    dst->sum_x += src->sum_x;
    dst->sum_y += src->sum_y;
    dst->sum_z += src->sum_z;
    if (floating) {
        dst->sum_low = (uint64_t)((int64_t)dst->sum_low + (int64_t)src->sum_low);
    } else {
        __int128 sum = ((__int128)dst->sum_high << 64) | (__int128)dst->sum_low;
        sum += ((__int128)src->sum_high << 64) | (__int128)src->sum_low;
        dst->sum_low = (uint64_t)sum;
        dst->sum_high = (int64_t)(sum >> 64);
    }
    MERGE_EXTREMES(dst, src);
    dst->z_min = src->z_min < dst->z_min ? src->z_min : dst->z_min;
    dst->z_max = src->z_max > dst->z_max ? src->z_max : dst->z_max;
}

/* The number of runs of set bits of a row's bits (voxels: its words, 0 past width). */
static inline int64_t run_count(const uint64_t *voxels, int64_t words) {
    int64_t starts = 0;
    uint64_t carry = 0;
    for (int64_t w = 0; w < words; w++) {
        starts += __builtin_popcountll(voxels[w] & ~((voxels[w] << 1) | carry));
        carry = voxels[w] >> 63;
    }
    return starts;
}

/* Each label of a row replaced by table[label]. Eight labels that are all one (inside a
 * run, or background) are read as four words and written only where their final label
 * differs, so that a row of long runs that keep their labels is read, not written. */
static void relabel_row(uint32_t *row, int64_t width, const uint32_t *table) {
    int64_t x = 0;
    for (; x + 8 <= width; x += 8) {
        uint64_t eight[4];
        memcpy(eight, row + x, sizeof eight);
        const uint64_t pair = (eight[0] & UINT64_C(0xFFFFFFFF)) * UINT64_C(0x100000001);
        if (((eight[0] ^ pair) | (eight[1] ^ pair) | (eight[2] ^ pair) | (eight[3] ^ pair)) == 0) {
            const uint32_t label = (uint32_t)pair, final = table[label];
            if (final != label) {
                for (int i = 0; i < 8; i++) row[x + i] = final;
            }
            continue;
        }
        for (int i = 0; i < 8; i++) row[x + i] = table[row[x + i]];
    }
    for (; x < width; x++) row[x] = table[row[x]];
}

/* The last pass of slab t with statistics (gccl_volume_write): each local id's final label
 * in place of its voxels in `area`, each kept component whose first slot lies in this slab
 * noted in kept_slot (that slot is the first where the component is above every one met in
 * the volume's slots before it: they are numbered in slot order), then gather_slab.
 * Returns 0, -1 out of memory, or GCCL_STOPPED. */
static int write_slab_statistics(const gccl_volumes *b, int64_t t) {
    const gccl_slab *slab = &b->slabs[t];
    const int64_t n = b->tasks[3 * t], width = b->width;
    const int64_t *forest = b->forest + b->first[t];
    const int64_t *kept_id = kept_ids(b, n);
    int64_t *kept_slot = b->kept_slot + b->kept_first[n] - 1; /* by kept id */
    int64_t *final = slab->area;
    int64_t met = b->components_before[t];
    for (int64_t local = 1; local <= slab->locals; local++) {
        const int64_t c = forest[local], k = kept_of(kept_id, c);
        final[local] = k;
        if (k != 0 && c > met) {
            kept_slot[k] = b->first[t] + local;
            met = c;
        }
    }
    gccl_run *runs = malloc(sizeof(gccl_run) * (size_t)(width / 2 + 1));
    uint32_t *kept = malloc(sizeof(uint32_t) * (size_t)(width / 2 + 1));
    gccl_volume_record *records = b->records + b->first[t];
    const int code = !runs || !kept
                         ? -1
                         : GATHER_SLAB[b->value_type](b, slab, t, final, records, runs, kept);
    free(runs);
    free(kept);
    return code;
}

/* Last pass of tasks lo..hi-1: every voxel's label replaced by its final label (0 for the
 * components min-area drops) and, with `statistics`, the records of the slab's kept local
 * ids gathered run by run (write_slab_statistics). Only the foreground's runs (the slab's
 * bits) are read and written; without statistics a row whose runs took one label
 * (row_labels) is passed over where that label keeps its number and filled with its final
 * label where it does not. Without statistics each label's final label takes the place of
 * its local id in `parent`, so a voxel costs one lookup. Returns 0, -1 out of memory, or
 * GCCL_STOPPED. */
int gccl_volume_write(const gccl_volumes *b, int64_t lo, int64_t hi) {
    const int64_t width = b->width, height = b->height, words = voxel_words(width);
    for (int64_t t = lo; t < hi; t++) {
        gccl_slab *slab = &b->slabs[t];
        if (slab->labels == 0) continue; /* its voxels are all 0 already */
        const int64_t n = b->tasks[3 * t], z0 = b->tasks[3 * t + 1], z1 = b->tasks[3 * t + 2];
        const int64_t *forest = b->forest + b->first[t];
        if (b->statistics) {
            const int code = write_slab_statistics(b, t);
            if (code != 0) return code;
            continue;
        }
        const int64_t *kept_id = kept_ids(b, n);
        uint32_t *table = (uint32_t *)slab->parent; /* label -> final, over label -> local id */
        table[0] = 0;
        for (int64_t label = 1; label <= slab->labels; label++)
            table[label] = (uint32_t)kept_of(kept_id, forest[slab->parent[label]]);
        for (int64_t z = z0; z < z1; z++) {
            if (gccl_stopping(1)) return GCCL_STOPPED;
            for (int64_t y = 0; y < height; y++) {
                if (gccl_stopping(width + 1)) return GCCL_STOPPED;
                const int64_t r = (z - z0) * height + y;
                const int32_t row_label = slab->row_labels[r];
                if (row_label == 0) continue; /* all 0 */
                const uint32_t one = row_label > 0 ? table[row_label] : 0;
                if (row_label > 0 && one == (uint32_t)row_label) continue;
                uint32_t *row = b->labels + row_index(b, n, z, y);
                const uint64_t *voxels = bit_row(slab, width, r) + 1;
                if (row_label < 0 && 16 * run_count(voxels, words) > width) {
                    relabel_row(row, width, table); /* runs too many to find one by one */
                    continue;
                }
                int64_t s, e;
                for (int64_t x = 0; next_run(voxels, words, x, &s, &e); x = e + 1) {
                    if (row_label > 0) { /* one label: no lookups */
                        for (int64_t i = s; i < e; i++) row[i] = one;
                    } else {
                        relabel_row(row + s, e - s, table);
                    }
                }
            }
        }
    }
    return 0;
}

/* Per volume lo..hi-1: the records of each kept component's slots after its first (the
 * component crosses a seam, and may come back into a slab through the next) added into
 * its first slot's record (kept_slot). Such a slot's component is numbered no higher than
 * one met in a slot before it. */
int gccl_volume_gather(const gccl_volumes *b, int64_t lo, int64_t hi) {
    for (int64_t n = lo; n < hi; n++) {
        const int64_t *kept_id = kept_ids(b, n);
        const int64_t *kept_slot = b->kept_slot + b->kept_first[n] - 1; /* by kept id */
        for (int64_t t = b->volume_tasks[n]; t < b->volume_tasks[n + 1]; t++) {
            int64_t met = b->components_before[t];
            for (int64_t slot = b->first[t] + 1; slot < b->first[t + 1]; slot++) {
                const int64_t c = b->forest[slot];
                if (c > met) { /* the component's first slot */
                    met = c;
                    continue;
                }
                const int64_t k = kept_of(kept_id, c);
                if (k != 0)
                    merge_volume_record(&b->records[kept_slot[k]], &b->records[slot],
                                        (int)b->floating);
            }
        }
    }
    return 0;
}

/* Rows lo..hi-1 of the statistics columns (the kept components of the batch in order),
 * each from its component's first slot's record (kept_slot; gathered). */
int gccl_volume_columns(const gccl_volumes *b, int64_t lo, int64_t hi) {
    const table_columns table = columns_of(b);
    for (int64_t r = lo; r < hi; r++)
        put_row(&table, r, &b->records[b->kept_slot[r]], (int)b->floating);
    return 0;
}

