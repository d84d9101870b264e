/* The volume engine's memory: the blocks its slabs' arrays leave, kept for the next slabs
 * of this call or the next, within a bound the host sets and released when it asks. */
#define _GNU_SOURCE /* madvise's MADV_HUGEPAGE under -std=c11 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/mman.h>
#endif

#include "volume_slab.h"

_Static_assert(sizeof(gccl_slab) == GCCL_SLAB_WORDS * sizeof(int64_t),
               "GCCL_SLAB_WORDS is gccl_slab's size in int64 words");

/* Ask for huge pages for the whole 2 MiB pages of an array of `bytes` (where the system
 * has them, as numpy does for its large arrays): a slab's arrays are fresh memory each
 * call, whose 4 KiB pages each cost a fault. */
static void advise_huge(void *array, size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const uintptr_t huge = (uintptr_t)1 << 21;
    const uintptr_t start = ((uintptr_t)array + huge - 1) & ~(huge - 1);
    const uintptr_t end = ((uintptr_t)array + bytes) & ~(huge - 1);
    if (end > start) madvise((void *)start, end - start, MADV_HUGEPAGE);
#else
    (void)array, (void)bytes;
#endif
}

/* Blocks of memory the slabs' arrays leave, kept for the next slabs (of this call or the
 * next): fresh memory costs a page fault per page touched, and on a virtual machine more
 * where its host took the pages back. At most SPARE_COUNT blocks of spare_limit bytes in
 * all, the largest ones; the host's scratch owner (backends/cpu/scratch.py) sets the bound
 * and releases them. */
#define SPARE_COUNT 16
static struct {
    void *block;
    size_t bytes;
} spares[SPARE_COUNT];
static size_t spare_limit = (size_t)1 << 30; /* under the lock */
static atomic_flag spares_busy = ATOMIC_FLAG_INIT;

static void lock_spares(void) {
    while (atomic_flag_test_and_set_explicit(&spares_busy, memory_order_acquire)) continue;
}

static void unlock_spares(void) { atomic_flag_clear_explicit(&spares_busy, memory_order_release); }

/* A block of at least `bytes`: the smallest kept one that holds them, else a new one (NULL
 * out of memory); *got = its size. */
void *gccl_obtain(size_t bytes, size_t *got) {
    int best = -1;
    void *block = NULL;
    lock_spares();
    for (int i = 0; i < SPARE_COUNT; i++) {
        if (spares[i].block && spares[i].bytes >= bytes &&
            (best < 0 || spares[i].bytes < spares[best].bytes))
            best = i;
    }
    if (best >= 0) {
        block = spares[best].block;
        *got = spares[best].bytes;
        spares[best].block = NULL;
    }
    unlock_spares();
    if (block) return block;
    block = malloc(bytes);
    if (block) advise_huge(block, bytes);
    *got = bytes;
    return block;
}

/* A block of `bytes` (or NULL) kept for a later slab in place of a smaller one where the
 * limits allow, else freed. */
void gccl_release(void *block, size_t bytes) {
    if (!block) return;
    void *drop = block;
    size_t total = 0;
    int empty = -1, smallest = -1;
    lock_spares();
    for (int i = 0; i < SPARE_COUNT; i++) {
        if (!spares[i].block) {
            empty = i;
            continue;
        }
        total += spares[i].bytes;
        if (smallest < 0 || spares[i].bytes < spares[smallest].bytes) smallest = i;
    }
    if (empty >= 0 && total + bytes <= spare_limit) {
        spares[empty].block = block;
        spares[empty].bytes = bytes;
        drop = NULL;
    } else if (smallest >= 0 && spares[smallest].bytes < bytes &&
               total - spares[smallest].bytes + bytes <= spare_limit) {
        drop = spares[smallest].block;
        spares[smallest].block = block;
        spares[smallest].bytes = bytes;
    }
    unlock_spares();
    free(drop);
}

/* The kept blocks freed, the largest first, until they hold at most `keep` bytes (under the
 * lock); the blocks to free are put in drop[] and their number returned, to be freed after
 * the lock is let go. */
static int trim_spares(size_t keep, void **drop) {
    int dropped = 0;
    for (;;) {
        size_t total = 0;
        int largest = -1;
        for (int i = 0; i < SPARE_COUNT; i++) {
            if (!spares[i].block) continue;
            total += spares[i].bytes;
            if (largest < 0 || spares[i].bytes > spares[largest].bytes) largest = i;
        }
        if (total <= keep) return dropped;
        drop[dropped++] = spares[largest].block;
        spares[largest].block = NULL;
    }
}

