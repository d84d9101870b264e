/* The CPU engine for volumes (volume.h says how a batch of volumes is labeled). volumes.py
 * calls each entry point on ranges lo..hi-1 of tasks or volumes from several threads at
 * once; every call writes only its own part of the arrays and of the slabs' state, so the
 * ranges change no result. */
#define _GNU_SOURCE /* madvise's MADV_HUGEPAGE under -std=c11 */
#include "volume.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#ifdef __linux__
#include <sys/mman.h>
#endif

#include "pool.h"
#include "rows.h"

_Static_assert(sizeof(gccl_slab) == GCCL_SLAB_WORDS * sizeof(int64_t),
               "GCCL_SLAB_WORDS is gccl_slab's size in int64 words");
_Static_assert(sizeof(gccl_volume_record) % sizeof(int64_t) == 0,
               "a record is whole int64 words (the host allocates records as int64)");

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
static inline int64_t kept_of(const int64_t *kept_id, int64_t c) { return kept_id ? kept_id[c] : c; }

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

#define PIXEL_TEMPLATE "volume_rows.h"
#include "pixel_types.h"

typedef int64_t (*tau_runs_of)(const void *, const uint8_t *, int64_t, const gccl_rules *,
                               int64_t *);
typedef int (*runs_join_of)(const void *, const void *, int64_t, int64_t, int64_t, int64_t,
                            int64_t, const gccl_rules *);
typedef int (*gather_slab_of)(const gccl_volumes *, const gccl_slab *, int64_t, const int64_t *,
                               gccl_volume_record *, gccl_run *, uint32_t *);
typedef int64_t (*run_magnitude_of)(const void *, int64_t, int64_t);

static const row_rule FOREGROUND_ROW[GCCL_TYPES] = BY_TYPE(foreground_row);
static const tau_runs_of TAU_ROW_RUNS[GCCL_TYPES] = BY_TYPE(tau_row_runs);
static const runs_join_of RUNS_JOIN[GCCL_TYPES] = BY_TYPE(runs_join);
static const gather_slab_of GATHER_SLAB[GCCL_TYPES] = BY_TYPE(gather_slab);

/* Float volumes' run_magnitude, by value type (NULL for integer types). */
static run_magnitude_of run_magnitude_for(int64_t type) {
    return type == GCCL_F32 ? run_magnitude_f32 : type == GCCL_F64 ? run_magnitude_f64 : NULL;
}

/* A row before the current one whose runs the current row's runs may touch: the plane
 * (0: this one, -1: the one before) and row (-1, 0, +1) it is at, and how far across
 * (0: face to face, 1: diagonally too). */
typedef struct {
    int dz, dy, grow;
} neighbour;

#define NEAR_ROWS 4
static const neighbour NEIGHBOURS_6[] = {{0, -1, 0}, {-1, 0, 0}};
static const neighbour NEIGHBOURS_18[] = {{0, -1, 1}, {-1, -1, 0}, {-1, 0, 1}, {-1, 1, 0}};
static const neighbour NEIGHBOURS_26[] = {{0, -1, 1}, {-1, -1, 1}, {-1, 0, 1}, {-1, 1, 1}};

/* The neighbouring rows of `connectivity` (6, 18 or 26); returns how many. */
static int neighbours_of(int64_t connectivity, const neighbour **list) {
    if (connectivity == 6) {
        *list = NEIGHBOURS_6;
        return 2;
    }
    *list = connectivity == 18 ? NEIGHBOURS_18 : NEIGHBOURS_26;
    return 4;
}

/* Ask for huge pages for the whole 2 MiB pages of an array of `bytes` (where the system
 * has them, as numpy does for its large arrays): a slab's arrays are fresh memory each
 * call, whose 4 KiB pages each cost a fault. */
static void advise_huge(void *array, size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const uintptr_t huge = (uintptr_t)1 << 21;
    const uintptr_t start = ((uintptr_t)array + huge - 1) & ~(huge - 1);
    const uintptr_t end = ((uintptr_t)array + bytes) & ~(huge - 1);
    if (end > start) madvise((void *)start, end - start, MADV_HUGEPAGE);
#else
    (void)array, (void)bytes;
#endif
}

/* Blocks of memory the slabs' arrays leave, kept for the next slabs (of this call or the
 * next): fresh memory costs a page fault per page touched, and on a virtual machine more
 * where its host took the pages back. At most SPARE_COUNT blocks of SPARE_LIMIT bytes in
 * all, the largest ones. */
#define SPARE_COUNT 16
#define SPARE_LIMIT ((size_t)1 << 30)
static struct {
    void *block;
    size_t bytes;
} spares[SPARE_COUNT];
static atomic_flag spares_busy = ATOMIC_FLAG_INIT;

static void lock_spares(void) {
    while (atomic_flag_test_and_set_explicit(&spares_busy, memory_order_acquire)) continue;
}

static void unlock_spares(void) { atomic_flag_clear_explicit(&spares_busy, memory_order_release); }

/* A block of at least `bytes`: the smallest kept one that holds them, else a new one (NULL
 * out of memory); *got = its size. */
