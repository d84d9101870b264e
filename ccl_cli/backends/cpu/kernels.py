"""Compiled loops of the CPU labeling engine (numba, cached on disk).

A batch is (N, H, W); each image is cut into row strips ("tasks": rows
[r0, r1) of image n). Every task labels its strip on its own with a two-pass
union-find (SAUF): provisional labels base+1.. (base = r0 * W) whose parent is
never larger than the label. While it labels, it sums the statistics of each
horizontal run (consecutive pixels of one set) into a record of the run's
provisional label. The strip's labels are then flattened to local ids 1..m in
order of creation, which is raster order of each strip component's first
pixel, and the records summed per local id. Local ids of an image are placed
strip after strip (offsets `first`, slot first[t] being the strip's
background), the seams are joined in a second union-find whose roots are the
smallest ids, and flattening it numbers the components 1..K in raster order of
their first pixel whatever the strips were. Every sum is an integer and every
extreme a min or max, so no result depends on the strips or the threads.

A statistics record is 8 int64: area, sum of x, sum of y, sum of values
(integer images) or largest finite |v| as float64 bits (float images), min and
max value (integers; for floats their total-order keys, see `order_key`), and
two int32 pairs: (x min, x max), (y min, y max).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numba import njit, types
from numba.extending import overload


def compiled(**options: Any) -> Callable[[Callable[..., Any]], Any]:
    """numba.njit with its on-disk cache (README, "The CPU backend"), or without
    one where numba finds no writable folder for it (then it compiles every run)."""

    def wrap(function: Callable[..., Any]) -> Any:
        try:
            return njit(cache=True, nogil=True, **options)(function)
        except RuntimeError:  # numba: "cannot cache function ...: no locator available"
            return njit(nogil=True, **options)(function)

    return wrap


def float_values(x: Any) -> bool:
    """Whether x (an array or a number) holds floats: a constant in compiled code, so
    the branch of the other kind is compiled away."""
    return bool(np.asarray(x).dtype.kind == "f")


@overload(float_values)
def _float_values_typed(x):  # numba compares the signatures: no annotations
    floating = isinstance(getattr(x, "dtype", x), types.Float)
    return lambda x: floating


# Foreground rules (labels.foreground_rule): every non-NaN pixel, v != a, v > a, v < a.
FG_ALL, FG_NOT, FG_ABOVE, FG_BELOW = 0, 1, 2, 3
RECORD = 8
_LOW63 = 0x7FFFFFFFFFFFFFFF


@compiled()
def order_key(bits):
    """float64 bits -> int64 whose order is IEEE totalOrder (-0.0 below +0.0); an involution."""
    return bits ^ ((bits >> 63) & _LOW63)


@compiled()
def _union(parent, i, j):
    """Join the sets of i and j; the root is the smaller root, returned."""
    ri = i
    while parent[ri] < ri:
        ri = parent[ri]
    rj = j
    while parent[rj] < rj:
        rj = parent[rj]
    root = min(ri, rj)
    while parent[i] < i:
        nxt = parent[i]
        parent[i] = root
        i = nxt
    parent[i] = root
    while parent[j] < j:
        nxt = parent[j]
        parent[j] = root
        j = nxt
    parent[j] = root
    return root


@compiled()
def _clear(acc, acc32, j):
    acc[j, 0] = 0
    acc[j, 1] = 0
    acc[j, 2] = 0
    acc[j, 3] = 0
    acc[j, 4] = _LOW63
    acc[j, 5] = -_LOW63 - 1
    acc32[j, 12] = 2**31 - 1
    acc32[j, 13] = -1
    acc32[j, 14] = 2**31 - 1
    acc32[j, 15] = -1


@compiled()
def _add(acc, acc32, j, length, x0, y, total, lo, hi, floating):
    """Add one run (pixels x0..x0+length-1 of row y) to record j."""
    acc[j, 0] += length
    acc[j, 1] += length * (2 * x0 + length - 1) // 2
    acc[j, 2] += length * y
    if floating:
        acc[j, 3] = max(acc[j, 3], total)  # |v| bits: non-negative floats order as integers
    else:
        acc[j, 3] += total
    acc[j, 4] = min(acc[j, 4], lo)
    acc[j, 5] = max(acc[j, 5], hi)
    acc32[j, 12] = min(acc32[j, 12], x0)
    acc32[j, 13] = max(acc32[j, 13], x0 + length - 1)
    acc32[j, 14] = min(acc32[j, 14], y)
    acc32[j, 15] = max(acc32[j, 15], y)


@compiled()
def _merge(dst, dst32, j, src, src32, i, floating):
    """Record dst[j] += record src[i]."""
    dst[j, 0] += src[i, 0]
    dst[j, 1] += src[i, 1]
    dst[j, 2] += src[i, 2]
    dst[j, 3] = max(dst[j, 3], src[i, 3]) if floating else dst[j, 3] + src[i, 3]
    dst[j, 4] = min(dst[j, 4], src[i, 4])
    dst[j, 5] = max(dst[j, 5], src[i, 5])
    dst32[j, 12] = min(dst32[j, 12], src32[i, 12])
    dst32[j, 13] = max(dst32[j, 13], src32[i, 13])
    dst32[j, 14] = min(dst32[j, 14], src32[i, 14])
    dst32[j, 15] = max(dst32[j, 15], src32[i, 15])


@compiled()
def _value(v, bits):
    """(sum term, |v| bits if finite, order value) of one pixel value."""
    if float_values(v):
        fv = np.float64(v)
        bits[0] = fv
        key = order_key(bits.view(np.int64)[0])
        if math.isinf(fv):
            return 0, np.int64(0), key
        bits[0] = abs(fv)
        return 0, bits.view(np.int64)[0], key
    w = np.int64(v)
    return w, np.int64(0), w


@compiled()
def _foreground_row(row, rule, a, fg):
    """fg[x] = whether row[x] is foreground (labels.foreground_rule), compared in float64."""
    if rule == FG_NOT:
        for x in range(row.shape[0]):
            v = np.float64(row[x])
            fg[x] = (v != a) & (v == v)
    elif rule == FG_ABOVE:
        for x in range(row.shape[0]):
            fg[x] = np.float64(row[x]) > a
    elif rule == FG_BELOW:
        for x in range(row.shape[0]):
            fg[x] = np.float64(row[x]) < a
    else:
        for x in range(row.shape[0]):
            v = np.float64(row[x])
            fg[x] = v == v


@compiled()
def _new_label(parent, acc, acc32, n, off):
    """Label n + 1, a set of its own with a cleared record off + n + 1."""
    n += 1
    parent[n] = n
    _clear(acc, acc32, off + n)
    return n


@compiled()
def _runs(cont, cur, vrow, y, acc, acc32, off, bits):
    """Sum each run of row y into the record of its label: a run starts at a
    foreground pixel (cont[x] odd) and continues while cont[x] & 2 (joins its
    left neighbour), so all its pixels are in one set."""
    floating = float_values(vrow)
    width = cont.shape[0]
    x = 0
    while x < width:
        if cont[x] == 0:
            x += 1
            continue
        x0 = x
        term, mag, key = _value(vrow[x], bits)
        total = mag if floating else term
        lo = key
        hi = key
        x += 1
        while x < width and cont[x] & 2:
            term, mag, key = _value(vrow[x], bits)
            if floating:
                total = max(total, mag)
            else:
                total += term
            lo = min(lo, key)
            hi = max(hi, key)
            x += 1
        _add(acc, acc32, off + cur[x0], x - x0, x0, y, total, lo, hi, floating)


@compiled()
def _row_runs(fg, runs):
    """The foreground runs of a row: runs[2 i], runs[2 i + 1] = start and end
    (exclusive) of run i; returns their number. Branch-free: a store per pixel."""
    k = 0
    previous = False
    width = fg.shape[0]
    for x in range(width):
        f = fg[x]
        runs[k] = x
        k += f != previous
        previous = f
    runs[k] = width
    k += previous
    return k // 2


@compiled()
def _binary_strip(
    image, values, prov, parent, acc, acc32, r0, r1, off, eight, rule, a, fg, runs, above
):
    """Binary first pass over rows r0..r1-1, run by run (labels from r0 * width + 1,
    label l's record at off + l); returns the last label made.

    A run joins every run of the row above that touches it (8-connectivity: also
    diagonally); a run touching none starts a label, so labels are made in raster
    order of their first pixel. runs and above: two (2 * width + 2) buffers, the
    run bounds of this row and the previous one.
    """
    floating = float_values(values)
    width = image.shape[1]
    grow = 1 if eight else 0
    n = r0 * width
    bits = np.empty(1, np.float64)
    n_above = 0
    for y in range(r0, r1):
        _foreground_row(image[y], rule, a, fg)
        k = _row_runs(fg, runs)
        cur, vrow = prov[y], values[y]
        j = 0
        x = 0
        for i in range(k):
            s, e = runs[2 * i], runs[2 * i + 1]
            while j < n_above and above[2 * j + 1] + grow <= s:
                j += 1
            label = 0
            jj = j
            while jj < n_above and above[2 * jj] < e + grow:
                q = prov[y - 1, above[2 * jj]]
                if label == 0:
                    label = q
                elif label != q:
                    label = _union(parent, label, q)
                jj += 1
            if label == 0:
                n = _new_label(parent, acc, acc32, n, off)
                label = n
            for xx in range(x, s):
                cur[xx] = 0
            term, mag, key = _value(vrow[s], bits)
            total = mag if floating else term
            lo = key
            hi = key
            cur[s] = label
            for xx in range(s + 1, e):
                cur[xx] = label
                term, mag, key = _value(vrow[xx], bits)
                if floating:
                    total = max(total, mag)
                else:
                    total += term
                lo = min(lo, key)
                hi = max(hi, key)
            _add(acc, acc32, off + label, e - s, s, y, total, lo, hi, floating)
            x = e
        for xx in range(x, width):
            cur[xx] = 0
        runs, above = above, runs
        n_above = k
    return n


@compiled()
def _close(u, v, tau):
    """Whether values u and v (float64) join: equal (infinities too) or within tau."""
    return (u == v) | (abs(u - v) <= tau)


@compiled()
def _tau_bits(fg, f, fp, up, has_up, eight, tau, m):
    """m[x]: 1 foreground, 2 joins left, 4 joins up, 8 joins up-left, 16 joins up-right."""
    width = fg.shape[0]
    m[0] = fg[0]
    for x in range(1, width):
        m[x] = np.uint8(fg[x]) | (np.uint8(fg[x] & fg[x - 1] & _close(f[x], f[x - 1], tau)) << 1)
    if not has_up:
        return
    for x in range(width):
        m[x] |= np.uint8(fg[x] & (up[x] != 0) & _close(f[x], fp[x], tau)) << 2
    if eight:
        for x in range(1, width):
            m[x] |= np.uint8(fg[x] & (up[x - 1] != 0) & _close(f[x], fp[x - 1], tau)) << 3
        for x in range(width - 1):
            m[x] |= np.uint8(fg[x] & (up[x + 1] != 0) & _close(f[x], fp[x + 1], tau)) << 4


@compiled()
def _tau_row(m, up, cur, parent, acc, acc32, n, off):
    """A tau row: join every neighbour m says joins (joins is not transitive)."""
    for x in range(m.shape[0]):
        k = m[x]
        if k == 0:
            cur[x] = 0
            continue
        label = cur[x - 1] if k & 2 else 0
        if k & 4:
            q = up[x]
            if label == 0:
                label = q
            elif label != q:
                label = _union(parent, label, q)
        if k & 8:
            q = up[x - 1]
            if label == 0:
                label = q
            elif label != q:
                label = _union(parent, label, q)
        if k & 16:
            q = up[x + 1]
            if label == 0:
                label = q
            elif label != q:
                label = _union(parent, label, q)
        if label == 0:
            n = _new_label(parent, acc, acc32, n, off)
            label = n
        cur[x] = label
    return n


@compiled()
def _tau_strip(
    image,
    values,
    prov,
    parent,
    acc,
    acc32,
    r0,
    r1,
    off,
    eight,
    rule,
    a,
    tau,
    fg,
    m,
    f,
    fp,
):
    """Tau first pass over rows r0..r1-1 (as _binary_strip)."""
    n = r0 * image.shape[1]
    bits = np.empty(1, np.float64)
    for y in range(r0, r1):
        row = image[y]
        _foreground_row(row, rule, a, fg)
        for x in range(row.shape[0]):
            f[x] = np.float64(row[x])
        up = prov[y - 1] if y > r0 else prov[y]
        _tau_bits(fg, f, fp, up, y > r0, eight, tau, m)
        n = _tau_row(m, up, prov[y], parent, acc, acc32, n, off)
        _runs(m, prov[y], values[y], y, acc, acc32, off, bits)
        f, fp = fp, f
    return n


@compiled()
def _flatten(par, acc, acc32, base, last, at, floating):
    """A strip's labels base+1..last flattened to local ids 1..m (par[label] =
    local id), their records summed into records at + (local id - 1); returns m."""
    m = 0
    for label in range(base + 1, last + 1):
        p = par[label]
        j = at + label - base - 1
        if p < label:
            local = par[p]
            par[label] = local
            _merge(acc, acc32, at + local - 1, acc, acc32, j, floating)
        else:
            # no label merged into local id m yet: its record is a copy
            m += 1
            par[label] = m
            if at + m - 1 != j:
                for k in range(RECORD):  # not acc[i] = acc[j]: that costs seconds to compile
                    acc[at + m - 1, k] = acc[j, k]
    return m


@compiled()
def label_binary(
    images,
    values,
    prov,
    parent,
    tasks,
    acc_first,
    acc,
    acc32,
    local_counts,
    lasts,
    eight,
    rule,
    a,
    lo,
    hi,
):
    """Binary first pass of tasks lo..hi-1, then each task's labels flattened to
    local ids 1..m (parent[label] = local id), its records summed into records
    acc_first[t] + (local id - 1), local_counts[t] = m and lasts[t] = its last
    label. acc_first[t]: the first record of task t (it has one per label it may make)."""
    floating = float_values(values)
    width = images.shape[2]
    fg = np.empty(width, np.bool_)
    runs = np.empty(2 * width + 2, np.int64)
    above = np.empty(2 * width + 2, np.int64)
    for t in range(lo, hi):
        n, r0, r1 = tasks[t, 0], tasks[t, 1], tasks[t, 2]
        base = r0 * width
        off = acc_first[t] - base - 1
        last = _binary_strip(
            images[n], values[n], prov[n], parent[n], acc, acc32, r0, r1, off, eight, rule, a,
            fg, runs, above,
        )  # fmt: skip
        local_counts[t] = _flatten(parent[n], acc, acc32, base, last, acc_first[t], floating)
        lasts[t] = last


@compiled()
def label_tau(
    images, values, prov, parent, tasks, acc_first, acc, acc32, local_counts, lasts, eight, rule,
    a, tau, lo, hi,
):  # fmt: skip
    """label_binary in tau mode: neighbours join when their values are within tau."""
    floating = float_values(values)
    width = images.shape[2]
    fg = np.empty(width, np.bool_)
    m = np.empty(width, np.uint8)
    f = np.empty(width, np.float64)
    fp = np.empty(width, np.float64)
    for t in range(lo, hi):
        n, r0, r1 = tasks[t, 0], tasks[t, 1], tasks[t, 2]
        base = r0 * width
        off = acc_first[t] - base - 1
        last = _tau_strip(
            images[n], values[n], prov[n], parent[n], acc, acc32, r0, r1, off, eight, rule, a,
            tau, fg, m, f, fp,
        )  # fmt: skip
        local_counts[t] = _flatten(parent[n], acc, acc32, base, last, acc_first[t], floating)
        lasts[t] = last


@compiled()
def _find(forest, i):
    while forest[i] < i:
        i = forest[i]
    return i


@compiled()
def _join(forest, g, h):
    """Join the sets of g and h in the seam forest, the smaller root the root."""
    rg = _find(forest, g)
    rh = _find(forest, h)
    if rg < rh:
        forest[rh] = rg
    elif rh < rg:
        forest[rg] = rh


@compiled()
def _number(forest, first, t_lo, t_hi):
    """Flatten the forest over the slots of tasks t_lo..t_hi-1: components 1..K
    in raster order (0 at the background slots); returns K."""
    k = 0
    for t in range(t_lo, t_hi):
        forest[first[t]] = 0
        for i in range(first[t] + 1, first[t + 1]):
            f = forest[i]
            if f < i:
                forest[i] = forest[f]
            else:
                k += 1
                forest[i] = k
    return k


@compiled()
def merge_seams(prov, parent, tasks, first, image_tasks, forest, counts, eight, lo, hi):
    """Per image lo..hi-1: join local components across strip seams, then number the
    components 1..K in raster order: forest[first[t] + local id] = component
    (0 at the background slots first[t]); counts[n] = K. image_tasks[n] ..
    image_tasks[n + 1]: the tasks of image n, top to bottom."""
    width = prov.shape[2]
    for n in range(lo, hi):
        labels, par = prov[n], parent[n]
        t_lo, t_hi = image_tasks[n], image_tasks[n + 1]
        for t in range(t_lo + 1, t_hi):
            y = tasks[t, 1]
            here, above = first[t], first[t - 1]
            for x in range(width):
                p = labels[y, x]
                if p == 0:
                    continue
                xlo = x - 1 if eight and x > 0 else x
                xhi = x + 1 if eight and x + 1 < width else x
                for xn in range(xlo, xhi + 1):
                    q = labels[y - 1, xn]
                    if q != 0:
                        _join(forest, here + par[p], above + par[q])
        counts[n] = _number(forest, first, t_lo, t_hi)


@compiled()
def merge_seams_tau(
    images, prov, parent, tasks, first, image_tasks, forest, counts, eight, tau, lo, hi
):
    """merge_seams in tau mode: neighbours across a seam join when within tau."""
    width = prov.shape[2]
    for n in range(lo, hi):
        image, labels, par = images[n], prov[n], parent[n]
        t_lo, t_hi = image_tasks[n], image_tasks[n + 1]
        for t in range(t_lo + 1, t_hi):
            y = tasks[t, 1]
            here, above = first[t], first[t - 1]
            for x in range(width):
                p = labels[y, x]
                if p == 0:
                    continue
                v = np.float64(image[y, x])
                xlo = x - 1 if eight and x > 0 else x
                xhi = x + 1 if eight and x + 1 < width else x
                for xn in range(xlo, xhi + 1):
                    q = labels[y - 1, xn]
                    if q != 0 and _close(v, np.float64(image[y - 1, xn]), tau):
                        _join(forest, here + par[p], above + par[q])
        counts[n] = _number(forest, first, t_lo, t_hi)


@compiled()
def reduce_stats(
    acc,
    acc32,
    acc_first,
    first,
    tasks,
    image_tasks,
    forest,
    component_first,
    stats,
    stats32,
    floating,
    lo,
    hi,
):
    """Records of each image's (lo..hi-1) components (stats[component_first[n] + k - 1]) from
    its local records. merge_seams numbers the components in slot order, so a
    component's first slot is met when it is one past the last one met: that
    record is copied, the later ones are added."""
    for n in range(lo, hi):
        c0 = component_first[n] - 1
        met = 0
        for t in range(image_tasks[n], image_tasks[n + 1]):
            for local in range(1, first[t + 1] - first[t]):
                k = forest[first[t] + local]
                i = acc_first[t] + local - 1
                if k > met:
                    met = k
                    for field in range(RECORD):
                        stats[c0 + k, field] = acc[i, field]
                else:
                    _merge(stats, stats32, c0 + k, acc, acc32, i, floating)


@compiled()
def float_terms(values, prov, parent, tasks, first, shift, sums, lo, hi):
    """sums[first[t] + local id] = sum over its finite pixels of trunc(v * 2**shift[same]),
    for tasks lo..hi-1."""
    for t in range(lo, hi):
        n, r0, r1 = tasks[t, 0], tasks[t, 1], tasks[t, 2]
        vals, labels, par = values[n], prov[n], parent[n]
        off = first[t]
        for i in range(off, first[t + 1]):
            sums[i] = 0
        for y in range(r0, r1):
            for x in range(vals.shape[1]):
                p = labels[y, x]
                if p == 0:
                    continue
                fv = np.float64(vals[y, x])
                if math.isinf(fv):
                    continue
                i = off + par[p]
                sums[i] += np.int64(math.trunc(math.ldexp(fv, shift[i])))


@compiled()
def write_labels(
    prov, parent, tasks, first, forest, component_first, kept_id, lasts, out, chosen, lo, hi
):
    """out[n] = the final label of each pixel (0 for background and for components
    min-area dropped), over tasks lo..hi-1 of the images with chosen[n].

    Each of the task's labels first gets its final label in place of its local
    id (parent[label]: parent[0] stays 0, the background), so that a pixel
    costs one lookup. Every task is written by one call only: the mapping is
    not applied twice."""
    for t in range(lo, hi):
        n, r0, r1 = tasks[t, 0], tasks[t, 1], tasks[t, 2]
        if not chosen[n]:
            continue
        labels, par, target = prov[n], parent[n], out[n]
        width = labels.shape[1]
        off = first[t]
        c0 = component_first[n] - 1
        for label in range(r0 * width + 1, lasts[t] + 1):
            par[label] = kept_id[c0 + forest[off + par[label]]]
        for y in range(r0, r1):
            row, dst = labels[y], target[y]
            for x in range(width):
                dst[x] = par[row[x]]


@compiled()
def keep_components(stats, component_first, min_area, kept_id, kept, lo, hi):
    """kept_id[c] = the new label of component c (0 if its area is below
    min_area), numbered 1.. per image; kept[n] = image n's kept components (images lo..hi-1)."""
    for n in range(lo, hi):
        k = 0
        for c in range(component_first[n], component_first[n + 1]):
            if stats[c, 0] >= min_area:
                k += 1
                kept_id[c] = k
            else:
                kept_id[c] = 0
        kept[n] = k


