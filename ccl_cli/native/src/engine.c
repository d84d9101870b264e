/* The CPU labeling engine (engine.h says how a batch is labeled). labels.py calls each
 * entry point on ranges lo..hi-1 of tasks or images from several threads at once; every
 * call writes only its own part of the arrays, so the ranges change no result. */
#include "engine.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pool.h"
#include "rows.h"

static inline void clear_record(gccl_record *r) {
    r->area = r->sum_x = r->sum_y = r->total = 0;
    r->lo = LOW63;
    r->hi = -LOW63 - 1;
    r->x_min = r->y_min = INT32_MAX;
    r->x_max = r->y_max = -1;
}

/* Label n + 1: a set of its own with a cleared record acc[off + n + 1]. */
static inline int64_t new_label(int32_t *parent, gccl_record *acc, int64_t n, int64_t off) {
    n += 1;
    parent[n] = (int32_t)n;
    clear_record(&acc[off + n]);
    return n;
}

/* Add a run (pixels x0..x0+length-1 of row y) to record r. */
static inline void add_run(gccl_record *r, int64_t length, int64_t x0, int64_t y, int64_t total,
                           int64_t lo, int64_t hi, int floating) {
    r->area += length;
    r->sum_x += length * (2 * x0 + length - 1) / 2;
    r->sum_y += length * y;
    if (floating) {
        r->total = total > r->total ? total : r->total; /* |v| bits order as the floats */
    } else {
        r->total += total;
    }
    r->lo = lo < r->lo ? lo : r->lo;
    r->hi = hi > r->hi ? hi : r->hi;
    int32_t first = (int32_t)x0, last = (int32_t)(x0 + length - 1), row = (int32_t)y;
    r->x_min = first < r->x_min ? first : r->x_min;
    r->x_max = last > r->x_max ? last : r->x_max;
    r->y_min = row < r->y_min ? row : r->y_min;
    r->y_max = row > r->y_max ? row : r->y_max;
}

/* Record dst += record src. */
static inline void merge_record(gccl_record *dst, const gccl_record *src, int floating) {
    dst->area += src->area;
    dst->sum_x += src->sum_x;
    dst->sum_y += src->sum_y;
    if (floating) {
        dst->total = src->total > dst->total ? src->total : dst->total;
    } else {
        dst->total += src->total;
    }
    MERGE_EXTREMES(dst, src);
}

/* q's set joined to `label`'s (label 0: none yet); returns the label the pixel takes. */
static inline int32_t joined_label(int32_t *parent, int32_t label, int32_t q) {
    if (label == 0) return q;
    return label != q ? unite(parent, label, q) : label;
}

/* settled[x] = 1 where pixel x of a tau row (with a row above) adds no join to its run:
 * it joins its left neighbour, and the labels above that it joins are one label, the one
 * its left neighbour joined last. With 8-connectivity it joins up-left, up and up-right,
 * which hold one label, and its left neighbour joined up-right (this pixel's up); with 4 it
 * joins up, as its left neighbour did, and the two labels above are one. tau_row passes
 * over these pixels: most pixels of a smooth surface. */
static void settled_pixels(const uint8_t *m, const int32_t *up, int64_t width, int corners,
                           uint8_t *settled) {
    settled[0] = 0;
    if (corners) {
        for (int64_t x = 1; x + 1 < width; x++) {
            settled[x] = (uint8_t)((m[x] == 31) & (m[x - 1] >> 4) & (up[x - 1] == up[x]) &
                                   (up[x] == up[x + 1]));
        }
        if (width > 1) settled[width - 1] = 0; /* it has no up-right */
    } else {
        for (int64_t x = 1; x < width; x++) {
            settled[x] = (uint8_t)((m[x] == 7) & (m[x - 1] >> 2) & (up[x - 1] == up[x]));
        }
    }
}

/* x, or the first pixel from x on that is not settled (settled_pixels). */
static inline int64_t past_settled(const uint8_t *settled, int64_t x, int64_t width) {
    const uint64_t all = UINT64_C(0x0101010101010101);
    for (uint64_t word; x + 8 <= width; x += 8) {
        memcpy(&word, settled + x, 8);
        if (word != all) break;
    }
    while (x < width && settled[x]) x++;
    return x;
}

