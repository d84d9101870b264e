/* The engine's threads (pool.c): an entry point's items cut into parts, run by the calling
 * thread and by helper threads that wait in gccl_help between calls. */
#ifndef GCCL_POOL_H
#define GCCL_POOL_H

#include <stdint.h>

/* What gccl_spread runs: entry(job, lo, hi) -> 0, or nonzero for a failure; `job` is the
 * batch of images or of volumes the entry point works on. */
typedef int (*gccl_entry)(const void *job, int64_t lo, int64_t hi);

/* What an entry point returns when it was stopped (gccl_stopping said so). */
#define GCCL_STOPPED (-2)

/* Whether to stop a job asks its callers to stop: nonzero to stop it (the binding checks
 * Python's signals: Ctrl-C stops a labeling). Called on the thread that called
 * gccl_spread, every POLL_NS or so while the job runs. */
typedef int (*gccl_poll)(void);

/* Whether the entry point running on this thread is to stop (return GCCL_STOPPED) after
 * `work` more items of work (pixels or voxels; 1 at least per row): the job was stopped,
 * or this is the calling thread and its poll, due now, says to stop. The loops of the
 * entry points call it once per row or plane: an atomic load and an addition. */
int gccl_stopping(int64_t work);

/* A helper's life: wait for each job and run parts of it; never returns. */
void gccl_help(void);

/* entry(job, lo, hi) over `parts` contiguous ranges of items 0..items-1, on this thread
 * and the helpers; returns the first nonzero result, else 0. `poll` (or NULL) is asked on
 * this thread, while the job runs, whether to stop it (gccl_poll): then every part stops
 * at its next row and the result is GCCL_STOPPED. */
int gccl_spread(gccl_entry entry, const void *job, int64_t items, int64_t parts, gccl_poll poll);

#endif
