// Which pixels take part and which neighbours join: ccl_cli/contract/params.py in CUDA.
//
// The host turns LabelParams into a ForegroundRule (kernel arguments):
//   kind 0: display value != value, display = invert ? invert_max - v : v
//           (invert_max is the dtype max for integers, 1 for 1-bit, 0 for
//           floats: 0 - v and -v compare equal to every background);
//   kind 1: every pixel (background None);
//   kind 2: v > value; kind 3: v < value (threshold, original values).
// NaN is never foreground. All comparisons are in float64, which holds every
// value of every supported dtype exactly.
#pragma once

#define GCCL_FG_BACKGROUND 0
#define GCCL_FG_ALL 1
#define GCCL_FG_ABOVE 2
#define GCCL_FG_BELOW 3

template <typename T>
struct ValueTraits {
  static constexpr bool is_float = false;
};
template <>
struct ValueTraits<float> {
  static constexpr bool is_float = true;
};
template <>
struct ValueTraits<double> {
  static constexpr bool is_float = true;
};

struct ForegroundRule {
  int kind;
  double value;
  int invert;
  double invert_max;
};

// Tau mode's tolerance (contract.params.LabelParams): tau, or tau + relative * m +
// quadratic * m^2 where a coefficient is positive.
struct Tolerance {
  double tau;
  double relative;
  double quadratic;
};

template <typename T>
__device__ __forceinline__ bool is_foreground(T v, const ForegroundRule& rule) {
  double d = (double)v;
  if (d != d) return false;
  switch (rule.kind) {
    case GCCL_FG_ALL:
      return true;
    case GCCL_FG_ABOVE:
      return d > rule.value;
    case GCCL_FG_BELOW:
      return d < rule.value;
    default:
      return (rule.invert ? rule.invert_max - d : d) != rule.value;
  }
}

// The tolerance of neighbours whose larger magnitude is m: tau + relative * m +
// quadratic * m^2 (README, tau mode), in float64 in this order, each product and sum
// rounded on its own: __dmul_rn and __dadd_rn are never contracted into a fused
// multiply-add, so the bits are the CPU engine's (native/src/rows.h). A zero coefficient
// adds nothing, even for an infinite m.
__device__ __forceinline__ double tau_tolerance(double m, const Tolerance& tolerance) {
  double t = tolerance.tau;
  if (tolerance.relative > 0) t = __dadd_rn(t, __dmul_rn(tolerance.relative, m));
  if (tolerance.quadratic > 0) t = __dadd_rn(t, __dmul_rn(tolerance.quadratic, __dmul_rn(m, m)));
  return t;
}

// tau_joins: equal floats always join (inf next to inf); otherwise |a - b|
// (exact in float64 for integers) is compared with the tolerance of max(|a|, |b|), which
// is tau unless a coefficient is positive.
template <typename T>
__device__ __forceinline__ bool tau_joins(T a, T b, const Tolerance& tolerance) {
  double da = (double)a, db = (double)b;
  if (ValueTraits<T>::is_float && da == db) return true;
  double limit = tolerance.tau;
  if (tolerance.relative > 0 || tolerance.quadratic > 0) {
    limit = tau_tolerance(fmax(fabs(da), fabs(db)), tolerance);
  }
  return fabs(da - db) <= limit;
}

// The kernel-argument form of a ForegroundRule (CuPy passes scalars only).
#define GCCL_RULE_PARAMS int fg_kind, double fg_value, int fg_invert, double fg_invert_max
#define GCCL_RULE_MAKE {fg_kind, fg_value, fg_invert, fg_invert_max}

// The kernel-argument form of a Tolerance, with use_tau (0: binary mode, every pair joins).
#define GCCL_TAU_PARAMS int use_tau, double tau, double tau_relative, double tau_quadratic
#define GCCL_TAU_MAKE {tau, tau_relative, tau_quadratic}
