/* The CPython binding of the CPU engines: the extension module ccl_cli.native.gccl_cpu.
 *
 * `Batch` is engine.h's gccl_batch and `Volumes` volume.h's gccl_volumes as Python
 * objects. Their scalar fields are attributes of their C types (int64, float64), all given
 * when one is made. Their array fields take objects with the buffer protocol (numpy
 * arrays): C-contiguous, writable where the engine writes, with items of the element
 * type's size; the object keeps each one alive (and its memory in place) while it points
 * at it. Every field is listed once, in BATCH_FIELDS and VOLUME_FIELDS, and the compiler
 * checks each list against its struct: each name, each type, and that the fields listed
 * fill the whole struct, so a field added to or changed in a header does not build until
 * it is bound here. The entry points run on the engine's threads (pool.c) with the GIL
 * released; while one runs, the object's fields cannot be changed. Called on the main
 * thread, an entry point takes the GIL back every POLL_NS (pool.c) to run Python's signal
 * handlers: Ctrl-C stops it within a fraction of a second (KeyboardInterrupt).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "chunk_tables.h"
#include "engine.h"
#include "outline_binding.h"
#include "pool.h"
#include "volume.h"

/* A struct's fields in order: INTEGER (int64_t), REAL (double), arrays the engine reads
 * (IN, `const T *`) and writes (OUT, `T *`) of element type T, and arrays of any pixel type
 * (IN_ANY `const void *`, OUT_ANY `void *`). The fields of the gccl_rules both structs embed
 * as `rules` (RULE_FIELDS) keep their own names in Python: INTEGER_AT and REAL_AT take the
 * member (path) and the name. */
#define RULE_FIELDS(INTEGER_AT, REAL_AT)                                                       \
    INTEGER_AT(rules.rule, rule) INTEGER_AT(rules.tau_mode, tau_mode)                         \
    REAL_AT(rules.rule_value, rule_value) REAL_AT(rules.tau, tau)                             \
    REAL_AT(rules.relative, relative) REAL_AT(rules.quadratic, quadratic)

