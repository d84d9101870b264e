/* Arrays the CPython functions take: objects with the buffer protocol (numpy arrays). */
#ifndef GCCL_BUFFERS_H
#define GCCL_BUFFERS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* A C-contiguous buffer (writable if asked) of items of `size` bytes, and of `items` of them
 * unless `items` is negative; 0, or -1 with a ValueError naming `name`. */
static inline int gccl_get_items(PyObject *object, Py_buffer *view, int writable, Py_ssize_t size,
                                 int64_t items, const char *name) {
    int flags = PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(object, view, flags) != 0) return -1;
    if (view->itemsize == size && (items < 0 || view->len == (Py_ssize_t)items * size)) return 0;
    if (items < 0)
        PyErr_Format(PyExc_ValueError, "%s: items of %zd bytes expected", name, size);
    else
        PyErr_Format(PyExc_ValueError, "%s: %lld items of %zd bytes expected", name,
                     (long long)items, size);
    PyBuffer_Release(view);
    return -1;
}

#endif
