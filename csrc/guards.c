/* The guard program of dynacap._C: a cache entry's guards evaluated as a
 * flat list of checks, without Python bytecode.
 *
 * A program is built from data (dynacap/guards/program.py lowers a GuardSet):
 * `steps` say how to read each source (a local or global by key, a constant,
 * an attribute, an item, ...; each step reads from an earlier one), `checks`
 * say what must hold of a source (type or object identity, a constant's
 * value or bits, a length, dict keys, a tensor's metadata, torch's global
 * state). Sources are read once per call, on first use. Guards this file
 * cannot check run in one Python `fallback(L, G)` after the C checks.
 *
 * Semantics are those of the generated Python check (guards/check.py): the
 * program passes when every check holds; an exception while reading a
 * source or checking it is a failure, except one that is not an Exception
 * (KeyboardInterrupt, SystemExit), which propagates.
 *
 * What each check asserts, tensors included, is in guard_checks.c; the
 * structures are in guard_program.h.
 */
#include "guard_program.h"

#include <string.h>

/* ------------------------------------------------------------------------ */
/* Reading sources.                                                          */

/* d[key]; NULL without an exception for a missing key of a dict. The
 * lookup is cached in s for a key that is always the same (s->arg). */
static PyObject *
item_of(Step *s, PyObject *d, PyObject *key)
{
    if (PyDict_CheckExact(d)) {
        PyDictObject *mp = (PyDictObject *)d;
        if (s == NULL) {
            return Py_XNewRef(PyDict_GetItemWithError(d, key));
        }
        if (s->dict == d && s->version == mp->ma_version_tag) {
            return Py_NewRef(s->value);
        }
        PyObject *v = PyDict_GetItemWithError(d, key);
        if (v != NULL) {
            s->dict = d;
            s->version = mp->ma_version_tag;
            s->value = v;
        }
        return Py_XNewRef(v);
    }
    if (PyLong_CheckExact(key) && (PyList_CheckExact(d) || PyTuple_CheckExact(d))) {
        Py_ssize_t i = PyLong_AsSsize_t(key);
        Py_ssize_t n = PyList_CheckExact(d) ? PyList_GET_SIZE(d) : PyTuple_GET_SIZE(d);
        if (i >= 0 && i < n) {
            return Py_NewRef(PyList_CheckExact(d) ? PyList_GET_ITEM(d, i) : PyTuple_GET_ITEM(d, i));
        }
        PyErr_Clear(); /* an overflow; the generic read below says what happens */
    }
    return PyObject_GetItem(d, key);
}

/* dict.__getitem__(d, key): the dict's own storage (a subclass's
 * __missing__ still runs, as it would through dict.__getitem__). */
static PyObject *
dict_storage(PyObject *d, PyObject *key)
{
    if (!PyDict_Check(d)) {
        return NULL;
    }
    PyObject *v = PyDict_GetItemWithError(d, key);
    if (v != NULL || PyErr_Occurred() || PyDict_CheckExact(d)) {
        return Py_XNewRef(v);
    }
    PyObject *missing = PyObject_GetAttrString((PyObject *)&PyDict_Type, "__getitem__");
    if (missing == NULL) {
        return NULL;
    }
    v = PyObject_CallFunctionObjArgs(missing, d, key, NULL);
    Py_DECREF(missing);
    return v;
}

/* The value of step i (borrowed from regs), or NULL: the read failed, with
 * or without an exception set. Bases are earlier steps (checked when built). */
PyObject *
dc_read_source(GuardProgram *p, PyObject **regs, Py_ssize_t i, PyObject *L, PyObject *G)
{
    if (regs[i] != NULL) {
        return regs[i];
    }
    Step *s = &p->steps[i];
    PyObject *base = NULL, *v = NULL;
    if (s->base >= 0 && (base = dc_read_source(p, regs, s->base, L, G)) == NULL) {
        return NULL;
    }
    switch (s->op) {
    case SRC_LOCAL:
        v = item_of(s, L, s->arg);
        break;
    case SRC_GLOBAL:
        v = item_of(s, G, s->arg);
        break;
    case SRC_CONST:
        v = Py_NewRef(s->arg);
        break;
    case SRC_GLOBALS:
        v = Py_NewRef(G);
        break;
    case SRC_ATTR:
        v = PyObject_GetAttr(base, s->arg);
        break;
    case SRC_GENERIC_ATTR:
        v = PyObject_GenericGetAttr(base, s->arg);
        break;
    case SRC_ITEM:
        v = item_of(s, base, s->arg);
        break;
    case SRC_DICT_STORAGE:
        v = dict_storage(base, s->arg);
        break;
    case SRC_TYPE:
        v = Py_NewRef((PyObject *)Py_TYPE(base));
        break;
    case SRC_KEYED_ITEM: {
        PyObject *key = dc_read_source(p, regs, s->key, L, G);
        v = key == NULL ? NULL : item_of(NULL, base, key);
        break;
    }
    }
    regs[i] = v;
    return v;
}

