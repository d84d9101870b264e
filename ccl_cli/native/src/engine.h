/* The CPU labeling engine's shared declarations: the batch every entry point reads, the
 * statistics record, and the pixel types.
 *
 * A batch is (count, height, width); each image is cut into row strips ("tasks": rows
 * [r0, r1) of image n). Every task labels its strip on its own with a two-pass
 * union-find (SAUF): provisional labels base+1.. (base = r0 * width) whose parent is
 * never larger than the label. While it labels, it sums the statistics of each
 * horizontal run (consecutive pixels of one set) into a record of the run's
 * provisional label. The strip's labels are then flattened to local ids 1..m in order
 * of creation, which is raster order of each strip component's first pixel, and the
 * records summed per local id. Local ids of an image are placed strip after strip
 * (offsets `first`, slot first[t] being the strip's background), the seams are joined
 * in a second union-find whose roots are the smallest ids, and flattening it numbers
 * the components 1..K in raster order of their first pixel whatever the strips were.
 * Every sum is an integer and every extreme a min or max, so no result depends on the
 * strips or the threads.
 */
#ifndef GCCL_ENGINE_H
#define GCCL_ENGINE_H

#include <stdint.h>

#include "pixel_types.h"

/* Pixel types (pixel_types.h), as labels.py names them. */
#define GCCL_TYPE_NAME(arg, suffix, name, ...) name,
enum gccl_type { GCCL_PIXEL_TYPES(GCCL_TYPE_NAME, ) GCCL_TYPES };

/* Foreground rules (labels.py's foreground_rule): every non-NaN pixel, v != rule_value,
 * v > rule_value, v < rule_value, compared in float64 (exact for every pixel type). */
enum gccl_rule { GCCL_FG_ALL, GCCL_FG_NOT, GCCL_FG_ABOVE, GCCL_FG_BELOW };

/* Which pixels are foreground and which neighbours join: what images (gccl_batch) and
 * volumes (volume.h's gccl_volumes) share. */
typedef struct {
    int64_t rule;                    /* enum gccl_rule */
    int64_t tau_mode;                /* neighbours join within the tolerance, else all do */
    double rule_value;               /* the value the foreground rule compares with */
    double tau, relative, quadratic; /* the tolerance (rows.h's tolerance) */
} gccl_rules;

/* One component's (or run's, or strip label's) statistics. For integer images `total`
 * is the sum of values and lo/hi the extremes; for float images `total` is the largest
 * finite |v| as float64 bits and lo/hi the extremes' total-order keys (order_key). */
typedef struct {
    int64_t area, sum_x, sum_y, total, lo, hi;
    int32_t x_min, x_max, y_min, y_max;
} gccl_record;

/* Everything the entry points read and write; labels.py fills it phase by phase. Arrays
 * are C-contiguous; (a, b) means a rows of b. */
typedef struct {
    int64_t count, height, width;
    int64_t image_type, value_type; /* enum gccl_type of image and values */
    int64_t connectivity;     /* 4 or 8 */
    int64_t floating, min_area;
    int64_t label_bytes;      /* bytes per final label in `labels`: 2 or 4 */
    gccl_rules rules;
    const void *image;        /* (count, height, width): foreground, tau joins */
    const void *values;       /* (count, height, width): what statistics read */
    const int32_t *reaches;   /* 8- and 16-bit images with a growing tolerance: the reach
                               * of each value v at v - the type's minimum (strip.h) */
    int32_t *prov;            /* (count, height, width) provisional labels */
    int32_t *parent;          /* (count, height * width + 1); parent[n][0] == 0 */
    const int64_t *tasks;     /* (tasks, 3): image, first row, end row */
    const int64_t *acc_first; /* (tasks + 1): task t's first record in acc */
    gccl_record *acc;         /* a record per label a task may make */
    int64_t *local_counts;    /* (tasks): components of each strip */
    int64_t *lasts;           /* (tasks): each task's last provisional label */
    const int64_t *first;     /* (tasks + 1): task t's slots in forest, first[t] background */
    const int64_t *image_tasks; /* (count + 1): the tasks of image n */
    int64_t *forest;          /* (first[tasks]): seam union-find, then component numbers */
    int64_t *components;      /* (count): K per image */
    const int64_t *component_first; /* (count + 1): index of image n's first component */
    gccl_record *stats;       /* (component_first[count]): per component; the start of acc */
    const int64_t *shift;     /* (first[tasks]): float-mean shift per slot */
    int64_t *sums;            /* (first[tasks]): float-mean integer sums per slot */
    int64_t *kept_id;         /* (components): new label, 0 when min-area drops it */
    int64_t *kept;            /* (count): kept components per image */
    const int64_t *kept_first; /* (count + 1): index of image n's first kept row */
    const double *mean;       /* (components): float images' means */
    int64_t *ints;            /* (5, kept_first[count]): area, x, y, width, height */
    double *floats;           /* (5, kept_first[count]): centroid x, y, mean, min, max */
    void *labels;             /* (count, height, width) final labels; may be prov itself */
    const uint8_t *chosen;    /* (count): the images whose final labels are written */
} gccl_batch;

/* The entry points, in the order labels.py calls them: each works on items lo..hi-1 (tasks
 * or images, as each says) and returns 0, or -1 when it ran out of memory. */
int gccl_label_strips(const gccl_batch *b, int64_t lo, int64_t hi);
int gccl_merge_seams(const gccl_batch *b, int64_t lo, int64_t hi);
int gccl_reduce_stats(const gccl_batch *b, int64_t lo, int64_t hi);
int gccl_pack_stats(const gccl_batch *b, int64_t lo, int64_t hi); /* on one thread */
int gccl_float_terms(const gccl_batch *b, int64_t lo, int64_t hi);
int gccl_keep_components(const gccl_batch *b, int64_t lo, int64_t hi);
int gccl_kept_columns(const gccl_batch *b, int64_t lo, int64_t hi);
int gccl_write_labels(const gccl_batch *b, int64_t lo, int64_t hi);

#endif
