// The one translation unit the fatbin (and the NVRTC fallback) is built from.
#include "block8.cu"
#include "border.cu"
#include "min_area.cu"
#include "morphology.cu"
#include "pixel.cu"
#include "relabel.cu"
#include "smooth.cu"
#include "stats.cu"
