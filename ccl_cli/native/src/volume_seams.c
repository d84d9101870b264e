/* The volume engine's seams (volume.h): local components joined across the seams between
 * a volume's slabs and numbered 1..K in raster order, then each component's voxels counted
 * and the kept ones renumbered. */
#include <stdlib.h>

#include "volume_slab.h"

#define PIXEL_TEMPLATE "volume_joins.h"
#include "pixel_types.h"

typedef int (*runs_join_of)(const void *, const void *, int64_t, int64_t, int64_t, int64_t,
                            int64_t, const gccl_rules *);
static const runs_join_of RUNS_JOIN[GCCL_TYPES] = BY_TYPE(runs_join);

/* The runs of equal nonzero labels of a row of `labels`; returns their number. */
static int64_t label_runs(const uint32_t *row, int64_t width, gccl_run *runs) {
    int64_t k = 0, x = 0;
    while (x < width) {
        const uint32_t label = row[x];
        if (label == 0) {
            x++;
            continue;
        }
        const int64_t s = x;
        while (x < width && row[x] == label) x++;
        runs[k++] = (gccl_run){(int32_t)s, (int32_t)x, (int32_t)label};
    }
    return k;
}

static inline int64_t find_slot(const int64_t *forest, int64_t i) {
    while (forest[i] < i) i = forest[i];
    return i;
}

/* Join the sets of slots g and h, the smaller root the root. */
static inline void join_slot_sets(int64_t *forest, int64_t g, int64_t h) {
    const int64_t rg = find_slot(forest, g), rh = find_slot(forest, h);
    if (rg < rh) {
        forest[rh] = rg;
    } else if (rh < rg) {
        forest[rg] = rh;
    }
}

/* The seam between slab t (its first plane z) and slab t - 1 (plane z - 1) of volume n:
 * every pair of touching runs (of equal labels: one set within its slab) that joins under
 * the connectivity, in tau mode where a pair of their voxels joins, joins their slots.
 * here and before: room for a row's runs each (width). */
static void join_seam(const gccl_volumes *b, int64_t n, int64_t t, gccl_run *here,
                      gccl_run *before) {
    const int64_t width = b->width, height = b->height, z = b->tasks[3 * t + 1];
    const int64_t image_bytes = type_bytes(b->image_type);
    const uint8_t *image = b->image;
    const gccl_rules tolerance = b->rules;
    const int32_t *local = b->slabs[t].parent, *local_before = b->slabs[t - 1].parent;
    const int64_t slot = b->first[t], slot_before = b->first[t - 1];
    const neighbour *near;
    const int count = neighbours_of(b->connectivity, &near);
    for (int64_t y = 0; y < height; y++) {
        const int64_t at = row_index(b, n, z, y);
        const int64_t k = label_runs(b->labels + at, width, here);
        if (k == 0) continue;
        for (int i = 0; i < count; i++) {
            const int64_t yy = y + near[i].dy;
            if (near[i].dz == 0 || yy < 0 || yy >= height) continue;
            const int64_t other_at = row_index(b, n, z - 1, yy);
            const int64_t m = label_runs(b->labels + other_at, width, before);
            const int64_t g = near[i].grow;
            int64_t jj = 0;
            for (int64_t r = 0; r < k; r++) {
                const int64_t s = here[r].start, e = here[r].end;
                while (jj < m && before[jj].end + g <= s) jj++;
                for (int64_t j = jj; j < m && before[j].start < e + g; j++) {
                    if (b->rules.tau_mode &&
                        !RUNS_JOIN[b->image_type](image + at * image_bytes,
                                                  image + other_at * image_bytes, s, e,
                                                  before[j].start, before[j].end, g,
                                                  &tolerance))
                        continue;
                    join_slot_sets(b->forest, slot + local[here[r].label],
                                   slot_before + local_before[before[j].label]);
                }
            }
        }
    }
}

/* Per volume lo..hi-1: join local components across the slabs' seams (each slot a set of
 * its own first), then number the components 1..K in raster order: forest[first[t] + local
 * id] = component (0 at the background slots); components[n] = K, components_before[t] =
 * the components numbered in its slabs before slab t. Returns 0, -1 out of memory, or
 * GCCL_STOPPED. */
int gccl_volume_merge_seams(const gccl_volumes *b, int64_t lo, int64_t hi) {
    gccl_run *here = malloc(sizeof(gccl_run) * (size_t)b->width);
    gccl_run *before = malloc(sizeof(gccl_run) * (size_t)b->width);
    const int failed = !here || !before;
    int code = failed ? -1 : 0;
    for (int64_t n = lo; n < hi && code == 0; n++) {
        const int64_t t_lo = b->volume_tasks[n], t_hi = b->volume_tasks[n + 1];
        if (gccl_stopping((t_hi - t_lo) * b->height * (b->width + 1))) {
            code = GCCL_STOPPED;
            break;
        }
        for (int64_t i = b->first[t_lo]; i < b->first[t_hi]; i++) b->forest[i] = i;
        for (int64_t t = t_lo + 1; t < t_hi; t++) join_seam(b, n, t, here, before);
        int64_t k = 0; /* the forest flattened over the volume's slots, in order */
        for (int64_t t = t_lo; t < t_hi; t++) {
            b->components_before[t] = k;
            b->forest[b->first[t]] = 0;
            for (int64_t i = b->first[t] + 1; i < b->first[t + 1]; i++) {
                const int64_t f = b->forest[i];
                b->forest[i] = f < i ? b->forest[f] : ++k;
            }
        }
        b->components[n] = k;
    }
    free(here);
    free(before);
    return code;
}

/* Per volume lo..hi-1: kept[n] = volume n's kept components and, where counts_voxels (else
 * every component keeps its number: kept_ids), kept_id[c] = the new label of component c
 * (0 where it has fewer than min_area voxels), numbered 1.. per volume (with `selecting`,
 * the host's, from component_area), each component's voxels in component_area (and where
 * keeps_magnitude its largest finite |v| in component_magnitude). */
int gccl_volume_keep(const gccl_volumes *b, int64_t lo, int64_t hi) {
    for (int64_t n = lo; n < hi; n++) {
        const int64_t before = b->component_first[n] - 1; /* component c is [before + c] */
        if (!counts_voxels(b)) { /* all kept, as they are (kept_ids) */
            b->kept[n] = b->components[n];
            continue;
        }
        int64_t *area = b->component_area + before;
        int64_t *magnitude = keeps_magnitude(b) ? b->component_magnitude + before : NULL;
        for (int64_t c = 1; c <= b->components[n]; c++) {
            area[c] = 0;
            if (magnitude) magnitude[c] = 0;
        }
        for (int64_t t = b->volume_tasks[n]; t < b->volume_tasks[n + 1]; t++) {
            const gccl_slab *slab = &b->slabs[t];
            const int64_t *forest = b->forest + b->first[t];
            for (int64_t local = 1; local <= slab->locals; local++) {
                const int64_t c = forest[local];
                area[c] += slab->area[local];
                if (magnitude && slab->magnitude[local] > magnitude[c])
                    magnitude[c] = slab->magnitude[local];
            }
        }
        if (b->selecting) continue;
        int64_t k = 0;
        for (int64_t c = 1; c <= b->components[n]; c++) {
            b->kept_id[before + c] = area[c] >= b->min_area ? ++k : 0;
        }
        b->kept[n] = k;
    }
    return 0;
}

