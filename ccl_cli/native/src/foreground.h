/* A row's foreground and float64 values, once per pixel type: rows.h includes this file
 * through pixel_types.h, which defines PIXEL, PIXEL_MIN, PIXEL_MAX, SUFFIX and FLOATING. */


/* fg[x] = whether row[x] is foreground under `rule`: the float64 comparison with a =
 * rule_value, which for integer pixels is made once into an integer one (no pixel is NaN,
 * and every pixel is an integer: v > a is v > floor(a), v < a is v < ceil(a), v != a holds
 * for all v where a is no value of the type). */
static inline void CAT(foreground_row, SUFFIX)(const void *pixels, int64_t width, int64_t rule,
                                               double rule_value, uint8_t *fg) {
    const double a = rule_value;
    const PIXEL *row = (const PIXEL *)pixels;
#if FLOATING
    switch (rule) {
    case GCCL_FG_NOT:
        for (int64_t x = 0; x < width; x++) {
            double v = (double)row[x];
            fg[x] = (v != a) & (v == v);
        }
        break;
    case GCCL_FG_ABOVE:
        for (int64_t x = 0; x < width; x++) fg[x] = (double)row[x] > a;
        break;
    case GCCL_FG_BELOW:
        for (int64_t x = 0; x < width; x++) fg[x] = (double)row[x] < a;
        break;
    default:
        for (int64_t x = 0; x < width; x++) {
            double v = (double)row[x];
            fg[x] = v == v;
        }
    }
#else
    const double low = (double)PIXEL_MIN, high = (double)PIXEL_MAX;
    int all = 1; /* every pixel foreground (1), none (0), or compared below (-1) */
    if (rule == GCCL_FG_NOT && a == floor(a) && a >= low && a <= high) {
        const PIXEL t = (PIXEL)a;
        for (int64_t x = 0; x < width; x++) fg[x] = row[x] != t;
        all = -1;
    } else if (rule == GCCL_FG_ABOVE) {
        all = !(a >= low) ? (a == a) : a >= high ? 0 : -1; /* NaN: no pixel */
        if (all < 0) {
            const PIXEL t = (PIXEL)floor(a);
            for (int64_t x = 0; x < width; x++) fg[x] = row[x] > t;
        }
    } else if (rule == GCCL_FG_BELOW) {
        all = !(a <= high) ? (a == a) : a <= low ? 0 : -1;
        if (all < 0) {
            const PIXEL t = (PIXEL)ceil(a);
            for (int64_t x = 0; x < width; x++) fg[x] = row[x] < t;
        }
    }
    if (all >= 0) memset(fg, all, (size_t)width);
#endif
}

/* f[x] = row[x] as float64 (exact for every pixel type). */
static inline void CAT(float64_row, SUFFIX)(const void *pixels, int64_t width, double *f) {
    const PIXEL *row = (const PIXEL *)pixels;
    for (int64_t x = 0; x < width; x++) f[x] = (double)row[x];
}
