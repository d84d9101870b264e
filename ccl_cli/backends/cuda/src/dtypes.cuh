// The element types a kernel is instantiated for, with their name suffixes
// (1-bit images travel as u8). X(suffix, type) is expanded once per type.
#pragma once

#define GCCL_FOR_EACH_DTYPE(X) \
  X(u8, unsigned char)         \
  X(i8, signed char)           \
  X(u16, unsigned short)       \
  X(i16, short)                \
  X(u32, unsigned int)         \
  X(i32, int)                  \
  X(f32, float)                \
  X(f64, double)

#define GCCL_FOR_EACH_FLOAT_DTYPE(X) \
  X(f32, float)                      \
  X(f64, double)
