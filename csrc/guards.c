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
 * Tensors are read through the AOTInductor C shim of libtorch (plain C
 * functions, their addresses given by Python at setup: no C++ headers, no
 * link against libtorch) on the THPVariable's `at::Tensor` field, and
 * requires_grad through TensorBase's own C getter. Only exact torch.Tensor
 * and nn.Parameter take that path (program.py checks it); other tensor
 * types are checked by the Python fallback.
 *
 * It must not import torch or Dynamo, and holds no state beyond the shim's
 * function pointers.
 */
#include "guards.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* How a source is read (a step). */
enum {
    SRC_LOCAL,        /* L[arg] */
    SRC_GLOBAL,       /* G[arg] */
    SRC_CONST,        /* arg itself */
    SRC_ATTR,         /* getattr(base, arg) */
    SRC_GENERIC_ATTR, /* object.__getattribute__(base, arg) */
    SRC_ITEM,         /* base[arg] */
    SRC_DICT_STORAGE, /* dict.__getitem__(base, arg) */
    SRC_GLOBALS,      /* G itself */
    SRC_TYPE,         /* type(base) */
    SRC_COUNT
};

/* What a check asserts. */
enum {
    CK_TYPE,         /* type(v) is a */
    CK_ID,           /* v is a */
    CK_ID_WEAK,      /* v is a() (a weak reference) */
    CK_EQ,           /* type(v) is a and v == b */
    CK_FLOAT_BITS,   /* type(v) is float and its bits are the 8 bytes a */
    CK_COMPLEX_BITS, /* type(v) is complex and its bits are the 16 bytes a */
    CK_KEYS,         /* list(v) == a (a list) */
    CK_LEN_EQ,       /* len(v) == ints[0] */
    CK_LEN_GT,       /* len(v) > ints[0] */
    CK_FALSY,        /* not v */
    CK_NOT_IN,       /* a not in v */
    CK_IN,           /* a in v */
    CK_CALL_IS,      /* a() is b (no source) */
    CK_CALL_TRUE,    /* a(v, b) is true; with ints[0], a(list(v), b) */
    CK_TENSOR,       /* type, dtype, requires_grad, sizes, strides, device */
    CK_DISTINCT,     /* the sources ints[...] are distinct objects (no source) */
    CK_HAS_ATTR,     /* hasattr(v, a) is ints[0] */
    CK_IS_SOURCE,    /* (v is source ints[0]) is ints[1] */
    CK_IN_ANY,       /* (a in source ints[1] or a in source ints[2] ...) is ints[0] (no source) */
    CK_INT_EXPR,     /* an integer expression over sizes, strides and ints is true (no source) */
    CK_COUNT
};

/* Instructions of an integer expression (CK_INT_EXPR): triples (op, x, y)
 * on a stack of int64. Any overflow, or a value that is not what the C
 * path reads (not a tensor, not an exact int), hands the expression to its
 * Python version `a(L, G)`, which has Python's integers. */
enum {
    IE_CONST,    /* push x */
    IE_SIZE,     /* push size y of the tensor at step x */
    IE_STRIDE,   /* push stride y of the tensor at step x */
    IE_INT,      /* push the int at step x */
    IE_ADD,
    IE_SUB,
    IE_MUL,
    IE_FLOORDIV, /* Python's //: rounds toward minus infinity */
    IE_MOD,      /* Python's %: the sign of the divisor */
    IE_NEG,
    IE_EQ,
    IE_NE,
    IE_LT,
    IE_LE,
    IE_GT,
    IE_GE,
    IE_COUNT
};
#define IE_STACK 32

/* A size or stride a tensor check accepts whatever it is (a symbolic dim). */
#define ANY_DIM INT64_MIN

typedef struct {
    int op;
    int base; /* index of an earlier step, or -1 */
    PyObject *arg;
    /* Last lookup of arg in a plain dict: while that dict (same object, same
     * version tag) is unchanged, the value is the same object, which the
     * dict keeps alive. Compared, never dereferenced, until the tag matches. */
    PyObject *dict;
    uint64_t version;
    PyObject *value;
} Step;

typedef struct {
    int op;
    int src; /* step index, or -1 */
    PyObject *a, *b;
    Py_ssize_t nints;
    int64_t *ints;
} Check;

