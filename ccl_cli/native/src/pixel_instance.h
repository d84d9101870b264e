/* One instantiation of PIXEL_TEMPLATE (pixel_types.h) for PIXEL_TYPE (suffix, C type,
 * smallest value, largest value, floating), with these defined for it and undefined after:
 *   PIXEL       the C type
 *   PIXEL_MIN   its smallest value (integer types; 0 for floats)
 *   PIXEL_MAX   its largest value (integer types; 0 for floats)
 *   SUFFIX      the suffix of the names made for it: CAT(name, SUFFIX) is name_u8, ...
 *   FLOATING    1 for float types, else 0
 *   REACH       the type of a tolerance in the pixels' own terms
 *   NEAR(u, v, limit)  whether pixels u and v join within `limit`, a REACH
 *   REACH_OF_TAU(tau)  tau as a REACH */
#define PIXEL_PICK(field, ...) field(__VA_ARGS__)
#define PIXEL_SUFFIX_OF(suffix, type, low, high, floating) suffix
#define PIXEL_TYPE_OF(suffix, type, low, high, floating) type
#define PIXEL_MIN_OF(suffix, type, low, high, floating) low
#define PIXEL_MAX_OF(suffix, type, low, high, floating) high
#define PIXEL_FLOATING_OF(suffix, type, low, high, floating) floating
#define PIXEL PIXEL_PICK(PIXEL_TYPE_OF, PIXEL_TYPE)
#define PIXEL_MIN PIXEL_PICK(PIXEL_MIN_OF, PIXEL_TYPE)
#define PIXEL_MAX PIXEL_PICK(PIXEL_MAX_OF, PIXEL_TYPE)
#define SUFFIX PIXEL_PICK(PIXEL_SUFFIX_OF, PIXEL_TYPE)
#define FLOATING PIXEL_PICK(PIXEL_FLOATING_OF, PIXEL_TYPE)

/* A REACH is the tolerance itself for floats, for integers the largest integer difference
 * within it, so that NEAR compares exactly in an integer type. */
#if FLOATING
#define REACH double
#define NEAR(u, v, limit) close_values((double)(u), (double)(v), limit)
#elif PIXEL_MIN == 0
/* Unsigned pixels join when their distance, exact in the pixel type, is within the reach
 * (saturating subtractions, which vectorize in the pixel's width). */
#define WIDE PIXEL
#define REACH PIXEL
#define NEAR(u, v, limit) ((PIXEL)((u) > (v) ? (u) - (v) : (v) - (u)) <= (limit))
#else
/* Signed pixels join when their difference, exact in WIDE, is within the reach. */
#if PIXEL_MAX > INT16_MAX
#define WIDE int64_t
#else
#define WIDE int32_t
#endif
#define REACH WIDE
#define NEAR(u, v, limit) \
    ((((WIDE)(u) - (WIDE)(v)) <= (limit)) & (((WIDE)(v) - (WIDE)(u)) <= (limit)))
#endif

/* tau as a REACH: itself for floats, the largest integer difference within it for
 * integers (rows.h's tau_reach). */
#if FLOATING
#define REACH_OF_TAU(tau) (tau)
#else
#define REACH_OF_TAU(tau) ((REACH)tau_reach(tau, (int64_t)PIXEL_MAX - (int64_t)PIXEL_MIN))
#endif

#include PIXEL_TEMPLATE

#undef NEAR
#undef REACH
#undef REACH_OF_TAU
#ifdef WIDE
#undef WIDE
#endif
#undef PIXEL
#undef PIXEL_MIN
#undef PIXEL_MAX
#undef SUFFIX
#undef FLOATING
#undef PIXEL_TYPE
