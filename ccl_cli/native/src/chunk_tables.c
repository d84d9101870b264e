/* A labeled chunk's tables (chunk_tables.h): the flat index where each label first appears,
 * and labels mapped through a table. Arrays come as objects with the buffer protocol (numpy
 * arrays), C-contiguous; the loops run with the GIL released while the buffers are held. */
#include "chunk_tables.h"

#include <stdint.h>

#include "buffers.h"

/* Labels are numbered in raster order of their first voxels, so label l first appears where
 * the running maximum rises to l; a rise by more than one means they are not (-1 there). */
static int64_t scan_first(const uint32_t *labels, int64_t n, int64_t *out, int64_t count) {
    uint32_t top = 0;
    for (int64_t i = 0; i < n; i++) {
        const uint32_t label = labels[i];
        if (label > top) {
            if (label != top + 1 || (int64_t)label > count) return i;
            out[top] = i;
            top = label;
        }
    }
    return top == count ? -1 : n;
}

PyObject *gccl_py_first_voxels(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "first_voxels(labels, out)");
        return NULL;
    }
    Py_buffer labels = {0}, out = {0};
    if (gccl_get_items(args[0], &labels, 0, 4, -1, "first_voxels: labels (uint32)") != 0)
        return NULL;
    if (gccl_get_items(args[1], &out, 1, 8, -1, "first_voxels: out (int64)") != 0) {
        PyBuffer_Release(&labels);
        return NULL;
    }
    int64_t bad;
    const Py_ssize_t count = out.len / 8;
    Py_BEGIN_ALLOW_THREADS
    bad = scan_first(labels.buf, labels.len / 4, out.buf, count);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&labels);
    PyBuffer_Release(&out);
    if (bad >= 0) {
        PyErr_Format(PyExc_ValueError,
                     "first_voxels: labels are not 1..%zd in raster order of their first "
                     "voxels (at index %lld)",
                     count, (long long)bad);
        return NULL;
    }
    Py_RETURN_NONE;
}

/* out[i] = table[labels[i]]; the index of the first label past the table, or -1. */
#define MAP_LABELS(type)                                                                     \
    static int64_t map_##type(const uint32_t *labels, int64_t n, const type *table,          \
                              int64_t size, type *out) {                                     \
        for (int64_t i = 0; i < n; i++) {                                                    \
            if (labels[i] >= size) return i;                                                 \
            out[i] = table[labels[i]];                                                       \
        }                                                                                    \
        return -1;                                                                           \
    }
MAP_LABELS(uint16_t)
MAP_LABELS(uint32_t)

PyObject *gccl_py_map_labels(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "map_labels(labels, table, out)");
        return NULL;
    }
    Py_buffer labels = {0}, table = {0}, out = {0};
    if (gccl_get_items(args[0], &labels, 0, 4, -1, "map_labels: labels (uint32)") != 0)
        return NULL;
    if (PyObject_GetBuffer(args[1], &table, PyBUF_C_CONTIGUOUS) != 0) goto fail;
    if (table.itemsize != 2 && table.itemsize != 4) {
        PyErr_SetString(PyExc_ValueError, "map_labels: a uint16 or uint32 table");
        goto fail;
    }
    if (gccl_get_items(args[2], &out, 1, table.itemsize, -1,
                       "map_labels: out (the table's dtype)") != 0)
        goto fail;
    if (out.len / out.itemsize != labels.len / 4) {
        PyErr_SetString(PyExc_ValueError, "map_labels: out and labels differ in length");
        goto fail;
    }
    int64_t bad;
    const int64_t n = labels.len / 4, size = table.len / table.itemsize;
    Py_BEGIN_ALLOW_THREADS
    bad = table.itemsize == 2 ? map_uint16_t(labels.buf, n, table.buf, size, out.buf)
                              : map_uint32_t(labels.buf, n, table.buf, size, out.buf);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&labels);
    PyBuffer_Release(&table);
    PyBuffer_Release(&out);
    if (bad >= 0) {
        PyErr_Format(PyExc_ValueError, "map_labels: a label past the table (at index %lld)",
                     (long long)bad);
        return NULL;
    }
    Py_RETURN_NONE;
fail:
    if (labels.obj) PyBuffer_Release(&labels);
    if (table.obj) PyBuffer_Release(&table);
    if (out.obj) PyBuffer_Release(&out);
    return NULL;
}
