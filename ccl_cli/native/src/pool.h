/* The engine's threads (pool.c): an entry point's items cut into parts, run by the calling
 * thread and by helper threads that wait in gccl_help between calls. */
#ifndef GCCL_POOL_H
#define GCCL_POOL_H

#include <stdint.h>

/* What gccl_spread runs: entry(job, lo, hi) -> 0, or nonzero for a failure; `job` is the
 * batch of images or of volumes the entry point works on. */
typedef int (*gccl_entry)(const void *job, int64_t lo, int64_t hi);

/* A helper's life: wait for each job and run parts of it; never returns. */
void gccl_help(void);

/* entry(job, lo, hi) over `parts` contiguous ranges of items 0..items-1, on this thread
 * and the helpers; returns the first nonzero result, else 0. */
int gccl_spread(gccl_entry entry, const void *job, int64_t items, int64_t parts);

#endif