/* A tau row, run by run: a run is a foreground pixel (m[x] odd) and the pixels after it
 * that join their left neighbour (m[x] & 2), so it is one set and takes one label. Each
 * of its pixels joins the labels of the row above that m says it joins (4 up, 8 up-left,
 * 16 up-right; joins is not transitive, so every pixel counts); a run of the row above
 * has one label, so a label equal to the last one joined is passed over, and so are the
 * settled pixels (settled_pixels; all 0 for a strip's first row). A run that joins none
 * makes a label at its first pixel: labels are made in raster order of each new set's
 * first pixel. runs[2 i], runs[2 i + 1] = start and end (exclusive) of run i; returns
 * their number, with *n the last label made. */
static int64_t tau_row(const uint8_t *m, const uint8_t *settled, const int32_t *up,
                       int32_t *cur, int32_t *parent, gccl_record *acc, int64_t *n, int64_t off,
                       int64_t width, int64_t *runs) {
    int64_t k = 0, x = 0;
    while (x < width) {
        if (m[x] == 0) {
            cur[x++] = 0;
            continue;
        }
        int64_t x0 = x;
        int32_t label = 0, last = 0;
        do {
            uint8_t j = m[x];
            if (j & 8 && up[x - 1] != last) label = joined_label(parent, label, last = up[x - 1]);
            if (j & 4 && up[x] != last) label = joined_label(parent, label, last = up[x]);
            if (j & 16 && up[x + 1] != last) label = joined_label(parent, label, last = up[x + 1]);
            x = past_settled(settled, x + 1, width);
        } while (x < width && (m[x] & 2));
        if (label == 0) {
            *n = new_label(parent, acc, *n, off);
            label = (int32_t)*n;
        }
        for (int64_t i = x0; i < x; i++) cur[i] = label;
        runs[2 * k] = x0;
        runs[2 * k + 1] = x;
        k++;
    }
    return k;
}

typedef void (*run_statistics)(const gccl_batch *, const int64_t *, int64_t, const int32_t *,
                               const void *, int64_t, int64_t);

#define PIXEL_TEMPLATE "strip.h"
#include "pixel_types.h"

typedef int64_t (*strip_labeling)(const gccl_batch *, const uint8_t *, row_rule, const void *,
                                  int32_t *, int32_t *, int64_t, int64_t, int64_t, uint8_t *,
                                  int64_t *, int64_t *);
typedef int64_t (*tau_labeling)(const gccl_batch *, const uint8_t *, const uint8_t *,
                                run_statistics, int32_t *, int32_t *, int64_t, int64_t, int64_t,
                                uint8_t *, uint8_t *, uint8_t *, uint8_t *, int64_t *, void *);
typedef void (*mean_terms)(const gccl_batch *, const void *, const int32_t *, const int32_t *,
                           int64_t, int64_t, int64_t);

static const row_rule FOREGROUND_ROW[GCCL_TYPES] = BY_TYPE(foreground_row);
static const row_float64 FLOAT64_ROW[GCCL_TYPES] = BY_TYPE(float64_row);
static const strip_labeling BINARY_STRIP[GCCL_TYPES] = BY_TYPE(binary_strip);
static const run_statistics TAU_RUNS[GCCL_TYPES] = BY_TYPE(tau_runs);
static const tau_labeling TAU_STRIP[GCCL_TYPES] = BY_TYPE(tau_strip);
static const mean_terms FLOAT_TERMS[GCCL_TYPES] = BY_TYPE(float_terms);

/* A strip's labels base+1..last flattened to local ids 1..m (par[label] = local id), their
 * records summed into acc[at + local id - 1]; returns m. */
static int64_t flatten(int32_t *par, gccl_record *acc, int64_t base, int64_t last, int64_t at,
                       int floating) {
    int64_t m = 0;
    for (int64_t label = base + 1; label <= last; label++) {
        int32_t p = par[label];
        int64_t j = at + label - base - 1;
        if (p < label) {
            int32_t local = par[p];
            par[label] = local;
            merge_record(&acc[at + local - 1], &acc[j], floating);
        } else { /* no label merged into local id m yet: its record is a copy */
            m += 1;
            par[label] = (int32_t)m;
            if (at + m - 1 != j) acc[at + m - 1] = acc[j];
        }
    }
    return m;
}

static int64_t pixels_of(const gccl_batch *b) { return b->height * b->width; }

/* First pass of tasks lo..hi-1, then each task's labels flattened to local ids 1..m
 * (parent[label] = local id), its records summed into acc[acc_first[t] + local id - 1],
 * local_counts[t] = m and lasts[t] = its last label. Returns 0, -1 out of memory, or
 * GCCL_STOPPED. */
