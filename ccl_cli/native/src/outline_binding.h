/* The CPython functions of outline.h (outline_binding.c), as module methods of gccl_cpu. */
#ifndef GCCL_OUTLINE_BINDING_H
#define GCCL_OUTLINE_BINDING_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

PyObject *gccl_py_trace_outlines(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *gccl_py_geojson_piece(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

/* Entries of a PyMethodDef array. */
#define GCCL_OUTLINE_METHODS                                                                  \
    {"trace_outlines", (PyCFunction)(void (*)(void))gccl_py_trace_outlines, METH_FASTCALL,    \
     "trace_outlines(labels, count, areas, feature_offsets, allocate): the outlines of "      \
     "one label image (outline.h)."},                                                         \
        {"geojson_piece", (PyCFunction)(void (*)(void))gccl_py_geojson_piece, METH_FASTCALL, \
         "geojson_piece(vertices, ring_offsets, part_offsets, feature_offsets, areas, "       \
         "cursor, capacity) -> bytes: the GeoJSON text's next piece, b'' at its end."},

#endif