static void *obtain(size_t bytes, size_t *got) {
    int best = -1;
    void *block = NULL;
    lock_spares();
    for (int i = 0; i < SPARE_COUNT; i++) {
        if (spares[i].block && spares[i].bytes >= bytes &&
            (best < 0 || spares[i].bytes < spares[best].bytes))
            best = i;
    }
    if (best >= 0) {
        block = spares[best].block;
        *got = spares[best].bytes;
        spares[best].block = NULL;
    }
    unlock_spares();
    if (block) return block;
    block = malloc(bytes);
    if (block) advise_huge(block, bytes);
    *got = bytes;
    return block;
}

/* A block of `bytes` (or NULL) kept for a later slab in place of a smaller one where the
 * limits allow, else freed. */
static void release(void *block, size_t bytes) {
    if (!block) return;
    void *drop = block;
    size_t total = 0;
    int empty = -1, smallest = -1;
    lock_spares();
    for (int i = 0; i < SPARE_COUNT; i++) {
        if (!spares[i].block) {
            empty = i;
            continue;
        }
        total += spares[i].bytes;
        if (smallest < 0 || spares[i].bytes < spares[smallest].bytes) smallest = i;
    }
    if (empty >= 0 && total + bytes <= SPARE_LIMIT) {
        spares[empty].block = block;
        spares[empty].bytes = bytes;
        drop = NULL;
    } else if (smallest >= 0 && spares[smallest].bytes < bytes &&
               total - spares[smallest].bytes + bytes <= SPARE_LIMIT) {
        drop = spares[smallest].block;
        spares[smallest].block = block;
        spares[smallest].bytes = bytes;
    }
    unlock_spares();
    free(drop);
}

/* The slab's label arrays grown to twice their room (parent, area and, with `magnitudes`,
 * magnitude grow together, from spare blocks where there are). Returns 0, or -1 out of
 * memory. */
static __attribute__((noinline)) int grow_labels(gccl_slab *slab, int magnitudes) {
    const int64_t held = slab->labels_held, want = held ? 2 * held : 4096;
    const size_t used = (size_t)(slab->labels + 1); /* entries 0..labels */
    size_t got_parent, got_area, got_magnitude = SIZE_MAX;
    int32_t *parent = obtain(sizeof(int32_t) * (size_t)want, &got_parent);
    int64_t *area = obtain(sizeof(int64_t) * (size_t)want, &got_area);
    int64_t *magnitude = magnitudes ? obtain(sizeof(int64_t) * (size_t)want, &got_magnitude) : NULL;
    if (!parent || !area || (magnitudes && !magnitude)) {
        release(parent, got_parent);
        release(area, got_area);
        release(magnitude, got_magnitude);
        return -1;
    }
    if (held) {
        memcpy(parent, slab->parent, sizeof(int32_t) * used);
        memcpy(area, slab->area, sizeof(int64_t) * used);
        if (magnitudes) memcpy(magnitude, slab->magnitude, sizeof(int64_t) * used);
    }
    release(slab->parent, sizeof(int32_t) * (size_t)held);
    release(slab->area, sizeof(int64_t) * (size_t)held);
    release(slab->magnitude, sizeof(int64_t) * (size_t)held);
    slab->parent = parent;
    slab->area = area;
    slab->magnitude = magnitude;
    size_t entries = got_parent / sizeof(int32_t);
    entries = got_area / sizeof(int64_t) < entries ? got_area / sizeof(int64_t) : entries;
    entries = got_magnitude / sizeof(int64_t) < entries ? got_magnitude / sizeof(int64_t) : entries;
    slab->labels_held = (int64_t)entries;
    return 0;
}

/* Room in the slab's label arrays for one label more than it has (grow_labels where there
 * is none; a check per run, so apart from the growing). Returns 0, or -1 out of memory. */
static inline int room_for_label(gccl_slab *slab, int magnitudes) {
    return slab->labels + 1 < slab->labels_held ? 0 : grow_labels(slab, magnitudes);
}

/* A new label for the slab: a set of its own. Returns it, or 0 out of memory. */
static int32_t new_volume_label(gccl_slab *slab, int magnitudes) {
    if (room_for_label(slab, magnitudes) != 0) return 0;
    const int64_t label = slab->labels + 1;
    slab->parent[label] = (int32_t)label;
    slab->area[label] = 0;
    if (magnitudes) slab->magnitude[label] = 0;
    slab->labels = label;
    return (int32_t)label;
}

/* The runs of a row before the current one, and where the scan of them has got to. */
typedef struct {
    gccl_run *runs;
    int64_t count, at;
    int32_t grow;
    const uint8_t *pixels; /* the row's voxels (tau mode) */
} near_row;

/* The root of label q's set (with path halving). */
static inline int32_t root_of(int32_t *parent, int32_t q) {
    while (parent[q] < q) {
        parent[q] = parent[parent[q]];
        q = parent[q];
    }
    return q;
}

/* The set of root `label` (0: none yet) joined to the set of label q; returns the root of
 * the union, the smaller of the two roots. */
static inline int32_t join_root(int32_t *parent, int32_t label, int32_t q) {
    const int32_t root = root_of(parent, q);
    if (label == 0 || root == label) return root;
    if (root < label) {
        parent[label] = root;
        return root;
    }
    parent[root] = label;
    return label;
}

