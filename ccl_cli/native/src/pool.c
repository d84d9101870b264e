/* The engine's threads: an entry point's items cut into parts, run by the calling thread
 * and by helpers that wait here between calls.
 *
 * labels.py starts the helpers once, as Python threads that each call gccl_help (which
 * never returns; the binding releases the GIL for it). A caller hands a job to gccl_spread
 * and runs parts of it too, so a job ends even when no helper comes. Waking a sleeping
 * thread can take as long as labeling a camera image's strip, so a helper keeps polling
 * for SPIN_NS after each job before it sleeps: the next call of the same labeling
 * (strips, then labels) finds it awake. Only one job runs at a time; a second caller
 * meanwhile runs its items on its own thread.
 *
 * A job can be stopped: its caller polls (gccl_poll, the binding's check of Python's
 * signals) while it runs parts and while it waits for the helpers, and a stop sets the
 * job's flag, which every part reads at each row (gccl_stopping) and returns at.
 *
 * A claim is 64 bits: the job's number above, the next part below. A caller first posts
 * the new number with no part to claim, then writes the job's fields, then opens its
 * parts: a helper still holding a claim of the last job fails to make it, and none runs
 * a part of one job with another's fields. */
#define _GNU_SOURCE /* clock_gettime and syscall under -std=c11 */
#include "pool.h"

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

/* How long a thread polls for a job (or for the helpers' last part) before it sleeps. */
#define SPIN_NS 200000
/* The part field of a claim (a value no job reaches: nothing left to claim). */
#define PART_MASK UINT64_C(0xFFFFFFFF)
/* How often the calling thread polls whether to stop (gccl_poll), and how much work
 * (pixels) it does between two looks at the clock. */
#define POLL_NS 20000000
#define POLL_WORK (INT64_C(1) << 16)

static atomic_flag running = ATOMIC_FLAG_INIT; /* a job is under way */
static _Atomic uint32_t posted;                /* the number of the last job posted */
static _Atomic uint32_t finished;              /* bumped as a job's last part ends */
static _Atomic uint64_t claims;                /* (job number << 32) + next part */
static _Atomic int64_t ended;                  /* parts of this job ended */
static _Atomic int failure;                    /* the first nonzero result of this job */
static _Atomic int sleeping;                   /* helpers asleep on `posted` */
static _Atomic int64_t job_parts;
static _Atomic int job_stopped;                /* this job was stopped */
static gccl_entry job_entry;
static const void *job_batch;
static int64_t job_items;

/* The stop flag of the job this thread runs a part of (NULL between jobs), and on the
 * thread that called gccl_spread its poll, the work done since it last read the clock,
 * and when it last polled. */
static _Thread_local _Atomic int *thread_stop;
static _Thread_local gccl_poll thread_poll;
static _Thread_local int64_t thread_work, thread_polled_ns;

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static inline void relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Sleep while *word == seen (a wake or a short nap where there is no futex), at most
 * `limit_ns` where it is above 0. */
static void sleep_while(_Atomic uint32_t *word, uint32_t seen, int64_t limit_ns) {
#ifdef __linux__
    struct timespec limit = {limit_ns / 1000000000, limit_ns % 1000000000};
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, seen, limit_ns > 0 ? &limit : NULL,
            NULL, 0);
#else
    (void)limit_ns;
    (void)word, (void)seen;
    struct timespec nap = {0, 50000};
    nanosleep(&nap, NULL);
#endif
}

/* Wake up to `count` threads asleep on *word. */
static void wake(_Atomic uint32_t *word, int64_t count) {
#ifdef __linux__
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, (int)count, NULL, NULL, 0);
#else
    (void)word, (void)count;
#endif
}

/* Whether this thread's poll says to stop the job of flag `stop` (then it is set), where
 * POLL_NS have passed since it last polled. */
static int poll_now(_Atomic int *stop) {
    const int64_t now = now_ns();
    if (now - thread_polled_ns < POLL_NS) return 0;
    thread_polled_ns = now;
    if (!thread_poll()) return 0;
    atomic_store(stop, 1);
    return 1;
}

