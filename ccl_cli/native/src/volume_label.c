/* The volume engine's first pass (volume.h): each slab's runs joined into sets by a
 * union-find, in binary mode from the slab's foreground bits, in tau mode run by run, and
 * the slab's labels flattened to local ids. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "volume_slab.h"

#define PIXEL_TEMPLATE "volume_joins.h"
#include "pixel_types.h"

typedef int64_t (*tau_runs_of)(const void *, const uint8_t *, int64_t, const gccl_rules *,
                               int64_t *);
typedef int (*runs_join_of)(const void *, const void *, int64_t, int64_t, int64_t, int64_t,
                            int64_t, const gccl_rules *);
typedef int64_t (*run_magnitude_of)(const void *, int64_t, int64_t);

static const row_rule FOREGROUND_ROW[GCCL_TYPES] = BY_TYPE(foreground_row);
static const tau_runs_of TAU_ROW_RUNS[GCCL_TYPES] = BY_TYPE(tau_row_runs);
static const runs_join_of RUNS_JOIN[GCCL_TYPES] = BY_TYPE(runs_join);

/* Float volumes' run_magnitude, by value type (NULL for integer types). */
static run_magnitude_of run_magnitude_for(int64_t type) {
    return type == GCCL_F32 ? run_magnitude_f32 : type == GCCL_F64 ? run_magnitude_f64 : NULL;
}

/* Room in the slab's label arrays for one label more than it has (grow_labels where there
 * is none; a check per run, so apart from the growing). Returns 0, or -1 out of memory. */
static inline int room_for_label(gccl_slab *slab, int magnitudes) {
    return slab->labels + 1 < slab->labels_held ? 0 : gccl_grow_labels(slab, magnitudes);
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
    if (gccl_start_slab(slab, (z1 - z0) * height, width) != 0) return -1;
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
    if (gccl_start_slab(slab, (z1 - z0) * height, width) != 0) return -1;
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

