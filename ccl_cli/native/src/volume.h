/* The CPU engine for volumes: the batch its entry points read, and a slab's state.
 *
 * A batch is (count, depth, height, width) = (n, z, y, x). Each volume is cut into slabs
 * of planes along z ("tasks": planes [z0, z1) of volume n), each labeled on its own by a
 * run-based union-find: a run is a stretch of one row's foreground voxels (in tau mode,
 * each joining its left neighbour), and it joins the sets of the voxels it touches in the
 * rows before it under the connectivity: the row above in its own plane and the rows
 * around it in the plane before (6: the row above and the same row, face to face; 18:
 * those two diagonally too, and the rows above and below face to face; 26: all of them,
 * diagonally too). Binary mode finds them in the slab's foreground kept as bits, one voxel
 * per touching stretch, whose label it reads back from the output; in tau mode two touching
 * runs (of the last two planes' runs) join where one pair of neighbouring voxels joins. A
 * run that joins none makes a label, so labels are made in raster order (z, y, x) of each
 * set's first voxel, and the root of a set is its smallest label; each voxel's label is
 * written into the output as it is made. The slab's labels are then flattened to local ids 1..m in order,
 * the local ids of a volume are placed slab after slab (slots `first`, slot first[t] the
 * background), the seams between slabs are joined in a second union-find whose roots are
 * the smallest slots, and flattening that numbers the components 1..K in raster order of
 * their first voxel whatever the slabs. One last pass per slab replaces each foreground
 * voxel's label by its final label and gathers the statistics of the kept components into
 * a record per slot; the few components with slots in several slabs (across a seam) have
 * their records added into their first slot's, and the columns are read from each kept
 * component's first slot. Every sum is an integer and every extreme a min or max, so no
 * result depends on the slabs or the threads.
 *
 * Indexes of voxels are 64-bit; labels within a slab are 32-bit, which the host keeps
 * exact by planning slabs of fewer than 2**31 - 1 voxels (a slab makes at most one
 * label per voxel).
 */
#ifndef GCCL_VOLUME_H
#define GCCL_VOLUME_H

#include <stdint.h>

#include "engine.h"

/* The statistics of a set of voxels. For integer volumes `sum_low`/`sum_high` are the
 * 128-bit sum of values (low word unsigned, high word signed) and lo/hi the extremes; for
 * float volumes `sum_low` holds the sum of the values' terms trunc(v * 2**shift) (the
 * float-mean rule, as int64 bits) and lo/hi the extremes' total-order keys (engine.c's
 * order_key). */
typedef struct {
    int64_t area, sum_x, sum_y, sum_z, lo, hi;
    uint64_t sum_low;
    int64_t sum_high;
    int32_t x_min, x_max, y_min, y_max, z_min, z_max;
} gccl_volume_record;

/* What one slab keeps from its first pass to the last (engine memory; gccl_volume_free
 * releases it). */
typedef struct {
    int32_t *row_labels;         /* per row of the slab: the one label its runs took, 0 where
                                    it has none, -1 where they took several */
    uint64_t *bits;              /* per row of the slab: its foreground, a bit a voxel */
    int32_t *parent;             /* per label: its parent, then its local id */
    int64_t *area;               /* per label, then per local id: voxels; then final labels */
    int64_t *magnitude;          /* float volumes, per label, then per local id: the largest
                                    finite |v| (float64 bits) */
    int64_t labels;              /* labels made (1..labels) */
    int64_t labels_held;         /* room for labels in parent, area and magnitude */
    int64_t locals;              /* local ids (1..locals) */
} gccl_slab;

/* The size of gccl_slab in int64 words: the host allocates tasks * this many. */
#define GCCL_SLAB_WORDS 8

/* Everything the entry points read and write; volumes.py fills it phase by phase. Arrays
 * are C-contiguous; (a, b) means a rows of b. */
typedef struct {
    int64_t count, depth, height, width;
    int64_t image_type, value_type; /* enum gccl_type of image and values */
    int64_t connectivity; /* 6, 18 or 26 */
    int64_t floating, min_area, statistics;
    int64_t selecting; /* max-area or largest: kept_id is the host's (from component_area) */
    int64_t zeroed;    /* the labels are 0 already (fresh zeroed memory): 0s are not written */
    gccl_rules rules;
    const void *image;               /* (count, depth, height, width): foreground, tau joins */
    const void *values;              /* (count, depth, height, width): what statistics read */
    uint32_t *labels;                /* (count, depth, height, width): the labels */
    const int64_t *tasks;            /* (tasks, 3): volume, first plane, end plane */
    gccl_slab *slabs;                /* (tasks): each slab's state */
    int64_t *local_counts;           /* (tasks): local ids of each slab */
    const int64_t *first;            /* (tasks + 1): slab t's slots in forest, first[t] background */
    const int64_t *volume_tasks;     /* (count + 1): the tasks of volume n */
    int64_t *forest;                 /* (first[tasks]): seam union-find, then component numbers */
    int64_t *components;             /* (count): K per volume */
    int64_t *components_before;      /* (tasks): components whose first slot is in an earlier
                                        slab of the volume */
    const int64_t *component_first;  /* (count + 1): volume n's first component */
    int64_t *component_area;         /* (components): voxels of each component */
    int64_t *component_magnitude;    /* (components): float volumes' largest finite |v| (bits) */
    int64_t *kept_id;                /* (components): new label, 0 where min-area drops it */
    int64_t *kept;                   /* (count): kept components per volume */
    const int64_t *shift;            /* (components): float volumes' float-mean shift */
    const int64_t *kept_first;       /* (count + 1): volume n's first kept row */
    gccl_volume_record *records;     /* (first[tasks]): statistics per slot, of kept ones */
    int64_t *kept_slot;              /* (rows): each kept component's first slot */
    int64_t *ints;                   /* (7, rows): area, x, y, z, width, height, depth */
    double *floats;                  /* (6, rows): centroid x, y, z, mean, min, max */
    int64_t *sums;                   /* (rows): float volumes' float-mean integer sums */
} gccl_volumes;

/* The entry points, in the order volumes.py calls them: each works on items lo..hi-1
 * (tasks or volumes, as each says) and returns 0, or -1 when it ran out of memory. */
int gccl_volume_label_slabs(const gccl_volumes *b, int64_t lo, int64_t hi);
int gccl_volume_merge_seams(const gccl_volumes *b, int64_t lo, int64_t hi);
int gccl_volume_keep(const gccl_volumes *b, int64_t lo, int64_t hi);
int gccl_volume_write(const gccl_volumes *b, int64_t lo, int64_t hi);
int gccl_volume_gather(const gccl_volumes *b, int64_t lo, int64_t hi);
int gccl_volume_columns(const gccl_volumes *b, int64_t lo, int64_t hi);
int gccl_volume_free(const gccl_volumes *b, int64_t lo, int64_t hi);

/* The blocks of memory the slabs leave, kept for later slabs and calls (volume_memory.c):
 * their bound in bytes (1 GiB until set; those beyond a new bound are freed), their
 * release, and their bytes now. The host's scratch owner calls these. */
void gccl_set_spare_limit(int64_t bytes);
void gccl_release_spares(void);
int64_t gccl_spare_bytes(void);

#endif