/* volume.h: the bound on the kept blocks; those beyond it are freed. */
void gccl_set_spare_limit(int64_t bytes) {
    void *drop[SPARE_COUNT];
    lock_spares();
    spare_limit = bytes > 0 ? (size_t)bytes : 0;
    const int dropped = trim_spares(spare_limit, drop);
    unlock_spares();
    for (int i = 0; i < dropped; i++) free(drop[i]);
}

/* volume.h: every kept block freed. */
void gccl_release_spares(void) {
    void *drop[SPARE_COUNT];
    lock_spares();
    const int dropped = trim_spares(0, drop);
    unlock_spares();
    for (int i = 0; i < dropped; i++) free(drop[i]);
}

/* volume.h: the bytes of the kept blocks. */
int64_t gccl_spare_bytes(void) {
    size_t total = 0;
    lock_spares();
    for (int i = 0; i < SPARE_COUNT; i++) total += spares[i].block ? spares[i].bytes : 0;
    unlock_spares();
    return (int64_t)total;
}

/* The slab's label arrays grown to twice their room (parent, area and, with `magnitudes`,
 * magnitude grow together, from spare blocks where there are). Returns 0, or -1 out of
 * memory. */
int gccl_grow_labels(gccl_slab *slab, int magnitudes) {
    const int64_t held = slab->labels_held, want = held ? 2 * held : 4096;
    const size_t used = (size_t)(slab->labels + 1); /* entries 0..labels */
    size_t got_parent, got_area, got_magnitude = SIZE_MAX;
    int32_t *parent = gccl_obtain(sizeof(int32_t) * (size_t)want, &got_parent);
    int64_t *area = gccl_obtain(sizeof(int64_t) * (size_t)want, &got_area);
    int64_t *magnitude =
        magnitudes ? gccl_obtain(sizeof(int64_t) * (size_t)want, &got_magnitude) : NULL;
    if (!parent || !area || (magnitudes && !magnitude)) {
        gccl_release(parent, got_parent);
        gccl_release(area, got_area);
        gccl_release(magnitude, got_magnitude);
        return -1;
    }
    if (held) {
        memcpy(parent, slab->parent, sizeof(int32_t) * used);
        memcpy(area, slab->area, sizeof(int64_t) * used);
        if (magnitudes) memcpy(magnitude, slab->magnitude, sizeof(int64_t) * used);
    }
    gccl_release(slab->parent, sizeof(int32_t) * (size_t)held);
    gccl_release(slab->area, sizeof(int64_t) * (size_t)held);
    gccl_release(slab->magnitude, sizeof(int64_t) * (size_t)held);
    slab->parent = parent;
    slab->area = area;
    slab->magnitude = magnitude;
    size_t entries = got_parent / sizeof(int32_t);
    entries = got_area / sizeof(int64_t) < entries ? got_area / sizeof(int64_t) : entries;
    entries = got_magnitude / sizeof(int64_t) < entries ? got_magnitude / sizeof(int64_t) : entries;
    slab->labels_held = (int64_t)entries;
    return 0;
}

/* A slab of `rows` rows its row_labels and bits (the word before its first row 0).
 * Returns 0, or -1 out of memory. */
int gccl_start_slab(gccl_slab *slab, int64_t rows, int64_t width) {
    size_t got;
    slab->row_labels = gccl_obtain(row_label_bytes(rows), &got);
    slab->bits = gccl_obtain(bits_bytes(rows, width), &got);
    if (!slab->row_labels || !slab->bits) return -1;
    slab->bits[0] = 0;
    return 0;
}

/* Release the state of slabs lo..hi-1 (any of its arrays may be missing). */
int gccl_volume_free(const gccl_volumes *b, int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; t++) {
        gccl_slab *slab = &b->slabs[t];
        const int64_t rows = (b->tasks[3 * t + 2] - b->tasks[3 * t + 1]) * b->height;
        gccl_release(slab->row_labels, row_label_bytes(rows));
        gccl_release(slab->bits, bits_bytes(rows, b->width));
        gccl_release(slab->parent, sizeof(int32_t) * (size_t)slab->labels_held);
        gccl_release(slab->area, sizeof(int64_t) * (size_t)slab->labels_held);
        gccl_release(slab->magnitude, sizeof(int64_t) * (size_t)slab->labels_held);
        memset(slab, 0, sizeof *slab);
    }
    return 0;
}