/* 1: every check holds, 0: one fails (or raised an Exception, cleared),
 * -1: an exception that must propagate. */
static int
program_run(GuardProgram *p, PyObject *L, PyObject *G)
{
    if (p->steps == NULL && p->nsteps > 0) {
        return 0; /* cleared by the garbage collector */
    }
    PyObject **regs = p->scratch;
    if (p->running && (regs = PyMem_Calloc(p->nsteps ? p->nsteps : 1, sizeof(PyObject *))) == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    p->running++;
    int ok = 1;
    for (Py_ssize_t i = 0; i < p->nchecks && ok == 1; i++) {
        Check *c = &p->checks[i];
        PyObject *v = NULL;
        if (c->src >= 0 && (v = regs[c->src]) == NULL &&
            (v = dc_read_source(p, regs, c->src, L, G)) == NULL) {
            ok = PyErr_Occurred() ? -1 : 0;
            break;
        }
        if ((ok = dc_quick_check(c, v)) == NOT_QUICK) {
            ok = dc_run_check(p, c, v, regs, L, G);
        }
    }
    /* Registers go back empty; a decref may run arbitrary code (a finalizer). */
    for (Py_ssize_t i = 0; i < p->nsteps; i++) {
        PyObject *v = regs[i];
        if (v != NULL) {
            regs[i] = NULL;
            Py_DECREF(v);
        }
    }
    p->running--;
    if (regs != p->scratch) {
        PyMem_Free(regs);
    }
    if (ok == 1 && p->fallback != NULL && p->fallback != Py_None) {
        PyObject *args[2] = {L, G};
        ok = dc_truth_of(PyObject_Vectorcall(p->fallback, args, 2, NULL));
    }
    if (ok < 0) {
        if (!PyErr_Occurred() || PyErr_ExceptionMatches(PyExc_Exception)) {
            PyErr_Clear();
            return 0;
        }
        return -1;
    }
    return ok;
}

/* ------------------------------------------------------------------------ */
/* The type.                                                                  */

static PyObject *
program_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != 2 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0)) {
        PyErr_SetString(PyExc_TypeError, "a guard program takes (L, G)");
        return NULL;
    }
    int ok = program_run((GuardProgram *)self, args[0], args[1]);
    if (ok < 0) {
        return NULL;
    }
    return Py_NewRef(ok ? Py_True : Py_False);
}

static void
program_free_arrays(GuardProgram *p)
{
    if (p->checks != NULL) {
        for (Py_ssize_t i = 0; i < p->nchecks; i++) {
            PyMem_Free(p->checks[i].ints);
        }
    }
    PyMem_Free(p->checks);
    PyMem_Free(p->steps);
    PyMem_Free(p->scratch);
    p->checks = NULL;
    p->steps = NULL;
    p->scratch = NULL;
    p->nchecks = 0;
}

static int
program_traverse(GuardProgram *p, visitproc visit, void *arg)
{
    Py_VISIT(p->refs);
    Py_VISIT(p->fallback);
    Py_VISIT(p->dict);
    return 0;
}

static int
program_clear(GuardProgram *p)
{
    /* The arrays point into refs: they go first (a call after this fails). */
    program_free_arrays(p);
    Py_CLEAR(p->refs);
    Py_CLEAR(p->fallback);
    Py_CLEAR(p->dict);
    return 0;
}

static void
program_dealloc(GuardProgram *p)
{
    PyObject_GC_UnTrack(p);
    program_clear(p);
    Py_TYPE(p)->tp_free((PyObject *)p);
}

static int
bad_program(const char *why, Py_ssize_t i)
{
    PyErr_Format(PyExc_ValueError, "GuardProgram: %s (item %zd)", why, i);
    return -1;
}

static int
parse_steps(GuardProgram *p, PyObject *steps)
{
    p->nsteps = PyTuple_GET_SIZE(steps);
    p->steps = PyMem_Calloc(p->nsteps ? p->nsteps : 1, sizeof(Step));
    p->scratch = PyMem_Calloc(p->nsteps ? p->nsteps : 1, sizeof(PyObject *));
    if (p->steps == NULL || p->scratch == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < p->nsteps; i++) {
        PyObject *t = PyTuple_GET_ITEM(steps, i);
        Step *s = &p->steps[i];
        if (!PyTuple_Check(t) || !PyArg_ParseTuple(t, "iiO", &s->op, &s->base, &s->arg)) {
            return PyErr_Occurred() ? -1 : bad_program("a step is (op, base, arg)", i);
        }
        if (s->op < 0 || s->op >= SRC_COUNT || s->base >= i || s->base < -1) {
            return bad_program("bad step", i);
        }
        int needs_base = s->op == SRC_ATTR || s->op == SRC_GENERIC_ATTR || s->op == SRC_ITEM ||
                         s->op == SRC_DICT_STORAGE || s->op == SRC_TYPE || s->op == SRC_KEYED_ITEM;
        if (s->op == SRC_KEYED_ITEM) {
            s->key = PyLong_Check(s->arg) ? PyLong_AsSsize_t(s->arg) : -1;
            if (s->key < 0 || s->key >= i) {
                PyErr_Clear();
                return bad_program("bad key step", i);
            }
        }
        if (needs_base != (s->base >= 0) ||
            ((s->op == SRC_ATTR || s->op == SRC_GENERIC_ATTR) && !PyUnicode_Check(s->arg))) {
            return bad_program("bad step", i);
        }
    }
    return 0;
}

