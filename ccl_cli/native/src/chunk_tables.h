/* The CPython functions of a labeled chunk's tables (chunk_tables.c), as module methods of
 * gccl_cpu: where each label first appears, and labels mapped through a table. */
#ifndef GCCL_CHUNK_TABLES_H
#define GCCL_CHUNK_TABLES_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

PyObject *gccl_py_first_voxels(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *gccl_py_map_labels(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

/* Entries of a PyMethodDef array. */
#define GCCL_CHUNK_TABLE_METHODS                                                              \
    {"first_voxels", (PyCFunction)(void (*)(void))gccl_py_first_voxels, METH_FASTCALL,       \
     "first_voxels(labels, out): out[l - 1] = the flat index of label l's first voxel, for "  \
     "uint32 labels numbered 1..len(out) in raster order of their first voxels."},           \
        {"map_labels", (PyCFunction)(void (*)(void))gccl_py_map_labels, METH_FASTCALL,       \
         "map_labels(labels, table, out): out[i] = table[labels[i]] for uint32 labels; "      \
         "table and out of one dtype, uint16 or uint32."},

#endif
