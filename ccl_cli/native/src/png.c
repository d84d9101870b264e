/* PNG's row filters undone (the PNG specification, "Filtering"): the step between the
 * inflated IDAT stream and the pixels, which Python cannot do fast (each byte depends on
 * the one before). io/png.py inflates and checks the file; this only reverses filters. */
#include <stdint.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

static inline int absolute(int v) { return v < 0 ? -v : v; }

/* The Paeth predictor of a byte from its left (a), upper (b) and upper-left (c) bytes,
 * without branches: ties go to a, then b, as the specification orders them. */
static inline uint8_t paeth(int a, int b, int c) {
    int pa = absolute(b - c), pb = absolute(a - c), pc = absolute(a + b - 2 * c);
    int chosen = pb < pa ? b : a;
    int least = pb < pa ? pb : pa;
    return (uint8_t)(pc < least ? c : chosen);
}

/* Rows of `stride` bytes, each after its filter-type byte in `data` (height * (stride + 1)
 * bytes), unfiltered into `out` (height * stride bytes); bpp: bytes per complete pixel,
 * rounded up to 1. Returns 0, or 1 + the row whose filter type is unknown. */
EXPORT int64_t gccl_png_unfilter(const uint8_t *data, int64_t height, int64_t stride,
                                 int64_t bpp, uint8_t *out) {
    static const uint8_t zeros[8] = {0};
    const int64_t lead = bpp < stride ? bpp : stride;
    for (int64_t y = 0; y < height; y++) {
        const uint8_t type = data[y * (stride + 1)];
        const uint8_t *f = data + y * (stride + 1) + 1;
        uint8_t *row = out + y * stride;
        const uint8_t *prior = y > 0 ? row - stride : NULL;
        if (type == 0 || ((type == 2) && !prior)) {
            memcpy(row, f, (size_t)stride);
        } else if (type == 1 || (type == 4 && !prior)) { /* Paeth on the first row is Sub */
            memcpy(row, f, (size_t)lead);
            for (int64_t x = bpp; x < stride; x++) row[x] = (uint8_t)(f[x] + row[x - bpp]);
        } else if (type == 2) {
            for (int64_t x = 0; x < stride; x++) row[x] = (uint8_t)(f[x] + prior[x]);
        } else if (type == 3) {
            const uint8_t *up = prior ? prior : zeros;
            const int64_t step = prior ? 1 : 0;
            for (int64_t x = 0; x < lead; x++) row[x] = (uint8_t)(f[x] + (up[x * step] >> 1));
            for (int64_t x = bpp; x < stride; x++) {
                row[x] = (uint8_t)(f[x] + ((row[x - bpp] + up[x * step]) >> 1));
            }
        } else if (type == 4) {
            for (int64_t x = 0; x < lead; x++) row[x] = (uint8_t)(f[x] + prior[x]);
            for (int64_t x = bpp; x < stride; x++) {
                row[x] = (uint8_t)(f[x] + paeth(row[x - bpp], prior[x], prior[x - bpp]));
            }
        } else {
            return y + 1;
        }
    }
    return 0;
}
