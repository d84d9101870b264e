/* The volume engine's loops that read voxels, once per pixel type: volume.c includes this
 * file with PIXEL, PIXEL_MIN, PIXEL_MAX, SUFFIX and FLOATING defined (as engine.c includes
 * strip.h), which it undefines at its end. */

#define CAT2(a, b) a##_##b
#define CAT(a, b) CAT2(a, b)

#if FLOATING
#define CLOSE(u, v) close_values((double)(u), (double)(v), reach)
#define REACH double
#elif PIXEL_MIN == 0
/* Unsigned voxels join when their distance, exact in the pixel type, is within the reach. */
#define CLOSE(u, v) ((PIXEL)((u) > (v) ? (u) - (v) : (v) - (u)) <= reach)
#define REACH PIXEL
#else
#if PIXEL_MAX > INT16_MAX
#define WIDE int64_t
#else
#define WIDE int32_t
#endif
#define CLOSE(u, v) ((((WIDE)(u) - (WIDE)(v)) <= reach) & (((WIDE)(v) - (WIDE)(u)) <= reach))
#define REACH WIDE
#endif

/* Whether voxels u and v join under tolerance t: CLOSE where it is tau, else the tolerance
 * of the larger magnitude in float64 (exact for every pixel type). */
#define JOINS(u, v) (t->growing ? grown_join((double)(u), (double)(v), t) : CLOSE(u, v))

/* The reach of CLOSE: tau itself for floats, the largest integer difference within tau
 * for integers. */
static inline REACH CAT(volume_reach, SUFFIX)(double tau) {
#if FLOATING
    return tau;
#else
    return (REACH)tau_reach(tau, (int64_t)PIXEL_MAX - (int64_t)PIXEL_MIN);
#endif
}

/* A tau row's runs: stretches of foreground voxels (fg) each joining its left neighbour;
 * runs[2 i], runs[2 i + 1] = start and end (exclusive) of run i; returns their number. */
static int64_t CAT(tau_row_runs, SUFFIX)(const void *pixels, const uint8_t *fg, int64_t width,
                                         const volume_tolerance *t, int64_t *runs) {
    const PIXEL *row = (const PIXEL *)pixels;
    const REACH reach = CAT(volume_reach, SUFFIX)(t->tau);
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
static int CAT(runs_join, SUFFIX)(const void *row_pixels, const void *other_pixels, int64_t s,
                                  int64_t e, int64_t s2, int64_t e2, int64_t grow,
                                  const volume_tolerance *t) {
    const PIXEL *row = (const PIXEL *)row_pixels, *other = (const PIXEL *)other_pixels;
    const REACH reach = CAT(volume_reach, SUFFIX)(t->tau);
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
#undef CLOSE
#undef REACH
#ifdef WIDE
#undef WIDE
#endif

#if FLOATING
/* The largest finite |v| of voxels s..e-1 of a row (float64 bits; 0 where none is). */
static int64_t CAT(run_magnitude, SUFFIX)(const void *value_row, int64_t s, int64_t e) {
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

/* The statistics of voxels s..e-1 of row (z, y) of values, added to record r (float
 * volumes: each finite value's term trunc(v * 2**shift)). */
static void CAT(volume_add_run, SUFFIX)(gccl_volume_record *r, const void *value_row, int64_t s,
                                        int64_t e, int64_t y, int64_t z, int64_t shift) {
    const PIXEL *row = (const PIXEL *)value_row;
    const int64_t length = e - s;
    r->area += length;
    r->sum_x += length * (s + e - 1) / 2;
    r->sum_y += length * y;
    r->sum_z += length * z;
#if FLOATING
    int64_t total = (int64_t)r->sum_low, lo = r->lo, hi = r->hi;
    for (int64_t x = s; x < e; x++) {
        double fv = (double)row[x];
        int64_t key = order_key(float_bits(fv));
        if (isfinite(fv)) total += (int64_t)trunc(ldexp(fv, (int)shift));
        lo = key < lo ? key : lo;
        hi = key > hi ? key : hi;
    }
    r->sum_low = (uint64_t)total;
    r->lo = lo;
    r->hi = hi;
#else
    (void)shift;
    int64_t total = 0;
    PIXEL lo = row[s], hi = row[s];
    for (int64_t x = s; x < e; x++) {
        PIXEL v = row[x];
        total += v;
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    add_wide(r, total);
    r->lo = (int64_t)lo < r->lo ? (int64_t)lo : r->lo;
    r->hi = (int64_t)hi > r->hi ? (int64_t)hi : r->hi;
#endif
    int32_t first = (int32_t)s, last = (int32_t)(e - 1), row_y = (int32_t)y, plane = (int32_t)z;
    r->x_min = first < r->x_min ? first : r->x_min;
    r->x_max = last > r->x_max ? last : r->x_max;
    r->y_min = row_y < r->y_min ? row_y : r->y_min;
    r->y_max = row_y > r->y_max ? row_y : r->y_max;
    r->z_min = plane < r->z_min ? plane : r->z_min;
    r->z_max = plane > r->z_max ? plane : r->z_max;
}

#undef CAT
#undef CAT2
#undef PIXEL
#undef PIXEL_MIN
#undef PIXEL_MAX
#undef SUFFIX
#undef FLOATING