typedef struct {
    PyObject_HEAD
    Py_ssize_t nsteps;
    Step *steps;
    Py_ssize_t nchecks;
    Check *checks;
    PyObject *refs;     /* (steps, checks): keeps every object the arrays point to alive */
    PyObject *fallback; /* callable(L, G) or None */
    PyObject *dict;     /* attributes (compiled_guard) */
    PyObject **scratch; /* nsteps registers, reused by calls that do not overlap */
    int running;        /* a call is using scratch (a read re-entered the program) */
    vectorcallfunc vectorcall;
} GuardProgram;

/* ------------------------------------------------------------------------ */
/* Tensors through the AOTInductor shim.                                      */

typedef int32_t (*get_i32_fn)(void *, int32_t *);
typedef int32_t (*get_i64_fn)(void *, int64_t *);
typedef int32_t (*get_i64p_fn)(void *, int64_t **);

static struct {
    int ready;
    get_i32_fn dtype, device_type, device_index;
    get_i64_fn dim;
    get_i64p_fn sizes, strides;
    getter requires_grad;
    void *requires_grad_closure;
    PyTypeObject *tensor_base; /* torch._C.TensorBase: every object a tensor check reads is one */
} shim;

/* The `at::Tensor` (one intrusive pointer) right after the object header of
 * a THPVariable; the shim takes a pointer to it. Checked by Python at setup
 * against real tensors (program.py) before any program uses it. */
static inline void *
tensor_handle(PyObject *v)
{
    return (char *)v + sizeof(PyObject);
}

/* type, dtype, requires_grad, sizes, strides, device, in the Python check's
 * order. ints: dtype, device type, device index (-2: any, the tensor is on
 * CPU), ndim, sizes[ndim], strides[ndim]. */
static int
check_tensor(Check *c, PyObject *v)
{
    if (Py_TYPE(v) != (PyTypeObject *)c->a || !shim.ready) {
        return 0;
    }
    void *h = tensor_handle(v);
    int32_t i32;
    if (shim.dtype(h, &i32) != 0 || i32 != c->ints[0]) {
        return 0;
    }
    PyObject *rg = shim.requires_grad(v, shim.requires_grad_closure);
    if (rg == NULL) {
        return -1;
    }
    int same = rg == c->b;
    Py_DECREF(rg);
    if (!same) {
        return 0;
    }
    int64_t ndim = c->ints[3], dim;
    int64_t *sizes, *strides;
    if (shim.dim(h, &dim) != 0 || dim != ndim || shim.sizes(h, &sizes) != 0 ||
        shim.strides(h, &strides) != 0) {
        return 0;
    }
    const int64_t *want = c->ints + 4;
    for (int64_t d = 0; d < ndim; d++) {
        if (want[d] != ANY_DIM && want[d] != sizes[d]) {
            return 0;
        }
    }
    want += ndim;
    for (int64_t d = 0; d < ndim; d++) {
        if (want[d] != ANY_DIM && want[d] != strides[d]) {
            return 0;
        }
    }
    if (shim.device_type(h, &i32) != 0 || i32 != c->ints[1]) {
        return 0;
    }
    if (c->ints[2] != -2 && (shim.device_index(h, &i32) != 0 || i32 != c->ints[2])) {
        return 0;
    }
    return 1;
}

static PyObject *
m_guard_setup(PyObject *module, PyObject *args)
{
    unsigned long long f[6];
    PyObject *descr, *base;
    if (!PyArg_ParseTuple(args, "(KKKKKK)OO!:_guard_setup", &f[0], &f[1], &f[2], &f[3], &f[4], &f[5],
                          &descr, &PyType_Type, &base)) {
        return NULL;
    }
    if (shim.ready) {
        Py_RETURN_NONE; /* once per process */
    }
    if (!Py_IS_TYPE(descr, &PyGetSetDescr_Type) ||
        ((PyGetSetDescrObject *)descr)->d_getset->get == NULL) {
        PyErr_SetString(PyExc_TypeError, "_guard_setup: requires_grad must be a getset descriptor");
        return NULL;
    }
    for (int i = 0; i < 6; i++) {
        if (f[i] == 0) {
            PyErr_SetString(PyExc_ValueError, "_guard_setup: a shim function is missing");
            return NULL;
        }
    }
    /* Both belong to torch, which stays loaded as long as the process. */
    Py_INCREF(descr);
    Py_INCREF(base);
    shim.tensor_base = (PyTypeObject *)base;
    shim.dtype = (get_i32_fn)(uintptr_t)f[0];
    shim.device_type = (get_i32_fn)(uintptr_t)f[1];
    shim.device_index = (get_i32_fn)(uintptr_t)f[2];
    shim.dim = (get_i64_fn)(uintptr_t)f[3];
    shim.sizes = (get_i64p_fn)(uintptr_t)f[4];
    shim.strides = (get_i64p_fn)(uintptr_t)f[5];
    shim.requires_grad = ((PyGetSetDescrObject *)descr)->d_getset->get;
    shim.requires_grad_closure = ((PyGetSetDescrObject *)descr)->d_getset->closure;
    shim.ready = 1;
    Py_RETURN_NONE;
}