/* `label` (a root, or 0) joined to the sets of the runs of `row` that touch [s, e) where
 * one pair of their voxels joins (tau mode); each run met keeps the root it was found to
 * have, so that the next run touching it finds its set at once. */
static inline int32_t join_near_row_tau(const gccl_volumes *b, const gccl_rules *t,
                                        int32_t *parent, near_row *row, const uint8_t *pixels,
                                        int32_t s, int32_t e, int32_t label) {
    gccl_run *o = row->runs;
    const int64_t m = row->count;
    const int32_t g = row->grow;
    int64_t j = row->at;
    while (j < m && o[j].end + g <= s) j++;
    row->at = j;
    for (; j < m && o[j].start < e + g; j++) {
        if (o[j].label == label) continue;
        if (!RUNS_JOIN[b->image_type](pixels, row->pixels, s, e, o[j].start, o[j].end, g, t))
            continue;
        label = join_root(parent, label, o[j].label);
        o[j].label = label;
    }
    return label;
}

/* The runs of two planes: the one being labeled and the one before it. */
typedef struct {
    gccl_run *runs[2];    /* each room for a plane's runs (height * (width + 1) / 2 + ...) */
    int64_t *row_first[2]; /* (height + 1): each row's first run */
} plane_runs;

/* Row y's runs in plane buffer p. */
static inline gccl_run *runs_of_row(const plane_runs *planes, int p, int64_t y,
                                    int64_t *count) {
    *count = planes->row_first[p][y + 1] - planes->row_first[p][y];
    return planes->runs[p] + planes->row_first[p][y];
}

/* A row's foreground fg (0 or 1 per voxel; 0 past width up to a whole word) as its bits.
 * Returns whether any is set. */
static int pack_row(const uint8_t *fg, int64_t width, uint64_t *bits) {
    const int64_t words = voxel_words(width);
    uint64_t any = 0;
    for (int64_t w = 0; w < words; w++) {
        uint64_t word = 0;
#ifdef __SSE2__
        for (int i = 0; i < 4; i++) { /* each byte's 0/1 moved to its top bit, then gathered */
            const __m128i sixteen = _mm_loadu_si128((const __m128i *)(fg + 64 * w + 16 * i));
            const int mask = _mm_movemask_epi8(_mm_slli_epi16(sixteen, 7));
            word |= (uint64_t)(uint16_t)mask << (16 * i);
        }
#else
        for (int i = 0; i < 8; i++) { /* byte i of eight lands on bit 56 + i of the product */
            uint64_t eight;
            memcpy(&eight, fg + 64 * w + 8 * i, sizeof eight);
            word |= ((eight * UINT64_C(0x0102040810204080)) >> 56) << (8 * i);
        }
#endif
        bits[1 + w] = word;
        any |= word;
    }
    bits[words + 1] = 0;
    return any != 0;
}

/* The bytes of a slab's row_labels and bits of `rows` rows. */
static inline size_t row_label_bytes(int64_t rows) { return sizeof(int32_t) * (size_t)rows; }
static inline size_t bits_bytes(int64_t rows, int64_t width) {
    return sizeof(uint64_t) * (size_t)(rows * bit_stride(width) + 2);
}

/* A slab of `rows` rows its row_labels and bits (the word before its first row 0).
 * Returns 0, or -1 out of memory. */
static int start_slab(gccl_slab *slab, int64_t rows, int64_t width) {
    size_t got;
    slab->row_labels = obtain(row_label_bytes(rows), &got);
    slab->bits = obtain(bits_bytes(rows, width), &got);
    if (!slab->row_labels || !slab->bits) return -1;
    slab->bits[0] = 0;
    return 0;
}

/* The 64 bits of a row of bits from voxel x on (-64 <= x <= 64 * voxel words). */
static inline uint64_t bits_from(const uint64_t *bits, int64_t x) {
    const int64_t at = x + 64, w = at >> 6, shift = at & 63;
    return (bits[w] >> shift) | ((bits[w + 1] << 1) << (63 - shift));
}

/* Root `label` joined to the set of label q; returns the root of the union (the smaller
 * root). Without a branch on which root is smaller: the larger one's parent is written
 * even where both are the same (itself). */
static inline int32_t join_root_unbranched(int32_t *parent, int32_t label, int32_t q) {
    const int32_t root = root_of(parent, q);
    const int32_t low = root < label ? root : label, high = root ^ label ^ low;
    parent[high] = low;
    return low;
}

/* The neighbouring rows of a row (binary mode): their bits and labels, and how far across
 * each reaches (0: face to face, 1: diagonally too); rows outside the slab are 0s. */
typedef struct {
    const uint64_t *bits[NEAR_ROWS];
    const uint32_t *labels[NEAR_ROWS];
    int64_t grow[NEAR_ROWS];
} near_bits;

/* The first voxel of each stretch of set bits of m. */
static inline uint64_t firsts_of(uint64_t m) { return m & ~(m << 1); }

/* m and the bits beside its bits. */
static inline uint64_t beside(uint64_t m) { return m | (m << 1) | (m >> 1); }