int gccl_label_strips(const gccl_batch *b, int64_t lo, int64_t hi) {
    const int64_t width = b->width, pixels = pixels_of(b);
    const int64_t image_bytes = pixels * type_bytes(b->image_type);
    const int64_t value_bytes = pixels * type_bytes(b->value_type);
    /* this row's foreground, the row above's, joins, settled pixels */
    uint8_t *fg = malloc((size_t)(4 * width));
    int64_t *runs = malloc(sizeof(int64_t) * (size_t)(4 * width + 4));
    /* a growing tolerance's reaches of this row and the row above (8 bytes or fewer each) */
    void *reaches = growing(&b->rules) ? malloc(sizeof(double) * (size_t)(2 * width)) : NULL;
    int code = !fg || !runs || (growing(&b->rules) && !reaches) ? -1 : 0;
    for (int64_t t = lo; t < hi && code == 0; t++) {
        int64_t n = b->tasks[3 * t], r0 = b->tasks[3 * t + 1], r1 = b->tasks[3 * t + 2];
        int64_t base = r0 * width, off = b->acc_first[t] - base - 1;
        const uint8_t *image = (const uint8_t *)b->image + n * image_bytes;
        const uint8_t *values = (const uint8_t *)b->values + n * value_bytes;
        int32_t *prov = b->prov + n * pixels, *parent = b->parent + n * (pixels + 1);
        int64_t last;
        if (b->rules.tau_mode) {
            last = TAU_STRIP[b->image_type](b, image, values, TAU_RUNS[b->value_type], prov,
                                            parent, r0, r1, off, fg, fg + width, fg + 2 * width,
                                            fg + 3 * width, runs, reaches);
        } else {
            last = BINARY_STRIP[b->value_type](b, image, FOREGROUND_ROW[b->image_type], values,
                                               prov, parent, r0, r1, off, fg, runs,
                                               runs + 2 * width + 2);
        }
        if (last < 0) {
            code = GCCL_STOPPED;
            break;
        }
        b->local_counts[t] = flatten(parent, b->acc, base, last, b->acc_first[t],
                                     (int)b->floating);
        b->lasts[t] = last;
    }
    free(fg);
    free(runs);
    free(reaches);
    return code;
}

static inline int64_t find(const int64_t *forest, int64_t i) {
    while (forest[i] < i) i = forest[i];
    return i;
}

/* Join the sets of g and h in the seam forest, the smaller root the root. */
static inline void join_slots(int64_t *forest, int64_t g, int64_t h) {
    int64_t rg = find(forest, g), rh = find(forest, h);
    if (rg < rh) {
        forest[rh] = rg;
    } else if (rh < rg) {
        forest[rg] = rh;
    }
}

/* Flatten the forest over the slots of tasks t_lo..t_hi-1: components 1..K in raster
 * order (0 at the background slots); returns K. */
static int64_t number_components(int64_t *forest, const int64_t *first, int64_t t_lo,
                                 int64_t t_hi) {
    int64_t k = 0;
    for (int64_t t = t_lo; t < t_hi; t++) {
        forest[first[t]] = 0;
        for (int64_t i = first[t] + 1; i < first[t + 1]; i++) {
            int64_t f = forest[i];
            if (f < i) {
                forest[i] = forest[f];
            } else {
                forest[i] = ++k;
            }
        }
    }
    return k;
}

/* Per image lo..hi-1: join local components across strip seams (in tau mode only
 * neighbours within tau), then number the components 1..K in raster order:
 * forest[first[t] + local id] = component (0 at the background slots first[t]);
 * components[n] = K. Returns 0, -1 out of memory, or GCCL_STOPPED. */
