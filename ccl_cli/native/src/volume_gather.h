/* The volume engine's last pass over a slab's voxels with statistics, once per pixel type:
 * volume_write.c includes this file through pixel_types.h, which defines PIXEL, PIXEL_MIN,
 * PIXEL_MAX, SUFFIX and FLOATING. */
/* The values of voxels s..e-1 of a row (values: the row's): their sum and extremes
 * (float volumes: the sum of each finite value's term trunc(v * 2**shift), and the
 * extremes' total-order keys). An integer run of at most 8 voxels with 8 in the row from s
 * is read as 8, those past it left out by masks, so that the branches taken depend on no
 * voxel. */
static inline __attribute__((always_inline)) run_values
CAT(values_of_run, SUFFIX)(const PIXEL *values, int64_t s, int64_t e, int64_t width,
                           int64_t shift) {
#if FLOATING
    (void)width;
    run_values out = {0, INT64_MAX, INT64_MIN};
    for (int64_t x = s; x < e; x++) {
        const double fv = (double)values[x];
        const int64_t key = order_key(float_bits(fv));
        if (isfinite(fv)) out.total += (int64_t)trunc(ldexp(fv, (int)shift));
        out.lo = key < out.lo ? key : out.lo;
        out.hi = key > out.hi ? key : out.hi;
    }
    return out;
#else
    (void)shift;
    int64_t total = 0;
    PIXEL low = values[s], high = values[s];
    if (e - s <= 8 && s + 8 <= width) {
        const int64_t length = e - s;
        for (int64_t j = 0; j < 8; j++) {
            const PIXEL v = values[s + j];
            const int in = j < length;
            total += in ? (int64_t)v : 0;
            low = in && v < low ? v : low;
            high = in && v > high ? v : high;
        }
    } else {
        for (int64_t x = s; x < e; x++) {
            const PIXEL v = values[x];
            total += v;
            low = v < low ? v : low;
            high = v > high ? v : high;
        }
    }
    return (run_values){total, (int64_t)low, (int64_t)high};
#endif
}

/* A row of a slab whose k runs all took one local id (runs[0].label; its final label
 * `final`, its float-mean shift `shift`): their labels made final, their statistics summed
 * and added into its record once (gather_slab; met: the largest kept local id met before,
 * returned as it is after). Apart from gather_slab's loop over runs, whose registers it
 * would otherwise share. */
static __attribute__((noinline)) int64_t CAT(gather_row_of_one, SUFFIX)(
    uint32_t *row, const PIXEL *values, const gccl_run *runs, int64_t k, int64_t width,
    uint32_t final, int64_t shift, gccl_volume_record *records, int64_t met,
    const stretch_place *here) {
    for (int64_t i = 0; i < k; i++) { /* a run's voxels hold one label: some final already */
        const int64_t s = runs[i].start;
        if (row[s] != final) put_run_labels(row, s, runs[i].end, width, final);
    }
    if (final == 0) return met;
    const int64_t local = runs[0].label, fresh = local > met;
    stretch_sum g = sum_of_stretch(
        runs[0].start, runs[0].end,
        CAT(values_of_run, SUFFIX)(values, runs[0].start, runs[0].end, width, shift));
    for (int64_t i = 1; i < k; i++) {
        const int64_t s = runs[i].start, e = runs[i].end;
        extend_sum(&g, s, e, CAT(values_of_run, SUFFIX)(values, s, e, width, shift));
    }
    add_stretches(&records[local], fresh, here, &g);
    return fresh ? local : met;
}

/* The last pass over the rows of slab t (planes z0..z1-1 of volume n) with statistics: each
 * foreground voxel's label replaced by its final label (final: by local id, 0 where
 * min-area drops it), and the statistics of each stretch of one kept label (a binary run
 * is one; a tau run may hold several) gathered into the record of its local id (records:
 * the slab's, by local id; float volumes with their component's float-mean shift). A
 * local id's record starts at its first stretch (add_stretch's `fresh`): the slab's local
 * ids are first met in increasing order (each set's root is the label its first run made,
 * and local ids number the roots in order), so a local id above every one met before is
 * new. A binary row's runs are found first, then their local ids and final labels read in
 * loops of loads that do not wait for one another (runs and kept: room for a row's runs);
 * each run's label written (put_run_labels); a row whose runs all took one local id has
 * them summed before they go into its record, and its runs whose label is final already
 * left as they are. Returns 0, or GCCL_STOPPED. */