/* Root `label` joined to the set of the voxel of the lowest bit of *firsts (16-bit lanes of
 * the rows of `near`, from voxel lo), which leaves it; with no bit left, to itself (a
 * label whose parent is itself), so that the branch taken depends on no voxel. */
static inline int32_t join_lowest(int32_t *parent, const near_bits *near, int64_t lo,
                                  uint64_t *firsts, int32_t label) {
    const uint64_t f = *firsts;
    const int p = __builtin_ctzll(f | (UINT64_C(1) << 63));
    const uint32_t self = (uint32_t)label;
    const uintptr_t hit = (uintptr_t)(near->labels[p >> 4] + lo + (p & 15)), none = (uintptr_t)&self;
    const uintptr_t any = (uintptr_t)0 - (uintptr_t)(f != 0); /* a mask, not a branch */
    *firsts = f & (f - 1);
    return join_root_unbranched(parent, label, (int32_t) * (const uint32_t *)((hit & any) | (none & ~any)));
}

/* Root `label` joined to the sets of the voxels of the neighbouring rows that touch run
 * [s, e): one voxel of each of their runs within reach (the first), read from the labels.
 * `rows` (2 or 4: a constant where it is inlined) of them. A run of at most 14 voxels
 * reads each row's bits around it once, the rows side by side in 16-bit lanes of one
 * word, and loops once over all they hold. With 26-connectivity (rows: this plane's row
 * above, the plane before's rows above, level and below) the rows' sets there are partly
 * joined already: a voxel of the row above or of the plane before's row above or below
 * beside a voxel of the plane before's level row, and one of the plane before's row above
 * beside one of this plane's row above, are in the same set (the rows were joined so), so
 * such a run's first voxel is left out when it is beside one that is kept. */
static inline __attribute__((always_inline)) int32_t join_near_bits(int32_t *parent,
                                                                    const near_bits *near,
                                                                    int rows, int joined,
                                                                    int64_t s, int64_t e,
                                                                    int32_t label) {
    const int64_t lo = s - 1, n = e - s + 2; /* the window of diagonal reach */
    if (n <= 16) {
        const uint64_t wide = (UINT64_C(1) << n) - 1;
        const uint64_t narrow = wide ^ 1 ^ (UINT64_C(1) << (n - 1)); /* face to face */
        uint64_t m[NEAR_ROWS], firsts = 0;
        for (int i = 0; i < rows; i++)
            m[i] = bits_from(near->bits[i], lo) & (near->grow[i] ? wide : narrow);
        if (joined) { /* rows 0..3: above, before above, before level, before below */
            const uint64_t level = beside(m[2]);
            firsts = (firsts_of(m[0]) & ~level) | ((firsts_of(m[1]) & ~(level | beside(m[0]))) << 16) |
                     (firsts_of(m[2]) << 32) | ((firsts_of(m[3]) & ~level) << 48);
        } else {
            for (int i = 0; i < rows; i++) firsts |= firsts_of(m[i]) << (16 * i);
        }
        label = join_lowest(parent, near, lo, &firsts, label); /* most runs meet at most 2 */
        label = join_lowest(parent, near, lo, &firsts, label);
        while (firsts) {
            const int p = __builtin_ctzll(firsts);
            firsts &= firsts - 1;
            label = join_root_unbranched(parent, label, (int32_t)near->labels[p >> 4][lo + (p & 15)]);
        }
        return label;
    }
    for (int i = 0; i < rows; i++) {
        const int64_t from = s - near->grow[i], to = e + near->grow[i];
        uint64_t carry = 0; /* whether the voxel before x is set */
        for (int64_t x = from; x < to; x += 64) {
            uint64_t m = bits_from(near->bits[i], x);
            if (to - x < 64) m &= (UINT64_C(1) << (to - x)) - 1;
            uint64_t firsts = m & ~((m << 1) | carry);
            carry = m >> 63;
            while (firsts) {
                const int p = __builtin_ctzll(firsts);
                firsts &= firsts - 1;
                label = join_root_unbranched(parent, label, (int32_t)near->labels[i][x + p]);
            }
        }
    }
    return label;
}

/* A row's label summary (gccl_slab's row_labels: 0 none yet, -1 several) after a run of
 * `label`. */
static inline int32_t same_label(int32_t summary, int32_t label) {
    return summary == 0 || summary == label ? label : -1;
}

/* The label of a run of the slab: `label` itself where it joined a set (a root), else a
 * new one (slab->labels + 1, whose room room_for_label made and whose parent is itself).
 * Where `counting`, its voxels counted, and where the slab keeps them its largest finite
 * |v|; a new label's counts start from 0 without a branch on whether it is new. */
static inline int32_t settle_label(gccl_slab *slab, int32_t label, int64_t voxels,
                                   int64_t magnitude, int counting) {
    const int64_t made = label > slab->labels;
    const int64_t kept = made - 1; /* all ones for a label made before, 0 for a new one */
    slab->labels += made;
    if (counting) slab->area[label] = (slab->area[label] & kept) + voxels;
    if (slab->magnitude) {
        const int64_t top = slab->magnitude[label] & kept;
        slab->magnitude[label] = magnitude > top ? magnitude : top;
    }
    return label;
}