/* (dtype, device type, device index, sizes, strides, requires_grad) as the
 * tensor checks read them: for Python to check the setup and to learn the
 * codes of dtypes and devices. */
static PyObject *
m_tensor_meta(PyObject *module, PyObject *t)
{
    if (!shim.ready || !PyObject_TypeCheck(t, shim.tensor_base)) {
        PyErr_SetString(PyExc_TypeError, "_tensor_meta: needs a tensor, after _guard_setup");
        return NULL;
    }
    void *h = tensor_handle(t);
    int32_t dtype, dtype_dev, index;
    int64_t dim, *sizes, *strides;
    if (shim.dtype(h, &dtype) || shim.device_type(h, &dtype_dev) || shim.device_index(h, &index) ||
        shim.dim(h, &dim) || shim.sizes(h, &sizes) || shim.strides(h, &strides)) {
        PyErr_SetString(PyExc_RuntimeError, "_tensor_meta: the shim failed");
        return NULL;
    }
    PyObject *sz = PyTuple_New(dim), *st = PyTuple_New(dim);
    PyObject *rg = shim.requires_grad(t, shim.requires_grad_closure);
    if (sz == NULL || st == NULL || rg == NULL) {
        Py_XDECREF(sz);
        Py_XDECREF(st);
        Py_XDECREF(rg);
        return NULL;
    }
    for (int64_t d = 0; d < dim; d++) {
        PyTuple_SET_ITEM(sz, d, PyLong_FromLongLong(sizes[d]));
        PyTuple_SET_ITEM(st, d, PyLong_FromLongLong(strides[d]));
    }
    return Py_BuildValue("iiiNNN", dtype, dtype_dev, index, sz, st, rg);
}

/* ------------------------------------------------------------------------ */
/* Reading sources.                                                          */

