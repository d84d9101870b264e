/* What the image engine (engine.c) and the volume engine (volume_*.c) share: float64 bits
 * and their total order, pixel sizes, the union-find's join, a row's foreground
 * (FOREGROUND.. per pixel type, foreground.h) and its runs, and the tau rule. */
#ifndef GCCL_ROWS_H
#define GCCL_ROWS_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "engine.h"

#define LOW63 INT64_C(0x7FFFFFFFFFFFFFFF)

/* float64 bits -> int64 whose order is IEEE totalOrder (-0.0 below +0.0); an involution. */
static inline int64_t order_key(int64_t bits) { return bits ^ ((bits >> 63) & LOW63); }

static inline int64_t float_bits(double v) {
    int64_t bits;
    memcpy(&bits, &v, sizeof bits);
    return bits;
}

static inline double bits_float(int64_t bits) {
    double v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

#define GCCL_TYPE_BYTES(arg, suffix, name, type, ...) sizeof(type),
static inline int64_t type_bytes(int64_t type) {
    static const int64_t bytes[GCCL_TYPES] = {GCCL_PIXEL_TYPES(GCCL_TYPE_BYTES, )};
    return bytes[type];
}

/* The extremes of record *dst widened by those of *src: values (lo, hi) and the bounding
 * box in x and y (a record of either engine: engine.h's gccl_record, volume.h's
 * gccl_volume_record). */
#define MERGE_EXTREMES(dst, src)                                               \
    do {                                                                       \
        (dst)->lo = (src)->lo < (dst)->lo ? (src)->lo : (dst)->lo;             \
        (dst)->hi = (src)->hi > (dst)->hi ? (src)->hi : (dst)->hi;             \
        (dst)->x_min = (src)->x_min < (dst)->x_min ? (src)->x_min : (dst)->x_min; \
        (dst)->x_max = (src)->x_max > (dst)->x_max ? (src)->x_max : (dst)->x_max; \
        (dst)->y_min = (src)->y_min < (dst)->y_min ? (src)->y_min : (dst)->y_min; \
        (dst)->y_max = (src)->y_max > (dst)->y_max ? (src)->y_max : (dst)->y_max; \
    } while (0)

/* Join the sets of i and j (compressing both paths); the root is the smaller root. */
static inline int32_t unite(int32_t *parent, int32_t i, int32_t j) {
    int32_t ri = i, rj = j;
    while (parent[ri] < ri) ri = parent[ri];
    while (parent[rj] < rj) rj = parent[rj];
    int32_t root = ri < rj ? ri : rj;
    while (parent[i] < i) {
        int32_t next = parent[i];
        parent[i] = root;
        i = next;
    }
    parent[i] = root;
    while (parent[j] < j) {
        int32_t next = parent[j];
        parent[j] = root;
        j = next;
    }
    parent[j] = root;
    return root;
}

/* The foreground runs of a row: runs[2 i], runs[2 i + 1] = start and end (exclusive) of
 * run i; returns their number. Branch-free: a store per pixel, but for the 8 pixels of a
 * word that all continue what was before them (inside a run or between runs). */
static inline int64_t row_runs(const uint8_t *fg, int64_t width, int64_t *runs) {
    const uint64_t all = UINT64_C(0x0101010101010101);
    int64_t k = 0, x = 0;
    uint8_t previous = 0;
    for (uint64_t word; x + 8 <= width; x += 8) {
        memcpy(&word, fg + x, 8);
        if (word == (previous ? all : 0)) continue;
        for (int64_t i = x; i < x + 8; i++) {
            uint8_t f = fg[i];
            runs[k] = i;
            k += f != previous;
            previous = f;
        }
    }
    for (; x < width; x++) {
        uint8_t f = fg[x];
        runs[k] = x;
        k += f != previous;
        previous = f;
    }
    runs[k] = width;
    k += previous;
    return k / 2;
}

/* Whether values u and v join: equal (infinities too) or within tau. */
static inline uint8_t close_values(double u, double v, double tau) {
    return (u == v) | (fabs(u - v) <= tau);
}

/* The tolerance of neighbours whose larger magnitude is m: tau + relative * m + quadratic *
 * m^2 (README, tau mode), in float64 in this order, each product and sum rounded on its
 * own (the build forbids contracting them into fused multiply-adds, as the CUDA kernels
 * do). A zero coefficient adds nothing, even for an infinite m. */
static inline double tolerance(double m, const gccl_rules *r) {
    double t = r->tau;
    if (r->relative > 0) t = t + r->relative * m;
    if (r->quadratic > 0) t = t + r->quadratic * (m * m);
    return t;
}

/* Whether a tolerance grows with the values (else it is tau). */
static inline int growing(const gccl_rules *r) { return r->relative > 0 || r->quadratic > 0; }

/* Whether values u and v join under r's tolerance: equal, or within the tolerance of the
 * larger magnitude. */
static inline uint8_t values_join(double u, double v, const gccl_rules *r) {
    double limit = r->tau;
    if (growing(r)) {
        const double au = fabs(u), av = fabs(v);
        limit = tolerance(au > av ? au : av, r);
    }
    return close_values(u, v, limit);
}

/* The largest integer difference within `tau` (0 for a NaN or negative tau: equal values
 * only), at most `span`: integers u, v join exactly when |u - v| <= it. */
static inline int64_t tau_reach(double tau, int64_t span) {
    if (!(tau >= 0)) return 0;
    return tau >= (double)span ? span : (int64_t)floor(tau);
}

typedef void (*row_rule)(const void *pixels, int64_t width, int64_t rule, double rule_value,
                         uint8_t *fg);
typedef void (*row_float64)(const void *pixels, int64_t width, double *f);

#define PIXEL_TEMPLATE "foreground.h"
#include "pixel_types.h"

#endif