/* First pass of one slab in binary mode (planes z0..z1-1 of volume n): each row's runs
 * (from its bits) joined to the sets of the voxels they touch in the rows before it, each
 * run's label written into `labels` (the background's 0 too unless they are `zeroed`),
 * each row's one label (row_labels), each label's voxels counted where counts_voxels (and
 * its largest finite |v| where keeps_magnitude). A run's label is slab->labels + 1 until
 * it joins a set, so that the joins need no branch for "no set yet". fg: a row's
 * foreground (whole words of voxels, 0 past width). Returns 0, -1 out of memory, or
 * GCCL_STOPPED. */
static int label_slab_binary(const gccl_volumes *b, gccl_slab *slab, int64_t n, int64_t z0,
                             int64_t z1, uint8_t *fg, const uint64_t *zero) {
    const int64_t width = b->width, height = b->height, words = voxel_words(width);
    const int64_t image_bytes = type_bytes(b->image_type);
    const int64_t value_bytes = type_bytes(b->value_type);
    const int counting = counts_voxels(b), magnitudes = keeps_magnitude(b);
    const run_magnitude_of magnitude_of = magnitudes ? run_magnitude_for(b->value_type) : NULL;
    const uint8_t *image = b->image, *values = b->values;
    const neighbour *near;
    const int count = neighbours_of(b->connectivity, &near);
    const int joined = b->connectivity == 26; /* join_near_bits: rows partly joined */
    if (start_slab(slab, (z1 - z0) * height, width) != 0) return -1;
    if (room_for_label(slab, magnitudes) != 0) return -1;
    for (int64_t z = z0; z < z1; z++) {
        if (gccl_stopping(1)) return GCCL_STOPPED;
        for (int64_t y = 0; y < height; y++) {
            if (gccl_stopping(width + 1)) return GCCL_STOPPED;
            const int64_t at = row_index(b, n, z, y);
            uint32_t *out = b->labels + at;
            uint64_t *bits = bit_row(slab, width, (z - z0) * height + y);
            FOREGROUND_ROW[b->image_type](image + at * image_bytes, width, b->rules.rule, b->rules.rule_value, fg);
            int32_t *row_label = &slab->row_labels[(z - z0) * height + y];
            *row_label = 0;
            if (!b->zeroed) memset(out, 0, sizeof(uint32_t) * (size_t)width);
            if (!pack_row(fg, width, bits)) continue;
            near_bits other = {{zero, zero, zero, zero}, {out, out, out, out}, {0, 0, 0, 0}};
            for (int i = 0; i < count; i++) {
                const int64_t yy = y + near[i].dy, zz = z + near[i].dz;
                other.bits[i] = zero;
                other.labels[i] = out;
                other.grow[i] = near[i].grow;
                if (yy < 0 || yy >= height || zz < z0) continue;
                other.bits[i] = bit_row(slab, width, (zz - z0) * height + yy);
                other.labels[i] = b->labels + row_index(b, n, zz, yy);
            }
            const uint8_t *value_row = values + at * value_bytes;
            const uint64_t *voxels = bits + 1;
            uint64_t carry = 0; /* whether the voxel before is foreground */
            int64_t s = 0;
            for (int64_t w = 0; w <= words; w++) {
                const uint64_t word = w < words ? voxels[w] : 0; /* a word past: the last end */
                uint64_t edges = word ^ ((word << 1) | carry); /* each run's start and end */
                carry = word >> 63;
                while (edges) {
                    const int64_t x = 64 * w + __builtin_ctzll(edges);
                    edges &= edges - 1;
                    if ((word >> (x & 63)) & 1) { /* a start */
                        s = x;
                        continue;
                    }
                    const int64_t e = x;
                    int32_t label = (int32_t)(slab->labels + 1);
                    slab->parent[label] = label; /* a set of its own until it joins one */
                    if (count == 2) {
                        label = join_near_bits(slab->parent, &other, 2, 0, s, e, label);
                    } else if (joined) {
                        label = join_near_bits(slab->parent, &other, 4, 1, s, e, label);
                    } else {
                        label = join_near_bits(slab->parent, &other, 4, 0, s, e, label);
                    }
                    label = settle_label(slab, label, e - s,
                                         magnitude_of ? magnitude_of(value_row, s, e) : 0,
                                         counting);
                    *row_label = same_label(*row_label, label);
                    if (room_for_label(slab, magnitudes) != 0) return -1;
                    if (e - s <= 8 && s + 8 <= width) { /* 8 stores, no loop to leave */
                        const int length = (int)(e - s); /* 0s past it: later runs' or none */
                        for (int i = 0; i < 8; i++)
                            out[s + i] = (uint32_t)label & -(uint32_t)(i < length);
                    } else {
                        for (int64_t i = s; i < e; i++) out[i] = (uint32_t)label;
                    }
                }
            }
        }
    }
    return 0;
}

/* First pass of one slab in tau mode (planes z0..z1-1 of volume n): each row's runs joined
 * to the runs they touch, each voxel's label written into `labels` (the background's 0 too
 * unless they are `zeroed`), each row's one label (row_labels), each label's voxels counted
 * where counts_voxels (and its largest finite |v| where keeps_magnitude). fg: a row's
 * foreground (width); bounds: a row's run bounds (2 width + 2). Returns 0, -1 out of
 * memory, or GCCL_STOPPED. */
