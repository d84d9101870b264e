/* The pixel types, listed once. GCCL_PIXEL_TYPES(X, arg) expands X(arg, suffix, enum name,
 * C type, numpy name) per type in enum gccl_type's order (1-bit images are read as their
 * bytes 0/1).
 * Including this file with PIXEL_TEMPLATE defined (a file name in quotes) includes that file
 * once per type, in the same order, with these defined for it (and undefined after it):
 *   PIXEL       the C type
 *   PIXEL_MIN   its smallest value (integer types; 0 for floats)
 *   PIXEL_MAX   its largest value (integer types; 0 for floats)
 *   SUFFIX      the suffix of the names made for it: CAT(name, SUFFIX) is name_u8, ...
 *   FLOATING    1 for float types, else 0
 * BY_TYPE(name) is then the table of the template's functions name_u8.. by enum gccl_type.
 * (A macro cannot #include, so the instantiations below are written out, in the list's
 * order.) */
#ifndef GCCL_PIXEL_TYPES_H
#define GCCL_PIXEL_TYPES_H

#include <stdint.h>

#define GCCL_PIXEL_TYPES(X, arg)                    \
    X(arg, u8, GCCL_U8, uint8_t, "uint8")           \
    X(arg, i8, GCCL_I8, int8_t, "int8")             \
    X(arg, u16, GCCL_U16, uint16_t, "uint16")       \
    X(arg, i16, GCCL_I16, int16_t, "int16")         \
    X(arg, u32, GCCL_U32, uint32_t, "uint32")       \
    X(arg, i32, GCCL_I32, int32_t, "int32")         \
    X(arg, f32, GCCL_F32, float, "float32")         \
    X(arg, f64, GCCL_F64, double, "float64")

/* The per-type functions name_u8.. in enum gccl_type's order, as an array initializer. */
#define GCCL_FUNCTION_OF_TYPE(name, suffix, ...) name##_##suffix,
#define BY_TYPE(name) {GCCL_PIXEL_TYPES(GCCL_FUNCTION_OF_TYPE, name)}

/* name_SUFFIX: the name of a template's function for the pixel type it is included for. */
#define CAT2(a, b) a##_##b
#define CAT(a, b) CAT2(a, b)

#endif

#ifdef PIXEL_TEMPLATE
#define PIXEL uint8_t
#define PIXEL_MIN 0
#define PIXEL_MAX UINT8_MAX
#define SUFFIX u8
#define FLOATING 0
#include PIXEL_TEMPLATE
#undef PIXEL
#undef PIXEL_MIN
#undef PIXEL_MAX
#undef SUFFIX
#undef FLOATING
#define PIXEL int8_t
#define PIXEL_MIN INT8_MIN
#define PIXEL_MAX INT8_MAX
#define SUFFIX i8
#define FLOATING 0
#include PIXEL_TEMPLATE
#undef PIXEL
#undef PIXEL_MIN
#undef PIXEL_MAX
#undef SUFFIX
#undef FLOATING
#define PIXEL uint16_t
#define PIXEL_MIN 0
#define PIXEL_MAX UINT16_MAX
#define SUFFIX u16
#define FLOATING 0
#include PIXEL_TEMPLATE
#undef PIXEL
#undef PIXEL_MIN
#undef PIXEL_MAX
#undef SUFFIX
#undef FLOATING
#define PIXEL int16_t
#define PIXEL_MIN INT16_MIN
#define PIXEL_MAX INT16_MAX
#define SUFFIX i16
#define FLOATING 0
#include PIXEL_TEMPLATE
#undef PIXEL
#undef PIXEL_MIN
#undef PIXEL_MAX
#undef SUFFIX
#undef FLOATING
#define PIXEL uint32_t
#define PIXEL_MIN 0
#define PIXEL_MAX UINT32_MAX
#define SUFFIX u32
#define FLOATING 0
#include PIXEL_TEMPLATE
#undef PIXEL
#undef PIXEL_MIN
#undef PIXEL_MAX
#undef SUFFIX
#undef FLOATING
#define PIXEL int32_t
#define PIXEL_MIN INT32_MIN
#define PIXEL_MAX INT32_MAX
#define SUFFIX i32
#define FLOATING 0
#include PIXEL_TEMPLATE
#undef PIXEL
#undef PIXEL_MIN
#undef PIXEL_MAX
#undef SUFFIX
#undef FLOATING
#define PIXEL float
#define PIXEL_MIN 0
#define PIXEL_MAX 0
#define SUFFIX f32
#define FLOATING 1
#include PIXEL_TEMPLATE
#undef PIXEL
#undef PIXEL_MIN
#undef PIXEL_MAX
#undef SUFFIX
#undef FLOATING
#define PIXEL double
#define PIXEL_MIN 0
#define PIXEL_MAX 0
#define SUFFIX f64
#define FLOATING 1
#include PIXEL_TEMPLATE
#undef PIXEL
#undef PIXEL_MIN
#undef PIXEL_MAX
#undef SUFFIX
#undef FLOATING
#undef PIXEL_TEMPLATE
#endif