int gccl_merge_seams(const gccl_batch *b, int64_t lo, int64_t hi) {
    const int64_t width = b->width, pixels = pixels_of(b);
    const int64_t image_row = width * type_bytes(b->image_type);
    const int corners = b->connectivity == 8;
    double *f = b->rules.tau_mode ? malloc(sizeof(double) * (size_t)(2 * width)) : NULL;
    if (b->rules.tau_mode && !f) return -1;
    for (int64_t n = lo; n < hi; n++) {
        const int32_t *labels = b->prov + n * pixels, *par = b->parent + n * (pixels + 1);
        const uint8_t *image = (const uint8_t *)b->image + n * pixels * type_bytes(b->image_type);
        int64_t t_lo = b->image_tasks[n], t_hi = b->image_tasks[n + 1];
        if (gccl_stopping((t_hi - t_lo) * (width + 1))) {
            free(f);
            return GCCL_STOPPED;
        }
        for (int64_t t = t_lo + 1; t < t_hi; t++) {
            int64_t y = b->tasks[3 * t + 1];
            int64_t here = b->first[t], above = b->first[t - 1];
            const int32_t *row = labels + y * width, *up = row - width;
            if (f) {
                FLOAT64_ROW[b->image_type](image + y * image_row, width, f);
                FLOAT64_ROW[b->image_type](image + (y - 1) * image_row, width, f + width);
            }
            for (int64_t x = 0; x < width; x++) {
                int32_t p = row[x];
                if (p == 0) continue;
                int64_t x_lo = corners && x > 0 ? x - 1 : x;
                int64_t x_hi = corners && x + 1 < width ? x + 1 : x;
                for (int64_t xn = x_lo; xn <= x_hi; xn++) {
                    int32_t q = up[xn];
                    if (q != 0 && (!f || values_join(f[x], f[width + xn], &b->rules))) {
                        join_slots(b->forest, here + par[p], above + par[q]);
                    }
                }
            }
        }
        b->components[n] = number_components(b->forest, b->first, t_lo, t_hi);
    }
    free(f);
    return 0;
}

/* Records of each image's (lo..hi-1) components from its local records, in place: component
 * k of image n goes to acc[acc_first[image_tasks[n]] + k - 1], the image's own part of acc,
 * which holds a record per label its strips might have made. The seams numbered the
 * components in slot order, so a component's first slot is met when it is one past the
 * last one met: that record is copied, the later ones are added. Component k's first slot
 * is at that index or after it (each component before it had a slot of its own), and the
 * slots are read in index order, so a record is written only where one has been read. */
int gccl_reduce_stats(const gccl_batch *b, int64_t lo, int64_t hi) {
    for (int64_t n = lo; n < hi; n++) {
        /* component k is stats[k] */
        gccl_record *stats = b->acc + b->acc_first[b->image_tasks[n]] - 1;
        int64_t met = 0;
        for (int64_t t = b->image_tasks[n]; t < b->image_tasks[n + 1]; t++) {
            for (int64_t local = 1; local < b->first[t + 1] - b->first[t]; local++) {
                int64_t k = b->forest[b->first[t] + local];
                const gccl_record *record = &b->acc[b->acc_first[t] + local - 1];
                if (k > met) {
                    met = k;
                    if (&stats[k] != record) stats[k] = *record;
                } else {
                    merge_record(&stats[k], record, (int)b->floating);
                }
            }
        }
    }
    return 0;
}

/* The records gccl_reduce_stats left in each image's part of acc, moved down to
 * stats[component_first[n]..] (stats is the start of acc), images lo..hi-1 in order on one
 * thread: an image's records move to below where they are, above the images before it. */
int gccl_pack_stats(const gccl_batch *b, int64_t lo, int64_t hi) {
    for (int64_t n = lo; n < hi; n++) {
        const gccl_record *from = b->acc + b->acc_first[b->image_tasks[n]];
        gccl_record *to = b->stats + b->component_first[n];
        if (to != from) memmove(to, from, sizeof(gccl_record) * (size_t)b->components[n]);
    }
    return 0;
}

/* sums[first[t] + local id] = sum over its finite pixels of trunc(v * 2**shift[same]), for
 * tasks lo..hi-1 of a float batch. Returns 0, or GCCL_STOPPED. */
int gccl_float_terms(const gccl_batch *b, int64_t lo, int64_t hi) {
    const int64_t pixels = pixels_of(b), value_bytes = pixels * type_bytes(b->value_type);
    for (int64_t t = lo; t < hi; t++) {
        int64_t n = b->tasks[3 * t], r0 = b->tasks[3 * t + 1], r1 = b->tasks[3 * t + 2];
        if (gccl_stopping((r1 - r0) * (b->width + 1))) return GCCL_STOPPED;
        int64_t off = b->first[t];
        for (int64_t i = off; i < b->first[t + 1]; i++) b->sums[i] = 0;
        FLOAT_TERMS[b->value_type](b, (const uint8_t *)b->values + n * value_bytes,
                                   b->prov + n * pixels, b->parent + n * (pixels + 1), r0, r1,
                                   off);
    }
    return 0;
}

/* kept_id[c] = the new label of component c (0 if its area is below min_area), numbered
 * 1.. per image; kept[n] = image n's kept components (images lo..hi-1). */
