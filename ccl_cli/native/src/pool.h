/* The engine's threads (pool.c): an entry point's items cut into parts, run by the calling
 * thread and by helper threads that wait in gccl_help between calls. */
#ifndef GCCL_POOL_H
#define GCCL_POOL_H

#include <stdint.h>

#include "engine.h"

/* What gccl_spread runs: entry(batch, lo, hi) -> 0, or nonzero for a failure. */
typedef int (*gccl_entry)(const gccl_batch *batch, int64_t lo, int64_t hi);

/* A helper's life: wait for each job and run parts of it; never returns. */
void gccl_help(void);

/* entry(batch, lo, hi) over `parts` contiguous ranges of items 0..items-1, on this thread
 * and the helpers; returns the first nonzero result, else 0. */
int gccl_spread(gccl_entry entry, const gccl_batch *batch, int64_t items, int64_t parts);

#endif