static int
parse_checks(GuardProgram *p, PyObject *checks)
{
    Py_ssize_t n = PyTuple_GET_SIZE(checks);
    p->checks = PyMem_Calloc(n ? n : 1, sizeof(Check));
    if (p->checks == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    p->nchecks = n;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PyTuple_GET_ITEM(checks, i), *ints;
        Check *c = &p->checks[i];
        if (!PyTuple_Check(t) || !PyArg_ParseTuple(t, "iiOOO!", &c->op, &c->src, &c->a, &c->b,
                                                   &PyTuple_Type, &ints)) {
            return PyErr_Occurred() ? -1 : bad_program("a check is (op, src, a, b, ints)", i);
        }
        c->nints = PyTuple_GET_SIZE(ints);
        c->ints = PyMem_Calloc(c->nints ? c->nints : 1, sizeof(int64_t));
        if (c->ints == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        for (Py_ssize_t k = 0; k < c->nints; k++) {
            PyObject *x = PyTuple_GET_ITEM(ints, k);
            c->ints[k] = x == Py_None ? ANY_DIM : PyLong_AsLongLong(x);
            if (c->ints[k] == -1 && PyErr_Occurred()) {
                return -1;
            }
        }
        int no_source = c->op == CK_CALL_IS || c->op == CK_DISTINCT || c->op == CK_IN_ANY ||
                        c->op == CK_INT_EXPR;
        if (c->op < 0 || c->op >= CK_COUNT || c->src >= p->nsteps || no_source != (c->src < 0)) {
            return bad_program("bad check", i);
        }
        if (!dc_check_args_valid(p, c)) {
            return bad_program("bad check arguments", i);
        }
    }
    return 0;
}

static PyObject *program_type_new(PyTypeObject *type, PyObject *args, PyObject *kwargs);

static PyObject *
program_get_size(GuardProgram *p, void *closure)
{
    return Py_BuildValue("nn", p->nsteps, p->nchecks);
}

static PyGetSetDef program_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {"size", (getter)program_get_size, NULL, "(steps, checks)", NULL},
    {NULL},
};

static PyTypeObject GuardProgram_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dynacap._C.GuardProgram",
    .tp_basicsize = sizeof(GuardProgram),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "GuardProgram(steps, checks, fallback): a cache entry's guards as C checks;\n"
              "called as program(L, G) -> bool (see dynacap/guards/program.py).",
    .tp_new = program_type_new,
    .tp_dealloc = (destructor)program_dealloc,
    .tp_traverse = (traverseproc)program_traverse,
    .tp_clear = (inquiry)program_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(GuardProgram, vectorcall),
    .tp_dictoffset = offsetof(GuardProgram, dict),
    .tp_getset = program_getset,
};

static PyObject *
program_type_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *steps, *checks, *fallback;
    if (kwargs != NULL && PyDict_GET_SIZE(kwargs) > 0) {
        PyErr_SetString(PyExc_TypeError, "GuardProgram takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "O!O!O:GuardProgram", &PyTuple_Type, &steps, &PyTuple_Type, &checks,
                          &fallback)) {
        return NULL;
    }
    if (fallback != Py_None && !PyCallable_Check(fallback)) {
        PyErr_SetString(PyExc_TypeError, "GuardProgram: fallback must be callable or None");
        return NULL;
    }
    GuardProgram *p = (GuardProgram *)type->tp_alloc(type, 0);
    if (p == NULL) {
        return NULL;
    }
    p->vectorcall = program_vectorcall;
    p->fallback = Py_NewRef(fallback);
    p->refs = PyTuple_Pack(2, steps, checks);
    if (p->refs == NULL || parse_steps(p, steps) < 0 || parse_checks(p, checks) < 0) {
        Py_DECREF(p);
        return NULL;
    }
    return (PyObject *)p;
}

int
dc_guards_init(PyObject *module)
{
    if (PyType_Ready(&GuardProgram_Type) < 0 ||
        PyModule_AddObjectRef(module, "GuardProgram", (PyObject *)&GuardProgram_Type) < 0) {
        return -1;
    }
    for (PyMethodDef *def = dc_tensor_methods; def->ml_name != NULL; def++) {
        PyObject *fn = PyCFunction_New(def, NULL);
        if (fn == NULL || PyModule_AddObject(module, def->ml_name, fn) < 0) {
            Py_XDECREF(fn);
            return -1;
        }
    }
    return 0;
}