static int label_slab_tau(const gccl_volumes *b, gccl_slab *slab, int64_t n, int64_t z0,
                          int64_t z1, uint8_t *fg, int64_t *bounds, plane_runs *planes) {
    const int64_t width = b->width, height = b->height;
    const int64_t image_bytes = type_bytes(b->image_type);
    const int64_t value_bytes = type_bytes(b->value_type);
    const gccl_rules t = b->rules;
    const int counting = counts_voxels(b), magnitudes = keeps_magnitude(b);
    const run_magnitude_of magnitude_of = magnitudes ? run_magnitude_for(b->value_type) : NULL;
    const uint8_t *image = b->image, *values = b->values;
    const neighbour *near;
    const int count = neighbours_of(b->connectivity, &near);
    if (start_slab(slab, (z1 - z0) * height, width) != 0) return -1;
    for (int64_t z = z0; z < z1; z++) {
        const int p = (int)((z - z0) & 1); /* this plane's buffers; 1 - p: the plane before */
        planes->row_first[p][0] = 0;
        if (gccl_stopping(1)) return GCCL_STOPPED;
        for (int64_t y = 0; y < height; y++) {
            if (gccl_stopping(width + 1)) return GCCL_STOPPED;
            const int64_t at = row_index(b, n, z, y);
            const uint8_t *pixels = image + at * image_bytes;
            FOREGROUND_ROW[b->image_type](pixels, width, b->rules.rule, b->rules.rule_value, fg);
            pack_row(fg, width, bit_row(slab, width, (z - z0) * height + y));
            const int64_t k = TAU_ROW_RUNS[b->image_type](pixels, fg, width, &t, bounds);
            near_row other[NEAR_ROWS]; /* rows that are no neighbour have no runs */
            for (int i = 0; i < NEAR_ROWS; i++) {
                other[i] = (near_row){NULL, 0, 0, 0, NULL};
                if (i >= count) continue;
                const int64_t yy = y + near[i].dy, zz = z + near[i].dz;
                if (yy < 0 || yy >= height || zz < z0) continue;
                other[i].runs = runs_of_row(planes, near[i].dz ? 1 - p : p, yy, &other[i].count);
                other[i].grow = near[i].grow;
                other[i].pixels = image + row_index(b, n, zz, yy) * image_bytes;
            }
            gccl_run *runs = planes->runs[p] + planes->row_first[p][y];
            uint32_t *out = b->labels + at;
            const uint8_t *value_row = values + at * value_bytes;
            int32_t *parent = slab->parent;
            int32_t row_label = 0;
            int64_t x = 0;
            for (int64_t i = 0; i < k; i++) {
                const int32_t s = (int32_t)bounds[2 * i], e = (int32_t)bounds[2 * i + 1];
                int32_t label = 0;
                for (int j = 0; j < count; j++)
                    label = join_near_row_tau(b, &t, parent, &other[j], pixels, s, e, label);
                if (label == 0) {
                    label = new_volume_label(slab, magnitudes);
                    if (label == 0) return -1;
                    parent = slab->parent;
                }
                runs[i] = (gccl_run){s, e, label};
                row_label = same_label(row_label, label);
                if (counting) slab->area[label] += e - s;
                if (magnitude_of) {
                    const int64_t top = magnitude_of(value_row, s, e);
                    if (top > slab->magnitude[label]) slab->magnitude[label] = top;
                }
                if (!b->zeroed) {
                    for (; x < s; x++) out[x] = 0;
                }
                for (x = s; x < e; x++) out[x] = (uint32_t)label;
            }
            if (!b->zeroed) {
                for (; x < width; x++) out[x] = 0;
            }
            slab->row_labels[(z - z0) * height + y] = row_label;
            planes->row_first[p][y + 1] = planes->row_first[p][y] + k;
        }
    }
    return 0;
}

/* The slab's labels flattened to local ids 1..m in order (parent[label] = local id), each
 * label's voxels (where `counting`) and largest finite |v| (where the slab keeps them)
 * gathered into its local id's; returns m. */
static int64_t flatten_slab(gccl_slab *slab, int counting) {
    int32_t *parent = slab->parent;
    int64_t *area = counting ? slab->area : NULL, *magnitude = slab->magnitude;
    int64_t m = 0;
    for (int64_t label = 1; label <= slab->labels; label++) {
        const int32_t p = parent[label];
        const int64_t voxels = area ? area[label] : 0, top = magnitude ? magnitude[label] : 0;
        if (p < label) { /* p < label already holds its local id */
            const int32_t local = parent[p];
            parent[label] = local;
            if (area) area[local] += voxels;
            if (magnitude && top > magnitude[local]) magnitude[local] = top;
        } else { /* slot m <= label has been read already */
            m += 1;
            parent[label] = (int32_t)m;
            if (area) area[m] = voxels;
            if (magnitude) magnitude[m] = top;
        }
    }
    return m;
}

