/* PNG's row filters undone for 8- and 16-bit gray samples (png.c). */
#ifndef GCCL_PNG_H
#define GCCL_PNG_H

#include <stdint.h>

/* Rows of `stride` bytes, each after its filter-type byte in `data` (height * (stride + 1)
 * bytes), unfiltered into `out` (height * stride bytes); bpp: bytes per sample, 1 or 2.
 * For 2, the samples come out in the machine's byte order. Returns 0, or 1 + the row whose
 * filter type is unknown, or -1 for another bpp. */
int64_t gccl_png_unfilter(const uint8_t *data, int64_t height, int64_t stride, int64_t bpp,
                          uint8_t *out);

#endif