@compiled()
def kept_columns(
    stats, stats32, component_first, kept_id, kept_first, floating, mean, ints, floats, lo, hi
):
    """The statistics columns of the kept components of images lo..hi-1, from
    kept_first[n]: ints = area, x, y, width, height; floats = centroid x and y,
    mean, min, max. `mean` holds float images' means (integer means are made here)."""
    bits = np.empty(1, np.int64)
    for n in range(lo, hi):
        row = kept_first[n] - 1
        for c in range(component_first[n], component_first[n + 1]):
            if kept_id[c] == 0:
                continue
            r = row + kept_id[c]
            area = stats[c, 0]
            ints[0, r] = area
            ints[1, r] = stats32[c, 12]
            ints[2, r] = stats32[c, 14]
            ints[3, r] = stats32[c, 13] - stats32[c, 12] + 1
            ints[4, r] = stats32[c, 15] - stats32[c, 14] + 1
            floats[0, r] = np.float64(stats[c, 1]) / np.float64(area)
            floats[1, r] = np.float64(stats[c, 2]) / np.float64(area)
            if floating:
                floats[2, r] = mean[c]
                bits[0] = order_key(stats[c, 4])
                floats[3, r] = bits.view(np.float64)[0]
                bits[0] = order_key(stats[c, 5])
                floats[4, r] = bits.view(np.float64)[0]
            else:
                floats[2, r] = np.float64(stats[c, 3]) / np.float64(area)
                floats[3, r] = np.float64(stats[c, 4])
                floats[4, r] = np.float64(stats[c, 5])