/* First pass of tasks lo..hi-1: each slab labeled and flattened to local ids;
 * local_counts[t] = m. Returns 0, -1 out of memory, or GCCL_STOPPED. */
int gccl_volume_label_slabs(const gccl_volumes *b, int64_t lo, int64_t hi) {
    const int64_t width = b->width, height = b->height;
    /* fg: whole words of voxels, 0 past width; tau mode: a row holds at most width runs */
    uint8_t *fg = calloc((size_t)(64 * voxel_words(width)), 1);
    int64_t *bounds = NULL;
    plane_runs runs = {{NULL, NULL}, {NULL, NULL}};
    uint64_t *zero = calloc((size_t)(bit_stride(width) + 2), sizeof(uint64_t)); /* a row of 0s */
    int code = !fg || !zero ? -1 : 0;
    if (b->rules.tau_mode) {
        bounds = malloc(sizeof(int64_t) * (size_t)(2 * width + 2));
        code = !bounds ? -1 : code;
        for (int p = 0; p < 2 && code == 0; p++) {
            runs.runs[p] = malloc(sizeof(gccl_run) * (size_t)(height * width + 1));
            runs.row_first[p] = malloc(sizeof(int64_t) * (size_t)(height + 1));
            code = !runs.runs[p] || !runs.row_first[p] ? -1 : 0;
        }
    }
    for (int64_t t = lo; t < hi && code == 0; t++) {
        /* the slab's state worked on in a copy of this thread's: the slabs lie side by side,
           and a line shared with a slab another thread counts labels in would pass from core
           to core at every run */
        gccl_slab slab = b->slabs[t];
        const int64_t *task = &b->tasks[3 * t];
        code = b->rules.tau_mode
                   ? label_slab_tau(b, &slab, task[0], task[1], task[2], fg, bounds, &runs)
                   : label_slab_binary(b, &slab, task[0], task[1], task[2], fg, zero);
        if (code == 0) slab.locals = b->local_counts[t] = flatten_slab(&slab, counts_voxels(b));
        b->slabs[t] = slab; /* what it holds, freed by gccl_volume_free even where it failed */
    }
    for (int p = 0; p < 2; p++) {
        free(runs.runs[p]);
        free(runs.row_first[p]);
    }
    free(zero);
    free(fg);
    free(bounds);
    return code;
}

/* The runs of equal nonzero labels of a row of `labels`; returns their number. */
static int64_t label_runs(const uint32_t *row, int64_t width, gccl_run *runs) {
    int64_t k = 0, x = 0;
    while (x < width) {
        const uint32_t label = row[x];
        if (label == 0) {
            x++;
            continue;
        }
        const int64_t s = x;
        while (x < width && row[x] == label) x++;
        runs[k++] = (gccl_run){(int32_t)s, (int32_t)x, (int32_t)label};
    }
    return k;
}

static inline int64_t find_slot(const int64_t *forest, int64_t i) {
    while (forest[i] < i) i = forest[i];
    return i;
}

/* Join the sets of slots g and h, the smaller root the root. */
static inline void join_slot_sets(int64_t *forest, int64_t g, int64_t h) {
    const int64_t rg = find_slot(forest, g), rh = find_slot(forest, h);
    if (rg < rh) {
        forest[rh] = rg;
    } else if (rh < rg) {
        forest[rg] = rh;
    }
}

/* The seam between slab t (its first plane z) and slab t - 1 (plane z - 1) of volume n:
 * every pair of touching runs (of equal labels: one set within its slab) that joins under
 * the connectivity, in tau mode where a pair of their voxels joins, joins their slots.
 * here and before: room for a row's runs each (width). */
static void join_seam(const gccl_volumes *b, int64_t n, int64_t t, gccl_run *here,
                      gccl_run *before) {
    const int64_t width = b->width, height = b->height, z = b->tasks[3 * t + 1];
    const int64_t image_bytes = type_bytes(b->image_type);
    const uint8_t *image = b->image;
    const gccl_rules tolerance = b->rules;
    const int32_t *local = b->slabs[t].parent, *local_before = b->slabs[t - 1].parent;
    const int64_t slot = b->first[t], slot_before = b->first[t - 1];
    const neighbour *near;
    const int count = neighbours_of(b->connectivity, &near);
    for (int64_t y = 0; y < height; y++) {
        const int64_t at = row_index(b, n, z, y);
        const int64_t k = label_runs(b->labels + at, width, here);
        if (k == 0) continue;
        for (int i = 0; i < count; i++) {
            const int64_t yy = y + near[i].dy;
            if (near[i].dz == 0 || yy < 0 || yy >= height) continue;
            const int64_t other_at = row_index(b, n, z - 1, yy);
            const int64_t m = label_runs(b->labels + other_at, width, before);
            const int64_t g = near[i].grow;
            int64_t jj = 0;
            for (int64_t r = 0; r < k; r++) {
                const int64_t s = here[r].start, e = here[r].end;
                while (jj < m && before[jj].end + g <= s) jj++;
                for (int64_t j = jj; j < m && before[j].start < e + g; j++) {
                    if (b->rules.tau_mode &&
                        !RUNS_JOIN[b->image_type](image + at * image_bytes,
                                                  image + other_at * image_bytes, s, e,
                                                  before[j].start, before[j].end, g,
                                                  &tolerance))
                        continue;
                    join_slot_sets(b->forest, slot + local[here[r].label],
                                   slot_before + local_before[before[j].label]);
                }
            }
        }
    }
}