/* d[key]; NULL without an exception for a missing key of a dict. */
static PyObject *
item_of(Step *s, PyObject *d, PyObject *key)
{
    if (PyDict_CheckExact(d)) {
        PyDictObject *mp = (PyDictObject *)d;
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
static PyObject *
read_source(GuardProgram *p, PyObject **regs, Py_ssize_t i, PyObject *L, PyObject *G)
{
    if (regs[i] != NULL) {
        return regs[i];
    }
    Step *s = &p->steps[i];
    PyObject *base = NULL, *v = NULL;
    if (s->base >= 0 && (base = read_source(p, regs, s->base, L, G)) == NULL) {
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
    }
    regs[i] = v;
    return v;
}

/* ------------------------------------------------------------------------ */
/* Checks.                                                                    */

static int
truth_of(PyObject *result)
{
    if (result == NULL) {
        return -1;
    }
    int ok = PyObject_IsTrue(result);
    Py_DECREF(result);
    return ok;
}

/* list(v) == keys, without making the list for a plain dict. */
static int
check_keys(PyObject *v, PyObject *keys)
{
    if (!PyDict_CheckExact(v)) {
        PyObject *list = PySequence_List(v);
        if (list == NULL) {
            return -1;
        }
        int ok = truth_of(PyObject_RichCompare(list, keys, Py_EQ));
        Py_DECREF(list);
        return ok;
    }
    if (PyDict_GET_SIZE(v) != PyList_GET_SIZE(keys)) {
        return 0;
    }
    Py_ssize_t pos = 0, i = 0;
    PyObject *key, *value;
    while (PyDict_Next(v, &pos, &key, &value)) {
        if (i >= PyList_GET_SIZE(keys)) {
            return 0;
        }
        PyObject *want = PyList_GET_ITEM(keys, i++);
        if (key != want) {
            Py_INCREF(key);
            Py_INCREF(want);
            int eq = PyObject_RichCompareBool(key, want, Py_EQ);
            Py_DECREF(key);
            Py_DECREF(want);
            if (eq <= 0) {
                return eq;
            }
        }
    }
    return i == PyList_GET_SIZE(keys);
}

static int
compare_pointers(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

static int
check_distinct(GuardProgram *p, Check *c, PyObject **regs, PyObject *L, PyObject *G)
{
    uintptr_t small[16];
    uintptr_t *ptrs = c->nints <= 16 ? small : PyMem_Malloc(c->nints * sizeof(uintptr_t));
    if (ptrs == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    int ok = 1;
    for (Py_ssize_t i = 0; i < c->nints; i++) {
        PyObject *v = read_source(p, regs, (Py_ssize_t)c->ints[i], L, G);
        if (v == NULL) {
            ok = PyErr_Occurred() ? -1 : 0;
            break;
        }
        ptrs[i] = (uintptr_t)v;
    }
    if (ok == 1) {
        qsort(ptrs, c->nints, sizeof(uintptr_t), compare_pointers);
        for (Py_ssize_t i = 1; i < c->nints; i++) {
            if (ptrs[i] == ptrs[i - 1]) {
                ok = 0;
                break;
            }
        }
    }
    if (ptrs != small) {
        PyMem_Free(ptrs);
    }
    return ok;
}

static int
check_int_expr(GuardProgram *p, Check *c, PyObject **regs, PyObject *L, PyObject *G)
{
    int64_t stack[IE_STACK];
    int sp = 0;
    for (Py_ssize_t k = 0; k < c->nints; k += 3) {
        int64_t op = c->ints[k], x = c->ints[k + 1], y = c->ints[k + 2];
        if (op == IE_CONST) {
            stack[sp++] = x;
            continue;
        }
        if (op == IE_SIZE || op == IE_STRIDE || op == IE_INT) {
            PyObject *v = read_source(p, regs, (Py_ssize_t)x, L, G);
            if (v == NULL) {
                return PyErr_Occurred() ? -1 : 0;
            }
            if (op == IE_INT) {
                int overflow;
                long long n = PyLong_CheckExact(v) ? PyLong_AsLongLongAndOverflow(v, &overflow) : 0;
                if (!PyLong_CheckExact(v) || overflow) {
                    goto python;
                }
                stack[sp++] = n;
                continue;
            }
            int64_t dim, *values;
            if (!shim.ready || !PyObject_TypeCheck(v, shim.tensor_base)) {
                goto python;
            }
            void *h = tensor_handle(v);
            if (shim.dim(h, &dim) != 0 || y < 0 || y >= dim ||
                (op == IE_SIZE ? shim.sizes(h, &values) : shim.strides(h, &values)) != 0) {
                goto python;
            }
            stack[sp++] = values[y];
            continue;
        }
        if (op == IE_NEG) {
            if (stack[sp - 1] == INT64_MIN) {
                goto python;
            }
            stack[sp - 1] = -stack[sp - 1];
            continue;
        }
        int64_t a = stack[sp - 2], b = stack[sp - 1], r;
        sp--;
        switch (op) {
        case IE_ADD:
            if (__builtin_add_overflow(a, b, &r)) {
                goto python;
            }
            break;
        case IE_SUB:
            if (__builtin_sub_overflow(a, b, &r)) {
                goto python;
            }
            break;
        case IE_MUL:
            if (__builtin_mul_overflow(a, b, &r)) {
                goto python;
            }
            break;
        case IE_FLOORDIV:
        case IE_MOD:
            if (b == 0 || (a == INT64_MIN && b == -1)) {
                goto python; /* ZeroDivisionError, or past int64 */
            }
            r = op == IE_FLOORDIV ? a / b : a % b;
            if (a % b != 0 && ((a < 0) != (b < 0))) {
                r = op == IE_FLOORDIV ? r - 1 : r + b;
            }
            break;
        case IE_EQ:
            r = a == b;
            break;
        case IE_NE:
            r = a != b;
            break;
        case IE_LT:
            r = a < b;
            break;
        case IE_LE:
            r = a <= b;
            break;
        case IE_GT:
            r = a > b;
            break;
        default: /* IE_GE */
            r = a >= b;
            break;
        }
        stack[sp - 1] = r;
    }
    return stack[0] != 0;
python: {
        PyObject *args[2] = {L, G};
        return truth_of(PyObject_Vectorcall(c->a, args, 2, NULL));
    }
}

/* The shape of an expression's instructions: operands in range, the stack
 * within IE_STACK, one value left. */
static int
valid_int_expr(GuardProgram *p, Check *c)
{
    if (c->nints == 0 || c->nints % 3 != 0 || !PyCallable_Check(c->a)) {
        return 0;
    }
    int sp = 0;
    for (Py_ssize_t k = 0; k < c->nints; k += 3) {
        int64_t op = c->ints[k], x = c->ints[k + 1];
        if (op < 0 || op >= IE_COUNT) {
            return 0;
        }
        if (op == IE_SIZE || op == IE_STRIDE || op == IE_INT) {
            if (x < 0 || x >= p->nsteps) {
                return 0;
            }
        }
        if (op <= IE_INT) {
            if (++sp > IE_STACK) {
                return 0;
            }
        }
        else if (op == IE_NEG ? sp < 1 : sp-- < 2) {
            return 0;
        }
    }
    return sp == 1;
}

/* 1: holds, 0: fails, -1: an exception was raised. */
static int
run_check(GuardProgram *p, Check *c, PyObject *v, PyObject **regs, PyObject *L, PyObject *G)
{
    switch (c->op) {
    case CK_TYPE:
        return Py_TYPE(v) == (PyTypeObject *)c->a;
    case CK_ID:
        return v == c->a;
    case CK_ID_WEAK:
        /* A dead reference gives None, as calling it does. */
        return v == PyWeakref_GET_OBJECT(c->a);
    case CK_EQ:
        if (Py_TYPE(v) != (PyTypeObject *)c->a) {
            return 0;
        }
        if (c->a == (PyObject *)&PyFloat_Type) {
            return PyFloat_AS_DOUBLE(v) == PyFloat_AS_DOUBLE(c->b);
        }
        return truth_of(PyObject_RichCompare(v, c->b, Py_EQ));
    case CK_FLOAT_BITS: {
        if (!PyFloat_CheckExact(v)) {
            return 0;
        }
        double d = PyFloat_AS_DOUBLE(v);
        return memcmp(&d, PyBytes_AS_STRING(c->a), sizeof d) == 0;
    }
    case CK_COMPLEX_BITS: {
        if (!PyComplex_CheckExact(v)) {
            return 0;
        }
        double d[2] = {PyComplex_RealAsDouble(v), PyComplex_ImagAsDouble(v)};
        return memcmp(d, PyBytes_AS_STRING(c->a), sizeof d) == 0;
    }
    case CK_KEYS:
        return check_keys(v, c->a);
    case CK_LEN_EQ:
    case CK_LEN_GT: {
        Py_ssize_t n = PyObject_Length(v);
        if (n < 0) {
            return -1;
        }
        return c->op == CK_LEN_EQ ? n == c->ints[0] : n > c->ints[0];
    }
    case CK_FALSY: {
        int truth = PyObject_IsTrue(v);
        return truth < 0 ? -1 : !truth;
    }
    case CK_NOT_IN:
    case CK_IN: {
        int found = PySequence_Contains(v, c->a);
        return found < 0 ? -1 : (c->op == CK_IN ? found : !found);
    }
    case CK_CALL_IS: {
        PyObject *r = PyObject_CallNoArgs(c->a);
        if (r == NULL) {
            return -1;
        }
        int same = r == c->b;
        Py_DECREF(r);
        return same;
    }
    case CK_CALL_TRUE: {
        PyObject *arg = c->ints[0] ? PySequence_List(v) : Py_NewRef(v);
        if (arg == NULL) {
            return -1;
        }
        int ok = truth_of(PyObject_CallFunctionObjArgs(c->a, arg, c->b, NULL));
        Py_DECREF(arg);
        return ok;
    }
    case CK_TENSOR:
        return check_tensor(c, v);
    case CK_DISTINCT:
        return check_distinct(p, c, regs, L, G);
    case CK_HAS_ATTR: {
        PyObject *attr;
        int found = _PyObject_LookupAttr(v, c->a, &attr);
        Py_XDECREF(attr);
        return found < 0 ? -1 : found == c->ints[0];
    }
    case CK_IS_SOURCE: {
        PyObject *other = read_source(p, regs, (Py_ssize_t)c->ints[0], L, G);
        if (other == NULL) {
            return PyErr_Occurred() ? -1 : 0;
        }
        return (v == other) == c->ints[1];
    }
    case CK_INT_EXPR:
        return check_int_expr(p, c, regs, L, G);
    case CK_IN_ANY:
        /* `or` stops at the first container holding the key, as Python does. */
        for (Py_ssize_t k = 1; k < c->nints; k++) {
            PyObject *container = read_source(p, regs, (Py_ssize_t)c->ints[k], L, G);
            if (container == NULL) {
                return PyErr_Occurred() ? -1 : 0;
            }
            int found = PySequence_Contains(container, c->a);
            if (found < 0) {
                return -1;
            }
            if (found) {
                return c->ints[0] == 1;
            }
        }
        return c->ints[0] == 0;
    }
    return 0;
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
            (v = read_source(p, regs, c->src, L, G)) == NULL) {
            ok = PyErr_Occurred() ? -1 : 0;
            break;
        }
        ok = run_check(p, c, v, regs, L, G);
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
        ok = truth_of(PyObject_Vectorcall(p->fallback, args, 2, NULL));
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
                         s->op == SRC_DICT_STORAGE || s->op == SRC_TYPE;
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
        int ok = 1;
        switch (c->op) {
        case CK_TYPE:
            ok = PyType_Check(c->a);
            break;
        case CK_ID_WEAK:
            ok = PyWeakref_CheckRef(c->a);
            break;
        case CK_EQ:
            ok = PyType_Check(c->a) && Py_IS_TYPE(c->b, (PyTypeObject *)c->a);
            break;
        case CK_FLOAT_BITS:
            ok = PyBytes_Check(c->a) && PyBytes_GET_SIZE(c->a) == 8;
            break;
        case CK_COMPLEX_BITS:
            ok = PyBytes_Check(c->a) && PyBytes_GET_SIZE(c->a) == 16;
            break;
        case CK_KEYS:
            ok = PyList_CheckExact(c->a);
            break;
        case CK_LEN_EQ:
        case CK_LEN_GT:
        case CK_CALL_TRUE:
            ok = c->nints == 1;
            break;
        case CK_TENSOR:
            ok = shim.ready && PyType_Check(c->a) &&
                 PyType_IsSubtype((PyTypeObject *)c->a, shim.tensor_base) && (c->b == Py_True || c->b == Py_False) && c->nints >= 4 &&
                 c->ints[3] >= 0 && c->nints == 4 + 2 * c->ints[3];
            break;
        case CK_DISTINCT:
        case CK_IN_ANY:
        case CK_IS_SOURCE:
            for (Py_ssize_t k = c->op == CK_IN_ANY; k < c->nints; k++) {
                ok = ok && c->ints[k] >= 0 && c->ints[k] < p->nsteps;
            }
            ok = ok && (c->op != CK_IS_SOURCE || (c->nints == 2 && (c->ints[1] == 0 || c->ints[1] == 1)));
            ok = ok && (c->op != CK_IN_ANY || (c->nints >= 2 && (c->ints[0] == 0 || c->ints[0] == 1)));
            break;
        case CK_HAS_ATTR:
            ok = PyUnicode_Check(c->a) && c->nints == 1;
            break;
        case CK_INT_EXPR:
            ok = valid_int_expr(p, c);
            break;
        }
        if (!ok) {
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

static PyMethodDef guard_methods[] = {
    {"_guard_setup", m_guard_setup, METH_VARARGS,
     "_guard_setup((dtype, device_type, device_index, dim, sizes, strides), requires_grad_descr,\n"
     "tensor_base): addresses of the AOTInductor shim functions that tensor checks call."},
    {"_tensor_meta", m_tensor_meta, METH_O,
     "_tensor_meta(tensor) -> (dtype, device_type, device_index, sizes, strides, requires_grad)\n"
     "as tensor checks read them (only for exact torch.Tensor / nn.Parameter)."},
    {NULL, NULL, 0, NULL},
};

int
dc_guards_init(PyObject *module)
{
    if (PyType_Ready(&GuardProgram_Type) < 0 ||
        PyModule_AddObjectRef(module, "GuardProgram", (PyObject *)&GuardProgram_Type) < 0) {
        return -1;
    }
    for (PyMethodDef *def = guard_methods; def->ml_name != NULL; def++) {
        PyObject *fn = PyCFunction_New(def, NULL);
        if (fn == NULL || PyModule_AddObject(module, def->ml_name, fn) < 0) {
            Py_XDECREF(fn);
            return -1;
        }
    }
    return 0;
}