static int CAT(gather_slab, SUFFIX)(const gccl_volumes *b, const gccl_slab *slab, int64_t t,
                                     const int64_t *final, gccl_volume_record *records,
                                     gccl_run *runs, uint32_t *kept) {
    const int64_t n = b->tasks[3 * t], z0 = b->tasks[3 * t + 1], z1 = b->tasks[3 * t + 2];
    const int64_t width = b->width, height = b->height, words = voxel_words(width);
#if FLOATING
    const int64_t *forest = b->forest + b->first[t];
    const int64_t *shift = b->shift + b->component_first[n] - 1; /* by component */
#define SHIFT_OF(local) shift[forest[local]]
#else
#define SHIFT_OF(local) 0
#endif
    const int32_t *local_of = slab->parent;
    int64_t met = 0; /* the largest kept local id met so far */
    for (int64_t z = z0; z < z1; z++) {
        if (gccl_stopping(1)) return GCCL_STOPPED;
        for (int64_t y = 0; y < height; y++) {
            if (gccl_stopping(width + 1)) return GCCL_STOPPED;
            const int64_t r = (z - z0) * height + y;
            if (slab->row_labels[r] == 0) continue; /* all 0 */
            const int64_t at = row_index(b, n, z, y);
            uint32_t *row = b->labels + at;
            const PIXEL *values = (const PIXEL *)b->values + at;
            const uint64_t *voxels = bit_row(slab, width, r) + 1;
            const stretch_place here = {y, z, FLOATING};
            if (b->rules.tau_mode) {
                int64_t s, e;
                for (int64_t x = 0; next_run(voxels, words, x, &s, &e); x = e + 1) {
                    for (int64_t i = s; i < e;) { /* the run's stretches of one label */
                        const uint32_t label = row[i];
                        const int64_t from = i;
                        for (i = from + 1; i < e && row[i] == label;) i++;
                        const int64_t local = local_of[label];
                        const uint32_t final_label = (uint32_t)final[local];
                        for (int64_t j = from; j < i; j++) row[j] = final_label;
                        if (final_label == 0) continue;
                        const int64_t fresh = local > met;
                        met = fresh ? local : met;
                        const stretch_sum g = sum_of_stretch(
                            from, i,
                            CAT(values_of_run, SUFFIX)(values, from, i, width, SHIFT_OF(local)));
                        add_stretches(&records[local], fresh, &here, &g);
                    }
                }
                continue;
            }
            const int64_t k = bit_runs(voxels, words, runs);
            for (int64_t i = 0; i < k; i++) runs[i].label = local_of[row[runs[i].start]];
            int one = 1; /* whether the row's runs all took one local id */
            for (int64_t i = 0; i < k; i++) {
                __builtin_prefetch(&records[runs[i].label], 1);
                kept[i] = (uint32_t)final[runs[i].label];
                one &= runs[i].label == runs[0].label;
            }
            if (one) {
                met = CAT(gather_row_of_one, SUFFIX)(row, values, runs, k, width, kept[0],
                                                     SHIFT_OF(runs[0].label), records, met,
                                                     &here);
                continue;
            }
            for (int64_t i = 0; i < k; i++) {
                const int64_t s = runs[i].start, e = runs[i].end, local = runs[i].label;
                put_run_labels(row, s, e, width, kept[i]);
                if (kept[i] == 0) continue;
                const int64_t fresh = local > met;
                met = fresh ? local : met;
                const stretch_sum g = sum_of_stretch(
                    s, e, CAT(values_of_run, SUFFIX)(values, s, e, width, SHIFT_OF(local)));
                add_stretches(&records[local], fresh, &here, &g);
            }
        }
    }
#undef SHIFT_OF
    return 0;
}
