/* The pixel types, listed once. GCCL_PIXEL_TYPES(X, arg) expands X(arg, suffix, enum name,
 * C type, numpy name) per type in enum gccl_type's order (1-bit images are read as their
 * bytes 0/1).
 * Including this file with PIXEL_TEMPLATE defined (a file name in quotes) includes that file
 * once per type, in the same order, through pixel_instance.h, which says what it defines for
 * it. BY_TYPE(name) is then the table of the template's functions name_u8.. by enum
 * gccl_type. (A macro cannot #include, so the instantiations at the end are written out, a
 * PIXEL_TYPE each: suffix, C type, smallest and largest value, whether floating.) */
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
#define PIXEL_TYPE u8, uint8_t, 0, UINT8_MAX, 0
#include "pixel_instance.h"
#define PIXEL_TYPE i8, int8_t, INT8_MIN, INT8_MAX, 0
#include "pixel_instance.h"
#define PIXEL_TYPE u16, uint16_t, 0, UINT16_MAX, 0
#include "pixel_instance.h"
#define PIXEL_TYPE i16, int16_t, INT16_MIN, INT16_MAX, 0
#include "pixel_instance.h"
#define PIXEL_TYPE u32, uint32_t, 0, UINT32_MAX, 0
#include "pixel_instance.h"
#define PIXEL_TYPE i32, int32_t, INT32_MIN, INT32_MAX, 0
#include "pixel_instance.h"
#define PIXEL_TYPE f32, float, 0, 0, 1
#include "pixel_instance.h"
#define PIXEL_TYPE f64, double, 0, 0, 1
#include "pixel_instance.h"
#undef PIXEL_TEMPLATE
#endif