int gccl_keep_components(const gccl_batch *b, int64_t lo, int64_t hi) {
    for (int64_t n = lo; n < hi; n++) {
        int64_t k = 0;
        for (int64_t c = b->component_first[n]; c < b->component_first[n + 1]; c++) {
            b->kept_id[c] = b->stats[c].area >= b->min_area ? ++k : 0;
        }
        b->kept[n] = k;
    }
    return 0;
}

/* The statistics columns of the kept components of images lo..hi-1, from row
 * kept_first[n]: ints = area, x, y, width, height; floats = centroid x and y, mean, min,
 * max (float images' means come from `mean`, integer means are made here). */
int gccl_kept_columns(const gccl_batch *b, int64_t lo, int64_t hi) {
    const int64_t rows = b->kept_first[b->count];
    int64_t *area = b->ints, *x = area + rows, *y = x + rows, *width = y + rows;
    int64_t *height = width + rows;
    double *centroid_x = b->floats, *centroid_y = centroid_x + rows, *mean = centroid_y + rows;
    double *v_min = mean + rows, *v_max = v_min + rows;
    for (int64_t n = lo; n < hi; n++) {
        int64_t before = b->kept_first[n] - 1;
        for (int64_t c = b->component_first[n]; c < b->component_first[n + 1]; c++) {
            if (b->kept_id[c] == 0) continue;
            int64_t r = before + b->kept_id[c];
            const gccl_record *s = &b->stats[c];
            area[r] = s->area;
            x[r] = s->x_min;
            y[r] = s->y_min;
            width[r] = s->x_max - s->x_min + 1;
            height[r] = s->y_max - s->y_min + 1;
            centroid_x[r] = (double)s->sum_x / (double)s->area;
            centroid_y[r] = (double)s->sum_y / (double)s->area;
            if (b->floating) {
                mean[r] = b->mean[c];
                v_min[r] = bits_float(order_key(s->lo));
                v_max[r] = bits_float(order_key(s->hi));
            } else {
                mean[r] = (double)s->total / (double)s->area;
                v_min[r] = (double)s->lo;
                v_max[r] = (double)s->hi;
            }
        }
    }
    return 0;
}

/* Pixels gccl_write_labels writes between two looks at a stop. */
#define WRITE_BLOCK (INT64_C(1) << 16)

/* labels[n] = the final label of each pixel (0 for background and for components
 * min-area dropped), over tasks lo..hi-1 of the images with chosen[n].
 *
 * Each of the task's labels first gets its final label in place of its local id
 * (parent[label]; parent[0] stays 0, the background), so that a pixel costs one lookup.
 * Every task is written by one call only: the mapping is not applied twice. Returns 0, or
 * GCCL_STOPPED (some labels are then not written). */
int gccl_write_labels(const gccl_batch *b, int64_t lo, int64_t hi) {
    const int64_t width = b->width, pixels = pixels_of(b);
    for (int64_t t = lo; t < hi; t++) {
        int64_t n = b->tasks[3 * t], r0 = b->tasks[3 * t + 1], r1 = b->tasks[3 * t + 2];
        if (!b->chosen[n]) continue;
        const int32_t *labels = b->prov + n * pixels;
        int32_t *par = b->parent + n * (pixels + 1);
        const int64_t *forest = b->forest + b->first[t];
        int64_t before = b->component_first[n] - 1; /* component k is kept_id[before + k] */
        for (int64_t label = r0 * width + 1; label <= b->lasts[t]; label++) {
            par[label] = (int32_t)b->kept_id[before + forest[par[label]]];
        }
        /* blocks of rows of about WRITE_BLOCK pixels, with a look at a stop between them */
        const int64_t block = WRITE_BLOCK / (width + 1) + 1;
        for (int64_t y = r0; y < r1; y += block) {
            const int64_t y_end = y + block < r1 ? y + block : r1;
            if (gccl_stopping((y_end - y) * (width + 1))) return GCCL_STOPPED;
            const int64_t lo_pixel = y * width, hi_pixel = y_end * width;
            if (b->label_bytes == 2) {
                uint16_t *dst = (uint16_t *)b->labels + n * pixels;
                for (int64_t i = lo_pixel; i < hi_pixel; i++) dst[i] = (uint16_t)par[labels[i]];
            } else {
                uint32_t *dst = (uint32_t *)b->labels + n * pixels;
                for (int64_t i = lo_pixel; i < hi_pixel; i++) dst[i] = (uint32_t)par[labels[i]];
            }
        }
    }
    return 0;
}
