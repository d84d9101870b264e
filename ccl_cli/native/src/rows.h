/* What the image engine (engine.c) and the volume engine (volume.c) share: float64 bits
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

static inline int64_t type_bytes(int64_t type) {
    static const int64_t bytes[GCCL_TYPES] = {1, 1, 2, 2, 4, 4, 4, 8};
    return bytes[type];
}

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
static inline double tolerance(double m, double tau, double relative, double quadratic) {
    double t = tau;
    if (relative > 0) t = t + relative * m;
    if (quadratic > 0) t = t + quadratic * (m * m);
    return t;
}

/* Whether a tolerance grows with the values (else it is tau). */
static inline int growing(const gccl_batch *b) { return b->relative > 0 || b->quadratic > 0; }

/* Whether values u and v join under b's tolerance: equal, or within the tolerance of the
 * larger magnitude. */
static inline uint8_t values_join(double u, double v, const gccl_batch *b) {
    double limit = b->tau;
    if (growing(b)) {
        const double au = fabs(u), av = fabs(v);
        limit = tolerance(au > av ? au : av, b->tau, b->relative, b->quadratic);
    }
    return close_values(u, v, limit);
}

/* The largest integer difference within `tau` (0 for a NaN or negative tau: equal values
 * only), at most `span`: integers u, v join exactly when |u - v| <= it. */
static inline int64_t tau_reach(double tau, int64_t span) {
    if (!(tau >= 0)) return 0;
    return tau >= (double)span ? span : (int64_t)floor(tau);
}

typedef void (*row_rule)(const void *pixels, int64_t width, int64_t rule, double a, uint8_t *fg);
typedef void (*row_float64)(const void *pixels, int64_t width, double *f);

#define PIXEL uint8_t
#define PIXEL_MIN 0
#define PIXEL_MAX UINT8_MAX
#define SUFFIX u8
#define FLOATING 0
#include "foreground.h"
#define PIXEL int8_t
#define PIXEL_MIN INT8_MIN
#define PIXEL_MAX INT8_MAX
#define SUFFIX i8
#define FLOATING 0
#include "foreground.h"
#define PIXEL uint16_t
#define PIXEL_MIN 0
#define PIXEL_MAX UINT16_MAX
#define SUFFIX u16
#define FLOATING 0
#include "foreground.h"
#define PIXEL int16_t
#define PIXEL_MIN INT16_MIN
#define PIXEL_MAX INT16_MAX
#define SUFFIX i16
#define FLOATING 0
#include "foreground.h"
#define PIXEL uint32_t
#define PIXEL_MIN 0
#define PIXEL_MAX UINT32_MAX
#define SUFFIX u32
#define FLOATING 0
#include "foreground.h"
#define PIXEL int32_t
#define PIXEL_MIN INT32_MIN
#define PIXEL_MAX INT32_MAX
#define SUFFIX i32
#define FLOATING 0
#include "foreground.h"
#define PIXEL float
#define PIXEL_MIN 0
#define PIXEL_MAX 0
#define SUFFIX f32
#define FLOATING 1
#include "foreground.h"
#define PIXEL double
#define PIXEL_MIN 0
#define PIXEL_MAX 0
#define SUFFIX f64
#define FLOATING 1
#include "foreground.h"

/* The per-type functions, indexed by enum gccl_type. */
#define BY_TYPE(name) \
    {name##_u8, name##_i8, name##_u16, name##_i16, name##_u32, name##_i32, name##_f32, name##_f64}

#endif
