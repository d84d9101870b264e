/* The volume engine's joins of voxels, once per pixel type: the first pass and the seams
 * include this file through pixel_types.h, which defines PIXEL, PIXEL_MIN, PIXEL_MAX,
 * SUFFIX and FLOATING. Its functions are inline: a file uses some of them. */


/* Whether voxels u and v join under t's tolerance: NEAR within tau's reach where it is
 * tau, else within the tolerance of the larger magnitude in float64 (exact for every pixel
 * type). */
#define JOINS(u, v) (grows ? values_join((double)(u), (double)(v), t) : NEAR(u, v, reach))

/* A tau row's runs: stretches of foreground voxels (fg) each joining its left neighbour;
 * runs[2 i], runs[2 i + 1] = start and end (exclusive) of run i; returns their number. */
static inline int64_t CAT(tau_row_runs, SUFFIX)(const void *pixels, const uint8_t *fg, int64_t width,
                                         const gccl_rules *t, int64_t *runs) {
    const PIXEL *row = (const PIXEL *)pixels;
    const REACH reach = REACH_OF_TAU(t->tau);
    const int grows = growing(t);
    int64_t k = 0, x = 0;
    while (x < width) {
        if (!fg[x]) {
            x++;
            continue;
        }
        runs[2 * k] = x;
        x++;
        while (x < width && fg[x] && JOINS(row[x], row[x - 1])) x++;
        runs[2 * k + 1] = x;
        k++;
    }
    return k;
}

/* Whether a voxel of [s, e) in `row` joins a voxel of [s2, e2) in the neighbouring row
 * `other` at most `grow` columns away (0: face to face, 1: diagonally too). */
static inline int CAT(runs_join, SUFFIX)(const void *row_pixels, const void *other_pixels, int64_t s,
                                  int64_t e, int64_t s2, int64_t e2, int64_t grow,
                                  const gccl_rules *t) {
    const PIXEL *row = (const PIXEL *)row_pixels, *other = (const PIXEL *)other_pixels;
    const REACH reach = REACH_OF_TAU(t->tau);
    const int grows = growing(t);
    int64_t lo = s > s2 - grow ? s : s2 - grow, hi = e < e2 + grow ? e : e2 + grow;
    for (int64_t x = lo; x < hi; x++) {
        int64_t from = x - grow < s2 ? s2 : x - grow, to = x + grow >= e2 ? e2 - 1 : x + grow;
        for (int64_t x2 = from; x2 <= to; x2++) {
            if (JOINS(row[x], other[x2])) return 1;
        }
    }
    return 0;
}

#undef JOINS

#if FLOATING
/* The largest finite |v| of voxels s..e-1 of a row (float64 bits; 0 where none is). */
static inline int64_t CAT(run_magnitude, SUFFIX)(const void *value_row, int64_t s, int64_t e) {
    const PIXEL *row = (const PIXEL *)value_row;
    int64_t top = 0;
    for (int64_t x = s; x < e; x++) {
        double fv = (double)row[x];
        int64_t magnitude = isfinite(fv) ? float_bits(fabs(fv)) : 0;
        top = magnitude > top ? magnitude : top;
    }
    return top;
}
#endif
