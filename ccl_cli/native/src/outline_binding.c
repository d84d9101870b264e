/* The CPython functions of outline.h: trace_outlines and geojson_piece (methods of the module
 * gccl_cpu, outline_binding.h). Arrays come as objects with the buffer protocol (numpy
 * arrays), C-contiguous, with items of the size each argument says; the engine's work runs
 * with the GIL released while the buffers are held. */
#include "outline_binding.h"

#include <stdint.h>
#include <string.h>

#include "buffers.h"
#include "outline.h"

static void release_all(Py_buffer *views, int count) {
    for (int i = 0; i < count; i++)
        if (views[i].obj) PyBuffer_Release(&views[i]);
}

/* trace_outlines(labels, count, areas, feature_offsets, allocate): the outlines of the
 * (height, width) uint16 or uint32 label image `labels` with labels 0..count. Fills the
 * int64 arrays areas (count) and feature_offsets (count + 1), then calls
 * allocate(vertices, rings, parts) for the int32 (vertices, 2) array and the int64 arrays
 * of rings + 1 and parts + 1 it fills. ValueError for a label above count. */
PyObject *gccl_py_trace_outlines(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError,
                        "trace_outlines(labels, count, areas, feature_offsets, allocate)");
        return NULL;
    }
    long long count = PyLong_AsLongLong(args[1]);
    if (count == -1 && PyErr_Occurred()) return NULL;
    if (count < 0 || count > UINT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "trace_outlines: count out of range");
        return NULL;
    }
    Py_buffer views[6] = {{0}}; /* labels, areas, features, vertices, rings, parts */
    PyObject *arrays = NULL, *result = NULL;
    gccl_outline o = {0};
    int code;
    if (PyObject_GetBuffer(args[0], &views[0], PyBUF_C_CONTIGUOUS) != 0) return NULL;
    if (views[0].ndim != 2 || (views[0].itemsize != 2 && views[0].itemsize != 4)) {
        PyErr_SetString(PyExc_ValueError, "trace_outlines: labels are (height, width) "
                                          "uint16 or uint32");
        goto done;
    }
    o.labels = views[0].buf;
    o.label_bytes = views[0].itemsize;
    o.height = views[0].shape[0];
    o.width = views[0].shape[1];
    o.count = count;
    if ((o.height + 2) * (o.width + 2) >= (int64_t)UINT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "trace_outlines: more than 2**32 pixels");
        goto done;
    }
    if (gccl_get_items(args[2], &views[1], 1, 8, count, "areas") != 0 ||
        gccl_get_items(args[3], &views[2], 1, 8, count + 1, "feature_offsets") != 0)
        goto done;
    o.areas = views[1].buf;
    o.feature_offsets = views[2].buf;
    Py_BEGIN_ALLOW_THREADS
    code = gccl_outline_count(&o);
    Py_END_ALLOW_THREADS
    if (code == GCCL_OUTLINE_NO_MEMORY) {
        PyErr_NoMemory();
        goto done;
    }
    if (code == GCCL_OUTLINE_BAD_LABEL) {
        PyErr_SetString(PyExc_ValueError, "trace_outlines: a label exceeds count");
        goto done;
    }
    arrays = PyObject_CallFunction(args[4], "LLL", (long long)o.vertex_count,
                                   (long long)o.ring_count, (long long)o.part_count);
    if (!arrays) goto done;
    if (!PyTuple_Check(arrays) || PyTuple_GET_SIZE(arrays) != 3) {
        PyErr_SetString(PyExc_TypeError, "trace_outlines: allocate returns three arrays");
        goto done;
    }
    if (gccl_get_items(PyTuple_GET_ITEM(arrays, 0), &views[3], 1, 4, 2 * o.vertex_count,
                       "vertices") != 0)
        goto done;
    o.vertices = views[3].buf;
    if (gccl_get_items(PyTuple_GET_ITEM(arrays, 1), &views[4], 1, 8, o.ring_count + 1,
                       "ring_offsets") != 0)
        goto done;
    o.ring_offsets = views[4].buf;
    if (gccl_get_items(PyTuple_GET_ITEM(arrays, 2), &views[5], 1, 8, o.part_count + 1,
                       "part_offsets") != 0)
        goto done;
    o.part_offsets = views[5].buf;
    Py_BEGIN_ALLOW_THREADS
    gccl_outline_write(&o);
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    gccl_outline_free(&o);
    release_all(views, 6);
    Py_XDECREF(arrays);
    return result;
}

/* geojson_piece(vertices, ring_offsets, part_offsets, feature_offsets, areas, cursor,
 * capacity) -> bytes: the next piece (at most `capacity` bytes) of the GeoJSON text of
 * Outlines' arrays (int32 vertices, int64 offsets and areas); cursor: 5 int64s, zeros at
 * the start, advanced here; b'' once the text is complete. */
PyObject *gccl_py_geojson_piece(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "geojson_piece(vertices, ring_offsets, part_offsets, "
                                         "feature_offsets, areas, cursor, capacity)");
        return NULL;
    }
    long long capacity = PyLong_AsLongLong(args[6]);
    if (capacity == -1 && PyErr_Occurred()) return NULL;
    if (capacity < GCCL_GEOJSON_MIN_PIECE || capacity > PY_SSIZE_T_MAX) {
        PyErr_Format(PyExc_ValueError, "geojson_piece: capacity below %d",
                     GCCL_GEOJSON_MIN_PIECE);
        return NULL;
    }
    Py_buffer views[6] = {{0}}; /* vertices, rings, parts, features, areas, cursor */
    PyObject *piece = NULL;
    gccl_geojson_cursor cursor;
    int64_t written;
    for (int i = 0; i < 5; i++) {
        if (PyObject_GetBuffer(args[i], &views[i], PyBUF_C_CONTIGUOUS) != 0) goto done;
        /* vertices: int32 pairs; the offsets at least one int64 each; areas int64 */
        if (views[i].itemsize != (i == 0 ? 4 : 8) || views[i].len % 8 != 0 ||
            (i >= 1 && i <= 3 && views[i].len == 0)) {
            PyErr_SetString(PyExc_ValueError, "geojson_piece: arrays of Outlines expected");
            goto done;
        }
    }
    if (gccl_get_items(args[5], &views[5], 1, 8, 5, "cursor") != 0) goto done;
    const int64_t features = views[4].len / 8;
    if (views[3].len / 8 != features + 1) {
        PyErr_SetString(PyExc_ValueError, "geojson_piece: feature_offsets and areas differ");
        goto done;
    }
    piece = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)capacity);
    if (!piece) goto done;
    memcpy(&cursor, views[5].buf, sizeof cursor);
    char *out = PyBytes_AS_STRING(piece);
    Py_BEGIN_ALLOW_THREADS
    written = gccl_geojson_piece(views[0].buf, views[0].len / 8, views[1].buf,
                                 views[1].len / 8 - 1, views[2].buf, views[2].len / 8 - 1,
                                 views[3].buf, views[4].buf, features, &cursor, out, capacity);
    Py_END_ALLOW_THREADS
    if (written < 0) {
        PyErr_SetString(PyExc_ValueError, "geojson_piece: offsets that are not Outlines'");
        Py_CLEAR(piece);
        goto done;
    }
    memcpy(views[5].buf, &cursor, sizeof cursor);
    _PyBytes_Resize(&piece, (Py_ssize_t)written); /* on failure: NULL with an error */
done:
    release_all(views, 6);
    return piece;
}
