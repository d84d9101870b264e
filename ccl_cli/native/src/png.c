/* PNG's row filters undone (the PNG specification, "Filtering") for 8- and 16-bit gray
 * samples: the step between the inflated IDAT stream and the pixels, which Python cannot
 * do fast (each byte depends on the one before). io/decode/plain_png.py inflates and
 * checks the file; this only reverses filters.
 *
 * Sub, Average and Paeth make each byte depend on the byte bpp places to its left. The
 * loops keep those bytes in registers (one running value per byte of a sample) rather
 * than reading them back from the row just stored, which would put a store-to-load round
 * trip on every step of that chain. */
#include "png.h"

#include <string.h>

static inline int absolute(int v) { return v < 0 ? -v : v; }

/* The Paeth predictor of a byte from its left (a), upper (b) and upper-left (c) bytes,
 * without branches: ties go to a, then b, as the specification orders them. */
static inline int paeth(int a, int b, int c) {
    int pa = absolute(b - c), pb = absolute(a - c), pc = absolute(a + b - 2 * c);
    int chosen = pb < pa ? b : a;
    int least = pb < pa ? pb : pa;
    return pc < least ? c : chosen;
}

/* One row of Sub (TYPE 1), Average (3) or Paeth (4) undone for samples of BPP bytes (1 or
 * 2, constants where this is inlined), `prior` being the row above or NULL for the first
 * row (zeros). The first sample has no left neighbour (a = c = 0). */
static inline void chained_row(const uint8_t *f, const uint8_t *prior, uint8_t *row,
                               int64_t stride, const int type, const int bpp) {
    int a[2] = {0, 0}, c[2] = {0, 0};
    for (int64_t x = 0; x + bpp <= stride; x += bpp) {
        for (int k = 0; k < bpp; k++) {
            const int b = prior ? prior[x + k] : 0;
            const int predicted = type == 1   ? a[k]
                                  : type == 3 ? (a[k] + b) >> 1
                                              : paeth(a[k], b, c[k]);
            a[k] = (uint8_t)(f[x + k] + predicted);
            c[k] = b;
            row[x + k] = (uint8_t)a[k];
        }
    }
}

/* chained_row with the filter type and sample size as constants, so each loop is simple. */
static void unfilter_chained(const uint8_t *f, const uint8_t *prior, uint8_t *row,
                             int64_t stride, int type, int64_t bpp) {
    if (bpp == 1) {
        if (type == 1) chained_row(f, prior, row, stride, 1, 1);
        else if (type == 3) chained_row(f, prior, row, stride, 3, 1);
        else chained_row(f, prior, row, stride, 4, 1);
    } else {
        if (type == 1) chained_row(f, prior, row, stride, 1, 2);
        else if (type == 3) chained_row(f, prior, row, stride, 3, 2);
        else chained_row(f, prior, row, stride, 4, 2);
    }
}

/* A row of 16-bit samples from PNG's big-endian bytes to the machine's order. */
static void swap_row(uint8_t *row, int64_t stride) {
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    for (int64_t x = 0; x + 1 < stride; x += 2) {
        const uint8_t high = row[x];
        row[x] = row[x + 1];
        row[x + 1] = high;
    }
#else
    (void)row, (void)stride;
#endif
}

/* png.h says what this does. 16-bit rows are swapped to the machine's order once the row
 * below no longer needs them as its prior. */
int64_t gccl_png_unfilter(const uint8_t *data, int64_t height, int64_t stride,
                                 int64_t bpp, uint8_t *out) {
    if (bpp != 1 && bpp != 2) return -1;
    for (int64_t y = 0; y < height; y++) {
        const uint8_t type = data[y * (stride + 1)];
        const uint8_t *f = data + y * (stride + 1) + 1;
        uint8_t *row = out + y * stride;
        const uint8_t *prior = y > 0 ? row - stride : NULL;
        if (type > 4) return y + 1;
        if (type == 0 || (type == 2 && !prior)) {
            memcpy(row, f, (size_t)stride);
        } else if (type == 2) {
            for (int64_t x = 0; x < stride; x++) row[x] = (uint8_t)(f[x] + prior[x]);
        } else {
            unfilter_chained(f, prior, row, stride, type, bpp);
        }
        if (bpp == 2 && prior) swap_row(row - stride, stride);
    }
    if (bpp == 2 && height > 0) swap_row(out + (height - 1) * stride, stride);
    return 0;
}