/* Per volume lo..hi-1: join local components across the slabs' seams (each slot a set of
 * its own first), then number the components 1..K in raster order: forest[first[t] + local
 * id] = component (0 at the background slots); components[n] = K, components_before[t] =
 * the components numbered in its slabs before slab t. Returns 0, -1 out of memory, or
 * GCCL_STOPPED. */
int gccl_volume_merge_seams(const gccl_volumes *b, int64_t lo, int64_t hi) {
    gccl_run *here = malloc(sizeof(gccl_run) * (size_t)b->width);
    gccl_run *before = malloc(sizeof(gccl_run) * (size_t)b->width);
    const int failed = !here || !before;
    int code = failed ? -1 : 0;
    for (int64_t n = lo; n < hi && code == 0; n++) {
        const int64_t t_lo = b->volume_tasks[n], t_hi = b->volume_tasks[n + 1];
        if (gccl_stopping((t_hi - t_lo) * b->height * (b->width + 1))) {
            code = GCCL_STOPPED;
            break;
        }
        for (int64_t i = b->first[t_lo]; i < b->first[t_hi]; i++) b->forest[i] = i;
        for (int64_t t = t_lo + 1; t < t_hi; t++) join_seam(b, n, t, here, before);
        int64_t k = 0; /* the forest flattened over the volume's slots, in order */
        for (int64_t t = t_lo; t < t_hi; t++) {
            b->components_before[t] = k;
            b->forest[b->first[t]] = 0;
            for (int64_t i = b->first[t] + 1; i < b->first[t + 1]; i++) {
                const int64_t f = b->forest[i];
                b->forest[i] = f < i ? b->forest[f] : ++k;
            }
        }
        b->components[n] = k;
    }
    free(here);
    free(before);
    return code;
}

/* Per volume lo..hi-1: kept[n] = volume n's kept components and, where counts_voxels (else
 * every component keeps its number: kept_ids), kept_id[c] = the new label of component c
 * (0 where it has fewer than min_area voxels), numbered 1.. per volume (with `selecting`,
 * the host's, from component_area), each component's voxels in component_area (and where
 * keeps_magnitude its largest finite |v| in component_magnitude). */
int gccl_volume_keep(const gccl_volumes *b, int64_t lo, int64_t hi) {
    for (int64_t n = lo; n < hi; n++) {
        const int64_t before = b->component_first[n] - 1; /* component c is [before + c] */
        if (!counts_voxels(b)) { /* all kept, as they are (kept_ids) */
            b->kept[n] = b->components[n];
            continue;
        }
        int64_t *area = b->component_area + before;
        int64_t *magnitude = keeps_magnitude(b) ? b->component_magnitude + before : NULL;
        for (int64_t c = 1; c <= b->components[n]; c++) {
            area[c] = 0;
            if (magnitude) magnitude[c] = 0;
        }
        for (int64_t t = b->volume_tasks[n]; t < b->volume_tasks[n + 1]; t++) {
            const gccl_slab *slab = &b->slabs[t];
            const int64_t *forest = b->forest + b->first[t];
            for (int64_t local = 1; local <= slab->locals; local++) {
                const int64_t c = forest[local];
                area[c] += slab->area[local];
                if (magnitude && slab->magnitude[local] > magnitude[c])
                    magnitude[c] = slab->magnitude[local];
            }
        }
        if (b->selecting) continue;
        int64_t k = 0;
        for (int64_t c = 1; c <= b->components[n]; c++) {
            b->kept_id[before + c] = area[c] >= b->min_area ? ++k : 0;
        }
        b->kept[n] = k;
    }
    return 0;
}

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
    dst->lo = src->lo < dst->lo ? src->lo : dst->lo;
    dst->hi = src->hi > dst->hi ? src->hi : dst->hi;
    dst->x_min = src->x_min < dst->x_min ? src->x_min : dst->x_min;
    dst->x_max = src->x_max > dst->x_max ? src->x_max : dst->x_max;
    dst->y_min = src->y_min < dst->y_min ? src->y_min : dst->y_min;
    dst->y_max = src->y_max > dst->y_max ? src->y_max : dst->y_max;
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

/* Release the state of slabs lo..hi-1 (any of its arrays may be missing). */
int gccl_volume_free(const gccl_volumes *b, int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; t++) {
        gccl_slab *slab = &b->slabs[t];
        const int64_t rows = (b->tasks[3 * t + 2] - b->tasks[3 * t + 1]) * b->height;
        release(slab->row_labels, row_label_bytes(rows));
        release(slab->bits, bits_bytes(rows, b->width));
        release(slab->parent, sizeof(int32_t) * (size_t)slab->labels_held);
        release(slab->area, sizeof(int64_t) * (size_t)slab->labels_held);
        release(slab->magnitude, sizeof(int64_t) * (size_t)slab->labels_held);
        memset(slab, 0, sizeof *slab);
    }
    return 0;
}
