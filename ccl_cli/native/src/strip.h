/* The loops that read pixels, once per pixel type: engine.c includes this file through
 * pixel_types.h, which defines PIXEL, PIXEL_MIN, PIXEL_MAX, SUFFIX and FLOATING.
 * The same functions serve an image read for its foreground and joins and values read for
 * their statistics, which may be of different types (a mask after morphology). */


#if FLOATING
/* A float pixel's (|v| bits when finite, else 0; order key); see gccl_record. */
static inline void CAT(float_value, SUFFIX)(PIXEL v, int64_t *magnitude, int64_t *key) {
    double fv = (double)v;
    *key = order_key(float_bits(fv));
    *magnitude = isfinite(fv) ? float_bits(fabs(fv)) : 0;
}
#endif

/* The statistics of pixels s..e-1 of one row of values, added to record `r` as a run. */
static inline void CAT(add_run, SUFFIX)(gccl_record *r, const PIXEL *row, int64_t s,
                                        int64_t e, int64_t y) {
#if FLOATING
    int64_t magnitude, key;
    CAT(float_value, SUFFIX)(row[s], &magnitude, &key);
    int64_t total = magnitude, lo = key, hi = key;
    for (int64_t x = s + 1; x < e; x++) {
        CAT(float_value, SUFFIX)(row[x], &magnitude, &key);
        total = magnitude > total ? magnitude : total;
        lo = key < lo ? key : lo;
        hi = key > hi ? key : hi;
    }
    add_run(r, e - s, s, y, total, lo, hi, 1);
#else
    int64_t total = 0;
    PIXEL lo = row[s], hi = row[s];
    for (int64_t x = s; x < e; x++) {
        PIXEL v = row[x];
        total += v;
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    add_run(r, e - s, s, y, total, (int64_t)lo, (int64_t)hi, 0);
#endif
}

/* Binary first pass over rows r0..r1-1 of one image, run by run (labels from
 * r0 * width + 1, label l's record at acc[off + l]); returns the last label made, or -1
 * where it was stopped (gccl_stopping).
 *
 * A run joins every run of the row above that touches it (8-connectivity: also
 * diagonally); a run touching none starts a label, so labels are made in raster order of
 * their first pixel. runs and above: two (2 * width + 2) buffers, the run bounds of this
 * row and of the previous one. */
static int64_t CAT(binary_strip, SUFFIX)(const gccl_batch *b, const uint8_t *image,
                                         row_rule foreground, const void *value_pixels,
                                         int32_t *prov, int32_t *parent, int64_t r0,
                                         int64_t r1, int64_t off, uint8_t *fg, int64_t *runs,
                                         int64_t *above) {
    const int64_t width = b->width;
    const int64_t grow = b->connectivity == 8 ? 1 : 0;
    const int64_t pixel_bytes = type_bytes(b->image_type);
    const PIXEL *values = (const PIXEL *)value_pixels;
    int64_t n = r0 * width;
    int64_t n_above = 0;
    for (int64_t y = r0; y < r1; y++) {
        if (gccl_stopping(width + 1)) return -1;
        foreground(image + y * width * pixel_bytes, width, b->rules.rule, b->rules.rule_value, fg);
        int64_t k = row_runs(fg, width, runs);
        int32_t *cur = prov + y * width;
        const int32_t *up = y > r0 ? cur - width : cur; /* read only below the strip's top */
        const PIXEL *vrow = values + y * width;
        int64_t j = 0;
        memset(cur, 0, sizeof(int32_t) * (size_t)width); /* one store of the row, then the runs */
        for (int64_t i = 0; i < k; i++) {
            int64_t s = runs[2 * i], e = runs[2 * i + 1];
            while (j < n_above && above[2 * j + 1] + grow <= s) j++;
            int32_t label = 0;
            for (int64_t jj = j; jj < n_above && above[2 * jj] < e + grow; jj++) {
                int32_t q = up[above[2 * jj]];
                if (label == 0) {
                    label = q;
                } else if (label != q) {
                    label = unite(parent, label, q);
                }
            }
            if (label == 0) {
                n = new_label(parent, b->acc, n, off);
                label = (int32_t)n;
            }
            for (int64_t xx = s; xx < e; xx++) cur[xx] = label;
            CAT(add_run, SUFFIX)(&b->acc[off + label], vrow, s, e, y);
        }
        int64_t *swap = runs;
        runs = above;
        above = swap;
        n_above = k;
    }
    return n;
}

/* The statistics of a tau row's runs (tau_row), each summed into its label's record. */
static void CAT(tau_runs, SUFFIX)(const gccl_batch *b, const int64_t *runs, int64_t k,
                                  const int32_t *cur, const void *value_row, int64_t y,
                                  int64_t off) {
    const PIXEL *vrow = (const PIXEL *)value_row;
    for (int64_t i = 0; i < k; i++) {
        int64_t s = runs[2 * i], e = runs[2 * i + 1];
        CAT(add_run, SUFFIX)(&b->acc[off + cur[s]], vrow, s, e, y);
    }
}

#define LARGER(a, b) ((a) > (b) ? (a) : (b))

/* r[x] = the reach of row[x] under a growing tolerance: tolerance(|row[x]|), for integer
 * pixels as the largest integer difference within it (at most the type's span); 8- and
 * 16-bit types look it up in b->reaches, made once per tolerance by labels.py. The
 * tolerance never decreases as m grows (each rounded product and sum of non-negative
 * terms is monotonic), so neighbours p, q join within LARGER(r[p], r[q]), which is the
 * reach of max(|v(p)|, |v(q)|): one tolerance per pixel, not one per pair. */
static void CAT(reach_row, SUFFIX)(const PIXEL *row, int64_t width, const gccl_batch *b,
                                   REACH *r) {
#if FLOATING
    const gccl_rules rules = b->rules;
    for (int64_t x = 0; x < width; x++) r[x] = tolerance(fabs((double)row[x]), &rules);
#elif PIXEL_MAX <= UINT16_MAX
    const int32_t *reaches = b->reaches - (int64_t)PIXEL_MIN;
    for (int64_t x = 0; x < width; x++) r[x] = (REACH)reaches[row[x]];
#else
    const gccl_rules rules = b->rules;
    const double span = (double)PIXEL_MAX - (double)PIXEL_MIN;
    for (int64_t x = 0; x < width; x++) {
        const double t = tolerance(fabs((double)row[x]), &rules);
        r[x] = t >= span ? (REACH)span : t > 0 ? (REACH)t : 0;
    }
#endif
}

/* m[x] for row y (tau_row): its foreground bit, and which neighbours it joins within
 * LIMIT(x, i_near, reach_row_near), the reach of pixel x and a neighbour at i_near of the
 * row `near` (`reaches` of this row, `above_reaches` of the row above). */
#define JOIN_FLAGS(LIMIT)                                                                    \
    do {                                                                                     \
        m[0] = fg[0];                                                                        \
        for (int64_t x = 1; x < width; x++) {                                                \
            m[x] = fg[x] | (uint8_t)((fg[x] & fg[x - 1] &                                    \
                                      NEAR(row[x], row[x - 1], LIMIT(x, x - 1, reaches)))    \
                                     << 1);                                                  \
        }                                                                                    \
        if (y > r0) {                                                                        \
            for (int64_t x = 0; x < width; x++) {                                            \
                m[x] |= (uint8_t)((fg[x] & fg_above[x] &                                     \
                                   NEAR(row[x], above[x], LIMIT(x, x, above_reaches)))      \
                                  << 2);                                                     \
            }                                                                                \
            if (b->connectivity == 8) {                                                      \
                for (int64_t x = 1; x < width; x++) {                                        \
                    m[x] |= (uint8_t)((fg[x] & fg_above[x - 1] &                             \
                                       NEAR(row[x], above[x - 1],                            \
                                            LIMIT(x, x - 1, above_reaches)))                 \
                                      << 3);                                                 \
                }                                                                            \
                for (int64_t x = 0; x + 1 < width; x++) {                                    \
                    m[x] |= (uint8_t)((fg[x] & fg_above[x + 1] &                             \
                                       NEAR(row[x], above[x + 1],                            \
                                            LIMIT(x, x + 1, above_reaches)))                 \
                                      << 4);                                                 \
                }                                                                            \
            }                                                                                \
        }                                                                                    \
    } while (0)
#define FIXED_LIMIT(x, near, near_reaches) reach
#define GROWING_LIMIT(x, near, near_reaches) LARGER(reaches[x], near_reaches[near])

/* Tau first pass over rows r0..r1-1 of one image (as binary_strip, each pixel on its
 * own): m[x] says which neighbours pixel x joins (tau_row), compared in the pixel type
 * for integers. fg and fg_above: this row's foreground and the row above's; settled: the
 * row's settled pixels (settled_pixels); run_list: the row's runs (2 * width); reach_rows:
 * two rows of REACH (reach_row) for a growing tolerance. Returns the last label made, or
 * -1 where it was stopped. */
static int64_t CAT(tau_strip, SUFFIX)(const gccl_batch *b, const uint8_t *image,
                                      const uint8_t *values, run_statistics runs, int32_t *prov,
                                      int32_t *parent, int64_t r0, int64_t r1, int64_t off,
                                      uint8_t *fg, uint8_t *fg_above, uint8_t *m,
                                      uint8_t *settled, int64_t *run_list, void *reach_rows) {
    const int64_t width = b->width;
    const int64_t value_row = width * type_bytes(b->value_type);
    const PIXEL *pixels = (const PIXEL *)image;
    const REACH reach = REACH_OF_TAU(b->rules.tau);
    const int grows = growing(&b->rules);
    REACH *reaches = (REACH *)reach_rows, *above_reaches = reaches + width;
    int64_t n = r0 * width;
    for (int64_t y = r0; y < r1; y++) {
        if (gccl_stopping(width + 1)) return -1;
        const PIXEL *row = pixels + y * width;
        const PIXEL *above = y > r0 ? row - width : row; /* read only below the strip's top */
        CAT(foreground_row, SUFFIX)(row, width, b->rules.rule, b->rules.rule_value, fg);
        if (grows) {
            CAT(reach_row, SUFFIX)(row, width, b, reaches);
            JOIN_FLAGS(GROWING_LIMIT);
            REACH *swap = reaches;
            reaches = above_reaches;
            above_reaches = swap;
        } else {
            JOIN_FLAGS(FIXED_LIMIT);
        }
        int32_t *cur = prov + y * width;
        const int32_t *up = y > r0 ? cur - width : cur;
        if (y > r0) {
            settled_pixels(m, up, width, b->connectivity == 8, settled);
        } else {
            memset(settled, 0, (size_t)width);
        }
        int64_t k = tau_row(m, settled, up, cur, parent, b->acc, &n, off, width, run_list);
        runs(b, run_list, k, cur, values + y * value_row, y, off);
        uint8_t *swap = fg;
        fg = fg_above;
        fg_above = swap;
    }
    return n;
}

#undef LARGER
#undef JOIN_FLAGS
#undef FIXED_LIMIT
#undef GROWING_LIMIT

/* sums[off + local id] += trunc(v * 2**shift[same]) over the finite pixels of rows r0..r1-1
 * (float images; par maps each provisional label to its strip's local id). */
static void CAT(float_terms, SUFFIX)(const gccl_batch *b, const void *value_pixels,
                                     const int32_t *labels, const int32_t *par, int64_t r0,
                                     int64_t r1, int64_t off) {
    const int64_t width = b->width;
    const PIXEL *values = (const PIXEL *)value_pixels;
    for (int64_t y = r0; y < r1; y++) {
        for (int64_t x = 0; x < width; x++) {
            int32_t p = labels[y * width + x];
            if (p == 0) continue;
            double fv = (double)values[y * width + x];
            if (!isfinite(fv)) continue;
            int64_t i = off + par[p];
            b->sums[i] += (int64_t)trunc(ldexp(fv, (int)b->shift[i]));
        }
    }
}
