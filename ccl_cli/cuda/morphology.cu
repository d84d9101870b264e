// Binary erosion and dilation of a mask batch (N, H, W) of 0/1 bytes, one iteration.
//
// The element is the 3x3 cross (CONN 4) or square (CONN 8); pixels outside the
// image count as background (scipy.ndimage's border_value=0). The batch is
// one flat byte array (N * H * W < 2^32, the backend's sub-batch bound); each
// thread writes 4 consecutive bytes with one aligned 32-bit store. It reads
// the 6-byte windows (its bytes plus one on each side) of the rows above, at
// and below as aligned 32-bit words (neighbouring threads share them in the
// caches) and shifts them into place; a neighbour across a row, image or
// buffer edge is masked by the pixel's (x, y), never read as foreground. N
// iterations are N launches with ping-pong buffers (backends/cuda_stages.py).
#include "common.cuh"

#define GCCL_MORPH_THREADS 256

// Bytes s .. s+5 of `in` (total bytes; bytes outside the buffer read 0) in the
// low 48 bits; `in` is 4-byte aligned.
__device__ __forceinline__ u64 morph_window(const unsigned char* in, i64 s, u32 total) {
  const i64 a = s & ~(i64)3;  // floor to a word boundary (s may be negative)
  u32 words[3];
#pragma unroll
  for (int k = 0; k < 3; ++k) {
    const i64 at = a + 4 * k;
    if (at >= 0 && at + 4 <= (i64)total) {
      words[k] = *reinterpret_cast<const u32*>(in + at);
    } else {
      u32 word = 0;
      for (int b = 0; b < 4; ++b)
        if (at + b >= 0 && at + b < (i64)total) word |= (u32)in[at + b] << (8 * b);
      words[k] = word;
    }
  }
  const u32 shift = (u32)(s - a) * 8;
  const u64 low = (u64)words[0] | ((u64)words[1] << 32);
  return shift ? (low >> shift) | ((u64)words[2] << (64 - shift)) : low;
}

__device__ __forceinline__ u32 window_byte(u64 window, u32 b) {
  return (u32)(window >> (8 * b)) & 0xFFu;
}

template <bool ERODE, int CONN>
__device__ __forceinline__ void morph_words(const unsigned char* in, unsigned char* out,
                                            u32 height, u32 width, u32 total) {
  const u64 first = 4ull * (blockIdx.x * GCCL_MORPH_THREADS + threadIdx.x);
  if (first >= total) return;
  const u32 p = (u32)first % (height * width);  // first < total < 2^32
  u32 y = p / width, x = p - y * width;
  const u64 up = morph_window(in, (i64)first - width - 1, total);
  const u64 mid = morph_window(in, (i64)first - 1, total);
  const u64 down = morph_window(in, (i64)first + width - 1, total);
  u32 result = 0;
#pragma unroll
  for (u32 j = 0; j < 4; ++j) {
    // The window's byte j is the left neighbour of output byte j, j + 1 the pixel itself.
    const bool left = x > 0, right = x + 1 < width, above = y > 0, below = y + 1 < height;
    u32 v = window_byte(mid, j + 1);
    const u32 n[8] = {
        left ? window_byte(mid, j) : 0u,
        right ? window_byte(mid, j + 2) : 0u,
        above ? window_byte(up, j + 1) : 0u,
        below ? window_byte(down, j + 1) : 0u,
        above && left ? window_byte(up, j) : 0u,
        above && right ? window_byte(up, j + 2) : 0u,
        below && left ? window_byte(down, j) : 0u,
        below && right ? window_byte(down, j + 2) : 0u,
    };
#pragma unroll
    for (int k = 0; k < (CONN == 8 ? 8 : 4); ++k) v = ERODE ? (v & n[k]) : (v | n[k]);
    result |= v << (8 * j);
    if (++x == width) {  // the next byte starts a row (or the next image)
      x = 0;
      if (++y == height) y = 0;
    }
  }
  if (first + 4 <= (u64)total) {
    *reinterpret_cast<u32*>(out + first) = result;
  } else {
    for (u32 j = 0; first + j < total; ++j) out[first + j] = (unsigned char)(result >> (8 * j));
  }
}

#define GCCL_MORPH_KERNEL(NAME, ERODE, CONN)                                               \
  extern "C" __global__ void __launch_bounds__(GCCL_MORPH_THREADS)                         \
      NAME(const unsigned char* in, unsigned char* out, u32 height, u32 width, u32 total) { \
    morph_words<ERODE, CONN>(in, out, height, width, total);                               \
  }

GCCL_MORPH_KERNEL(gccl_erode_4, true, 4)
GCCL_MORPH_KERNEL(gccl_erode_8, true, 8)
GCCL_MORPH_KERNEL(gccl_dilate_4, false, 4)
GCCL_MORPH_KERNEL(gccl_dilate_8, false, 8)