/* pool.h: whether this thread's entry point is to stop. */
int gccl_stopping(int64_t work) {
    _Atomic int *stop = thread_stop;
    if (!stop) return 0;
    if (atomic_load_explicit(stop, memory_order_relaxed)) return 1;
    if (!thread_poll) return 0;
    thread_work += work;
    if (thread_work < POLL_WORK) return 0;
    thread_work = 0;
    return poll_now(stop);
}

/* entry(batch, lo, hi) on this thread as part of the job of flag `stop`. */
static int run_entry_part(gccl_entry entry, const void *batch, int64_t lo, int64_t hi,
                          _Atomic int *stop) {
    _Atomic int *outer = thread_stop; /* a job this thread runs a part of (a signal handler's
                                         call inside a poll), NULL between jobs */
    thread_stop = stop;
    const int code = entry(batch, lo, hi);
    thread_stop = outer;
    return code;
}

/* Run parts of job `number` until none is left to claim. */
static void run_parts(uint32_t number) {
    for (;;) {
        uint64_t claim = atomic_load(&claims);
        int64_t part = (int64_t)(claim & PART_MASK);
        if ((uint32_t)(claim >> 32) != number || part >= atomic_load(&job_parts)) return;
        if (!atomic_compare_exchange_weak(&claims, &claim, claim + 1)) continue;
        int64_t parts = atomic_load(&job_parts);
        int64_t lo = job_items * part / parts, hi = job_items * (part + 1) / parts;
        int code = run_entry_part(job_entry, job_batch, lo, hi, &job_stopped);
        if (code != 0) {
            int none = 0;
            atomic_compare_exchange_strong(&failure, &none, code);
        }
        if (atomic_fetch_add(&ended, 1) + 1 == parts) {
            atomic_fetch_add(&finished, 1);
            wake(&finished, 1);
        }
    }
}

/* A helper's life: wait for each job (polling, then asleep) and run parts of it. */
void gccl_help(void) {
    uint32_t seen = atomic_load(&posted);
    for (;;) {
        int64_t since = now_ns();
        int spins = 0;
        while (atomic_load(&posted) == seen) {
            relax();
            if (++spins % 256 == 0 && now_ns() - since > SPIN_NS) {
                atomic_fetch_add(&sleeping, 1);
                sleep_while(&posted, seen, 0);
                atomic_fetch_sub(&sleeping, 1);
                since = now_ns();
            }
        }
        seen = atomic_load(&posted);
        run_parts(seen);
    }
}

/* pool.h: entry(batch, lo, hi) over `parts` ranges of the items, on this thread and the
 * helpers, polling `poll` on this thread. */
int gccl_spread(gccl_entry entry, const void *batch, int64_t items, int64_t parts,
                gccl_poll poll) {
    const gccl_poll outer_poll = thread_poll; /* a call from a signal handler's poll */
    thread_poll = poll;
    thread_work = 0;
    thread_polled_ns = now_ns();
    if (parts <= 1 || atomic_flag_test_and_set(&running)) {
        _Atomic int stopped = 0; /* this thread's job alone */
        const int code = run_entry_part(entry, batch, 0, items, &stopped);
        thread_poll = outer_poll;
        return code;
    }
    uint32_t number = atomic_load(&posted) + 1;
    /* the new number with nothing to claim first: a helper still holding a claim of the
     * last job fails to make it, and none claims a part before the fields are written */
    atomic_store(&claims, ((uint64_t)number << 32) | PART_MASK);
    job_entry = entry;
    job_batch = batch;
    job_items = items;
    atomic_store(&job_parts, parts);
    atomic_store(&ended, 0);
    atomic_store(&failure, 0);
    atomic_store(&job_stopped, 0);
    uint32_t last = atomic_load(&finished);
    atomic_store(&claims, (uint64_t)number << 32);
    atomic_store(&posted, number);
    if (atomic_load(&sleeping) > 0) wake(&posted, parts - 1); /* the caller runs a part */
    run_parts(number);
    int64_t since = now_ns();
    int spins = 0;
    while (atomic_load(&ended) < parts) { /* parts the helpers still run */
        relax();
        if (++spins % 256 == 0 && now_ns() - since > SPIN_NS) {
            sleep_while(&finished, last, poll ? POLL_NS : 0);
            last = atomic_load(&finished);
            if (poll) poll_now(&job_stopped);
        }
    }
    thread_poll = outer_poll;
    int code = atomic_load(&failure);
    atomic_flag_clear(&running);
    return code;
}