#define BATCH_FIELDS(INTEGER, REAL, IN, OUT, IN_ANY, OUT_ANY)                                  \
    INTEGER(count) INTEGER(height) INTEGER(width) INTEGER(image_type) INTEGER(value_type)      \
    INTEGER(connectivity) INTEGER(floating) INTEGER(min_area) INTEGER(label_bytes)            \
    RULE_FIELDS(INTEGER##_AT, REAL##_AT) IN_ANY(image) IN_ANY(values) IN(reaches, int32_t) OUT(prov, int32_t) OUT(parent, int32_t)               \
    IN(tasks, int64_t) IN(acc_first, int64_t) OUT(acc, gccl_record)                           \
    OUT(local_counts, int64_t) OUT(lasts, int64_t) IN(first, int64_t)                         \
    IN(image_tasks, int64_t) OUT(forest, int64_t) OUT(components, int64_t)                    \
    IN(component_first, int64_t) OUT(stats, gccl_record) IN(shift, int64_t)                   \
    OUT(sums, int64_t) OUT(kept_id, int64_t) OUT(kept, int64_t) IN(kept_first, int64_t)       \
    IN(mean, double) OUT(ints, int64_t) OUT(floats, double) OUT_ANY(labels)                   \
    IN(chosen, uint8_t)

#define VOLUME_FIELDS(INTEGER, REAL, IN, OUT, IN_ANY, OUT_ANY)                                 \
    INTEGER(count) INTEGER(depth) INTEGER(height) INTEGER(width) INTEGER(image_type)          \
    INTEGER(value_type) INTEGER(connectivity) INTEGER(floating) INTEGER(min_area)             \
    INTEGER(statistics) INTEGER(selecting) INTEGER(zeroed) RULE_FIELDS(INTEGER##_AT, REAL##_AT) \
    IN_ANY(image) IN_ANY(values) OUT(labels, uint32_t) IN(tasks, int64_t) OUT(slabs, gccl_slab)             \
    OUT(local_counts, int64_t) IN(first, int64_t) IN(volume_tasks, int64_t)                   \
    OUT(forest, int64_t) OUT(components, int64_t) OUT(components_before, int64_t)             \
    IN(component_first, int64_t) OUT(component_area, int64_t)                                 \
    OUT(component_magnitude, int64_t) OUT(kept_id, int64_t) OUT(kept, int64_t)                \
    IN(shift, int64_t) IN(kept_first, int64_t) OUT(records, gccl_volume_record)               \
    OUT(kept_slot, int64_t) OUT(ints, int64_t) OUT(floats, double) OUT(sums, int64_t)

/* The entry points, each a method of its object under its name (Python, C). */
#define BATCH_ENTRIES(ENTRY)                                                                   \
    ENTRY(label_strips, gccl_label_strips) ENTRY(merge_seams, gccl_merge_seams)                \
    ENTRY(reduce_stats, gccl_reduce_stats) ENTRY(pack_stats, gccl_pack_stats)                  \
    ENTRY(float_terms, gccl_float_terms)                                                       \
    ENTRY(keep_components, gccl_keep_components) ENTRY(kept_columns, gccl_kept_columns)        \
    ENTRY(write_labels, gccl_write_labels)

#define VOLUME_ENTRIES(ENTRY)                                                                  \
    ENTRY(label_slabs, gccl_volume_label_slabs) ENTRY(merge_seams, gccl_volume_merge_seams)    \
    ENTRY(keep, gccl_volume_keep) ENTRY(write, gccl_volume_write)                              \
    ENTRY(gather, gccl_volume_gather) ENTRY(columns, gccl_volume_columns)                      \
    ENTRY(free, gccl_volume_free)

#define NOTHING(...)
#define NOTHING_AT(...)
#define ONE(...) +1

enum kind { INTEGER_FIELD, REAL_FIELD, ARRAY_FIELD };

typedef struct {
    const char *name;
    size_t offset;
    enum kind kind;
    int slot;            /* arrays: the slot of its buffer (numbered as the module starts) */
    int writable;        /* arrays: the engine writes it */
    Py_ssize_t element;  /* arrays: bytes per element, 0 for any */
} field_info;

/* Checks and descriptions of the fields of struct STRUCT (defined around each use). */
#define FIELD(path) (((STRUCT *)0)->path)
#define CHECK_INTEGER_AT(path, name) \
    _Static_assert(_Generic(FIELD(path), int64_t: 1, default: 0), #name " is an int64_t");
#define CHECK_REAL_AT(path, name) \
    _Static_assert(_Generic(FIELD(path), double: 1, default: 0), #name " is a double");
#define CHECK_INTEGER(name) CHECK_INTEGER_AT(name, name)
#define CHECK_REAL(name) CHECK_REAL_AT(name, name)
#define CHECK_IN(name, type) \
    _Static_assert(_Generic(FIELD(name), const type *: 1, default: 0), #name " is const " #type "*");
#define CHECK_OUT(name, type) \
    _Static_assert(_Generic(FIELD(name), type *: 1, default: 0), #name " is " #type "*");
#define CHECK_IN_ANY(name) CHECK_IN(name, void)
#define CHECK_OUT_ANY(name) CHECK_OUT(name, void)
#define SIZE(name, ...) +sizeof(FIELD(name))
#define SIZE_AT(path, name) +sizeof(FIELD(path))
#define INFO_INTEGER_AT(path, name) {#name, offsetof(STRUCT, path), INTEGER_FIELD, -1, 0, 0},
#define INFO_REAL_AT(path, name) {#name, offsetof(STRUCT, path), REAL_FIELD, -1, 0, 0},
#define INFO_INTEGER(name) INFO_INTEGER_AT(name, name)
#define INFO_REAL(name) INFO_REAL_AT(name, name)
#define INFO_IN(name, type) {#name, offsetof(STRUCT, name), ARRAY_FIELD, -1, 0, sizeof(type)},
#define INFO_OUT(name, type) {#name, offsetof(STRUCT, name), ARRAY_FIELD, -1, 1, sizeof(type)},
#define INFO_IN_ANY(name) {#name, offsetof(STRUCT, name), ARRAY_FIELD, -1, 0, 0},
#define INFO_OUT_ANY(name) {#name, offsetof(STRUCT, name), ARRAY_FIELD, -1, 1, 0},
/* EXPAND(LIST, CHECKS): the six macros, expanded before LIST takes them. */
#define CHECKS CHECK_INTEGER, CHECK_REAL, CHECK_IN, CHECK_OUT, CHECK_IN_ANY, CHECK_OUT_ANY
#define INFOS INFO_INTEGER, INFO_REAL, INFO_IN, INFO_OUT, INFO_IN_ANY, INFO_OUT_ANY
#define EXPAND(list, ...) list(__VA_ARGS__)

#define STRUCT gccl_batch
EXPAND(BATCH_FIELDS, CHECKS)
_Static_assert(0 BATCH_FIELDS(SIZE, SIZE, SIZE, SIZE, SIZE, SIZE) == sizeof(gccl_batch),
               "BATCH_FIELDS lists every field of gccl_batch");
static field_info BATCH_INFO[] = {EXPAND(BATCH_FIELDS, INFOS)};
enum { BATCH_ARRAYS = 0 BATCH_FIELDS(NOTHING, NOTHING, ONE, ONE, ONE, ONE) };
#undef STRUCT

#define STRUCT gccl_volumes
EXPAND(VOLUME_FIELDS, CHECKS)
_Static_assert(0 VOLUME_FIELDS(SIZE, SIZE, SIZE, SIZE, SIZE, SIZE) == sizeof(gccl_volumes),
               "VOLUME_FIELDS lists every field of gccl_volumes");
static field_info VOLUME_INFO[] = {EXPAND(VOLUME_FIELDS, INFOS)};
enum { VOLUME_ARRAYS = 0 VOLUME_FIELDS(NOTHING, NOTHING, ONE, ONE, ONE, ONE) };
#undef STRUCT

#define COUNT(array) ((int)(sizeof array / sizeof array[0]))

/* What an object of either type holds: its struct and the views of the arrays it points at
 * (obj NULL where none), both inside the object. */
typedef struct {
    const char *type_name, *struct_name; /* for messages */
    field_info *fields;
    int count;
    size_t size; /* of the struct */
} layout;

typedef struct {
    PyObject_HEAD
    const layout *layout;
    void *data;       /* the struct */
    Py_buffer *views; /* one per array field, by slot */
    int busy;         /* entry points running on it */
} EngineObject;

typedef struct {
    EngineObject head;
    gccl_batch batch;
    Py_buffer views[BATCH_ARRAYS];
} BatchObject;

typedef struct {
    EngineObject head;
    gccl_volumes volumes;
    Py_buffer views[VOLUME_ARRAYS];
} VolumesObject;

static const layout BATCH_LAYOUT = {"Batch", "gccl_batch", BATCH_INFO, COUNT(BATCH_INFO),
                                    sizeof(gccl_batch)};
static const layout VOLUME_LAYOUT = {"Volumes", "gccl_volumes", VOLUME_INFO, COUNT(VOLUME_INFO),
                                     sizeof(gccl_volumes)};

/* Number the array fields' slots in order. */
static void number_slots(field_info *fields, int count) {
    int slot = 0;
    for (int i = 0; i < count; i++) {
        if (fields[i].kind == ARRAY_FIELD) fields[i].slot = slot++;
    }
}

static void *field_address(EngineObject *self, const field_info *field) {
    return (char *)self->data + field->offset;
}

static PyObject *get_field(PyObject *object, void *closure) {
    EngineObject *self = (EngineObject *)object;
    const field_info *field = closure;
    void *address = field_address(self, field);
    switch (field->kind) {
    case INTEGER_FIELD:
        return PyLong_FromLongLong(*(int64_t *)address);
    case REAL_FIELD:
        return PyFloat_FromDouble(*(double *)address);
    default: {
        PyObject *held = self->views[field->slot].obj;
        return Py_NewRef(held ? held : Py_None);
    }
    }
}

/* Point an array field at `value` (None: at nothing), keeping `value` alive. */
static int set_array(EngineObject *self, const field_info *field, PyObject *value) {
    Py_buffer view = {0};
    if (value != Py_None) {
        int flags = PyBUF_C_CONTIGUOUS | (field->writable ? PyBUF_WRITABLE : 0);
        if (PyObject_GetBuffer(value, &view, flags) != 0) return -1;
        Py_ssize_t item = field->element > 8 ? 8 : field->element;
        if (field->element && (view.itemsize != item || view.len % field->element != 0)) {
            PyErr_Format(PyExc_ValueError,
                         "%s.%s: items of %zd bytes in whole elements of %zd bytes, "
                         "got %zd-byte items, %zd bytes",
                         self->layout->type_name, field->name, item, field->element,
                         view.itemsize, view.len);
            PyBuffer_Release(&view);
            return -1;
        }
    }
    Py_buffer *held = &self->views[field->slot];
    if (held->obj) PyBuffer_Release(held);
    *held = view;
    *(void **)field_address(self, field) = view.obj ? view.buf : NULL;
    return 0;
}

static int set_field(PyObject *object, PyObject *value, void *closure) {
    EngineObject *self = (EngineObject *)object;
    const field_info *field = closure;
    if (value == NULL) {
        PyErr_Format(PyExc_AttributeError, "%s.%s cannot be deleted", self->layout->type_name,
                     field->name);
        return -1;
    }
    if (self->busy) {
        PyErr_Format(PyExc_RuntimeError, "%s.%s: it is being labeled", self->layout->type_name,
                     field->name);
        return -1;
    }
    void *address = field_address(self, field);
    if (field->kind == INTEGER_FIELD) {
        long long v = PyLong_AsLongLong(value);
        if (v == -1 && PyErr_Occurred()) return -1;
        *(int64_t *)address = v;
        return 0;
    }
    if (field->kind == REAL_FIELD) {
        double v = PyFloat_AsDouble(value);
        if (v == -1.0 && PyErr_Occurred()) return -1;
        *(double *)address = v;
        return 0;
    }
    return set_array(self, field, value);
}

static void release_views(EngineObject *self) {
    for (int i = 0; i < self->layout->count; i++) {
        const field_info *field = &self->layout->fields[i];
        if (field->kind == ARRAY_FIELD && self->views[field->slot].obj)
            PyBuffer_Release(&self->views[field->slot]);
    }
}

/* Batch(**fields) or Volumes(**fields): every scalar field, and any array fields, by name. */
static int engine_init(PyObject *object, PyObject *args, PyObject *kwargs) {
    EngineObject *self = (EngineObject *)object;
    const layout *layout = self->layout;
    if (PyTuple_GET_SIZE(args) != 0) {
        PyErr_Format(PyExc_TypeError, "%s() takes its fields by name only", layout->type_name);
        return -1;
    }
    if (self->busy) {
        PyErr_Format(PyExc_RuntimeError, "%s(): it is being labeled", layout->type_name);
        return -1;
    }
    release_views(self);
    memset(self->data, 0, layout->size);
    Py_ssize_t used = 0;
    for (int i = 0; i < layout->count; i++) {
        const field_info *field = &layout->fields[i];
        PyObject *value = kwargs ? PyDict_GetItemString(kwargs, field->name) : NULL;
        if (value == NULL) {
            if (field->kind == ARRAY_FIELD) continue;
            PyErr_Format(PyExc_TypeError, "%s() needs the field %s", layout->type_name,
                         field->name);
            return -1;
        }
        used++;
        if (set_field(object, value, (void *)field) != 0) return -1;
    }
    if (kwargs && PyDict_GET_SIZE(kwargs) != used) {
        PyErr_Format(PyExc_TypeError, "%s() got a name that is no field of %s", layout->type_name,
                     layout->struct_name);
        return -1;
    }
    return 0;
}

static void engine_dealloc(PyObject *object) {
    release_views((EngineObject *)object);
    Py_TYPE(object)->tp_free(object);
}

static PyObject *batch_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    (void)args, (void)kwargs;
    BatchObject *self = (BatchObject *)type->tp_alloc(type, 0); /* zeroed */
    if (self) {
        self->head.layout = &BATCH_LAYOUT;
        self->head.data = &self->batch;
        self->head.views = self->views;
    }
    return (PyObject *)self;
}

static PyObject *volumes_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    (void)args, (void)kwargs;
    VolumesObject *self = (VolumesObject *)type->tp_alloc(type, 0); /* zeroed */
    if (self) {
        self->head.layout = &VOLUME_LAYOUT;
        self->head.data = &self->volumes;
        self->head.views = self->views;
    }
    return (PyObject *)self;
}

/* The thread state the calling thread saved as it let go of the GIL for an entry point
 * (poll_signals takes the GIL back with it), and the main thread's id (Python runs its
 * signal handlers there only). */
static _Thread_local PyThreadState *released;
static unsigned long main_thread;

/* gccl_poll on the main thread: Python's signal handlers run (with the GIL, for a moment);
 * nonzero where one raised (Ctrl-C's KeyboardInterrupt), which stays set for the caller. */
static int poll_signals(void) {
    PyEval_RestoreThread(released);
    const int raised = PyErr_CheckSignals() != 0;
    released = PyEval_SaveThread();
    return raised;
}

/* entry(data, lo, hi) over items 0..items-1 in `parts` parts on the engine's threads; on
 * the main thread a signal whose handler raises (Ctrl-C) stops it and is raised. */
static PyObject *run_entry(EngineObject *self, gccl_entry entry, PyObject *const *args,
                           Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "an entry point takes (items, parts)");
        return NULL;
    }
    long long items = PyLong_AsLongLong(args[0]);
    if (items == -1 && PyErr_Occurred()) return NULL;
    long long parts = PyLong_AsLongLong(args[1]);
    if (parts == -1 && PyErr_Occurred()) return NULL;
    const gccl_poll poll = PyThread_get_thread_ident() == main_thread ? poll_signals : NULL;
    self->busy++;
    released = PyEval_SaveThread();
    const int code = gccl_spread(entry, self->data, items, parts, poll);
    PyEval_RestoreThread(released);
    released = NULL;
    self->busy--;
    if (PyErr_Occurred()) return NULL; /* a signal's handler raised */
    if (code == GCCL_STOPPED) {
        PyErr_SetString(PyExc_KeyboardInterrupt, "the CPU engine was stopped");
        return NULL;
    }
    if (code != 0) {
        PyErr_SetString(PyExc_MemoryError, "the CPU engine ran out of memory");
        return NULL;
    }
    Py_RETURN_NONE;
}

/* Each entry point as the pool calls it (its struct as `const void *`), and as a method. */
#define ENTRY_METHOD(name, function)                                                          \
    static int call_##function(const void *data, int64_t lo, int64_t hi) {                    \
        return function(data, lo, hi);                                                        \
    }                                                                                         \
    static PyObject *method_##function(PyObject *self, PyObject *const *args,                 \
                                       Py_ssize_t nargs) {                                    \
        return run_entry((EngineObject *)self, call_##function, args, nargs);                 \
    }
BATCH_ENTRIES(ENTRY_METHOD)
VOLUME_ENTRIES(ENTRY_METHOD)

#define ENTRY_DEF(name, function)                                                             \
    {#name, (PyCFunction)(void (*)(void))method_##function, METH_FASTCALL,                    \
     #function "(data, lo, hi) over (items, parts) on the engine's threads; "                 \
     "MemoryError when the engine ran out of memory."},
static PyMethodDef batch_methods[] = {BATCH_ENTRIES(ENTRY_DEF){NULL, NULL, 0, NULL}};
static PyMethodDef volume_methods[] = {VOLUME_ENTRIES(ENTRY_DEF){NULL, NULL, 0, NULL}};

static PyGetSetDef batch_getset[COUNT(BATCH_INFO) + 1];
static PyGetSetDef volume_getset[COUNT(VOLUME_INFO) + 1];

static PyTypeObject BatchType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ccl_cli.native.gccl_cpu.Batch",
    .tp_doc = PyDoc_STR("engine.h's gccl_batch: the shapes, parameters and arrays of one "
                        "labeling of images, and its entry points."),
    .tp_basicsize = sizeof(BatchObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = batch_new,
    .tp_init = engine_init,
    .tp_dealloc = engine_dealloc,
    .tp_methods = batch_methods,
    .tp_getset = batch_getset,
};

static PyTypeObject VolumesType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ccl_cli.native.gccl_cpu.Volumes",
    .tp_doc = PyDoc_STR("volume.h's gccl_volumes: the shapes, parameters and arrays of one "
                        "labeling of volumes, and its entry points."),
    .tp_basicsize = sizeof(VolumesObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = volumes_new,
    .tp_init = engine_init,
    .tp_dealloc = engine_dealloc,
    .tp_methods = volume_methods,
    .tp_getset = volume_getset,
};

/* A type's attributes, one per field, each with its field_info as closure. */
static void describe_fields(PyGetSetDef *getset, field_info *fields, int count) {
    number_slots(fields, count);
    for (int i = 0; i < count; i++) {
        getset[i] = (PyGetSetDef){fields[i].name, get_field, set_field, NULL, (void *)&fields[i]};
    }
}

static PyObject *run_helper(PyObject *module, PyObject *unused) {
    (void)module, (void)unused;
    Py_BEGIN_ALLOW_THREADS
    gccl_help();
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

/* The volume engine's kept blocks (volume.h): their bound, their release, their bytes. */
static PyObject *set_spare_limit(PyObject *module, PyObject *bytes) {
    (void)module;
    const long long limit = PyLong_AsLongLong(bytes);
    if (limit == -1 && PyErr_Occurred()) return NULL;
    gccl_set_spare_limit(limit);
    Py_RETURN_NONE;
}

static PyObject *release_spares(PyObject *module, PyObject *unused) {
    (void)module, (void)unused;
    gccl_release_spares();
    Py_RETURN_NONE;
}

static PyObject *spare_bytes(PyObject *module, PyObject *unused) {
    (void)module, (void)unused;
    return PyLong_FromLongLong(gccl_spare_bytes());
}

static PyMethodDef module_methods[] = {
    {"run_helper", run_helper, METH_NOARGS,
     "Be one of the engine's helper threads: run parts of its jobs; never returns."},
    {"set_spare_limit", set_spare_limit, METH_O,
     "Keep at most this many bytes of the volume engine's slab memory between calls."},
    {"release_spares", release_spares, METH_NOARGS,
     "Free the slab memory the volume engine keeps between calls."},
    {"spare_bytes", spare_bytes, METH_NOARGS,
     "The bytes of slab memory the volume engine keeps now."},
    GCCL_OUTLINE_METHODS GCCL_CHUNK_TABLE_METHODS{NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "ccl_cli.native.gccl_cpu",
    .m_doc = PyDoc_STR("gccl's CPU labeling engine (engine.h, volume.h)."),
    .m_size = -1,
    .m_methods = module_methods,
};

/* module.`attribute` = {name: value} of engine.h's constants; 0, or -1 with an error set. */
static int add_constants(PyObject *module, const char *attribute, const char *const *names,
                         const long *values, int count) {
    PyObject *dict = PyDict_New();
    for (int i = 0; dict && i < count; i++) {
        PyObject *value = PyLong_FromLong(values[i]);
        if (!value || PyDict_SetItemString(dict, names[i], value) != 0) Py_CLEAR(dict);
        Py_XDECREF(value);
    }
    int code = dict ? PyModule_AddObjectRef(module, attribute, dict) : -1;
    Py_XDECREF(dict);
    return code;
}

PyMODINIT_FUNC PyInit_gccl_cpu(void) {
    PyObject *threading = PyImport_ImportModule("threading");
    PyObject *main = threading ? PyObject_CallMethod(threading, "main_thread", NULL) : NULL;
    PyObject *ident = main ? PyObject_GetAttrString(main, "ident") : NULL;
    Py_XDECREF(threading);
    Py_XDECREF(main);
    if (!ident) return NULL;
    main_thread = PyLong_AsUnsignedLong(ident);
    Py_DECREF(ident);
    if (PyErr_Occurred()) return NULL;
    describe_fields(batch_getset, BATCH_INFO, COUNT(BATCH_INFO));
    describe_fields(volume_getset, VOLUME_INFO, COUNT(VOLUME_INFO));
    if (PyType_Ready(&BatchType) != 0 || PyType_Ready(&VolumesType) != 0) return NULL;
    PyObject *module = PyModule_Create(&module_def);
    if (!module) return NULL;
#define NUMPY_NAME(arg, suffix, name, type, numpy) numpy,
#define TYPE_VALUE(arg, suffix, name, ...) name,
    static const char *const type_names[] = {GCCL_PIXEL_TYPES(NUMPY_NAME, )};
    static const long type_values[] = {GCCL_PIXEL_TYPES(TYPE_VALUE, )};
    _Static_assert(sizeof type_values / sizeof type_values[0] == GCCL_TYPES,
                   "every pixel type is named");
    static const char *const rule_names[] = {"all", "not", "above", "below"};
    static const long rule_values[] = {GCCL_FG_ALL, GCCL_FG_NOT, GCCL_FG_ABOVE, GCCL_FG_BELOW};
    /* the int64 fields of a record, as columns of the int64 rows labels.py reads */
    static const char *const column_names[] = {"area", "sum_x", "sum_y", "total", "lo", "hi"};
    static const long column_values[] = {
        offsetof(gccl_record, area) / 8, offsetof(gccl_record, sum_x) / 8,
        offsetof(gccl_record, sum_y) / 8, offsetof(gccl_record, total) / 8,
        offsetof(gccl_record, lo) / 8,   offsetof(gccl_record, hi) / 8};
    _Static_assert(sizeof(gccl_record) % 8 == 0, "a record is whole int64 columns");
    if (PyModule_AddObjectRef(module, "Batch", (PyObject *)&BatchType) != 0 ||
        PyModule_AddObjectRef(module, "Volumes", (PyObject *)&VolumesType) != 0 ||
        PyModule_AddIntConstant(module, "SLAB_WORDS", GCCL_SLAB_WORDS) != 0 ||
        PyModule_AddIntConstant(module, "VOLUME_RECORD_BYTES", (long)sizeof(gccl_volume_record)) !=
            0 ||
        add_constants(module, "PIXEL_TYPES", type_names, type_values, GCCL_TYPES) != 0 ||
        add_constants(module, "FOREGROUND_RULES", rule_names, rule_values, 4) != 0 ||
        add_constants(module, "RECORD_COLUMNS", column_names, column_values, 6) != 0 ||
        PyModule_AddIntConstant(module, "RECORD_BYTES", (long)sizeof(gccl_record)) != 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
