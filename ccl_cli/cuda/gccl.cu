// The one translation unit the fatbin (and the NVRTC fallback) is built from.
#include "block8.cu"
#include "border.cu"
#include "min_area.cu"
#include "outline.cu"
#include "pixel.cu"
#include "relabel.cu"
#include "stats.cu"
