/* What each check of a guard program asserts (see guard_program.h, guards.c).
 *
 * Tensors are read through the AOTInductor C shim of libtorch (plain C
 * functions, their addresses given by Python at setup: no C++ headers, no
 * link against libtorch) on the THPVariable's `at::Tensor` field, and
 * requires_grad through TensorBase's own C getter. Only exact torch.Tensor
 * and nn.Parameter take that path (program.py checks it); other tensor
 * types are checked by the Python fallback. Symbolic-shape guards are
 * integer expressions over those sizes and strides.
 *
 * It must not import torch or Dynamo, and holds no state beyond the shim's
 * function pointers.
 */
#include "guard_program.h"

#include <string.h>

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
/* Checks.                                                                    */

int
dc_truth_of(PyObject *result)
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
        int ok = dc_truth_of(PyObject_RichCompare(list, keys, Py_EQ));
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
        PyObject *v = dc_read_source(p, regs, (Py_ssize_t)c->ints[i], L, G);
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
            PyObject *v = dc_read_source(p, regs, (Py_ssize_t)x, L, G);
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
        return dc_truth_of(PyObject_Vectorcall(c->a, args, 2, NULL));
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

/* guard.py's same_constant(a, b) for constants made of C types (program.py
 * checks b): same types throughout, floats and complex numbers by their bits. */
static int
same_constant(PyObject *a, PyObject *b)
{
    PyTypeObject *t = Py_TYPE(a);
    if (t != Py_TYPE(b)) {
        return 0;
    }
    if (t == &PyFloat_Type) {
        double x = PyFloat_AS_DOUBLE(a), y = PyFloat_AS_DOUBLE(b);
        return memcmp(&x, &y, sizeof x) == 0;
    }
    if (t == &PyComplex_Type) {
        Py_complex x = ((PyComplexObject *)a)->cval, y = ((PyComplexObject *)b)->cval;
        return memcmp(&x.real, &y.real, sizeof x.real) == 0 && memcmp(&x.imag, &y.imag, sizeof x.imag) == 0;
    }
    if (t == &PyTuple_Type || t == &PyList_Type || t == &PySlice_Type || t == &PyFrozenSet_Type) {
        if (Py_EnterRecursiveCall(" in a guard")) {
            return -1;
        }
        int ok = 1;
        if (t == &PySlice_Type) {
            PySliceObject *x = (PySliceObject *)a, *y = (PySliceObject *)b;
            ok = same_constant(x->start, y->start);
            ok = ok == 1 ? same_constant(x->stop, y->stop) : ok;
            ok = ok == 1 ? same_constant(x->step, y->step) : ok;
        }
        else if (t == &PyFrozenSet_Type) {
            /* Every member of b matches one of a: a bijection, members being distinct. */
            Py_ssize_t pb = 0, pa;
            PyObject *x, *y;
            Py_hash_t hash;
            ok = PySet_GET_SIZE(a) == PySet_GET_SIZE(b);
            while (ok == 1 && _PySet_NextEntry(b, &pb, &x, &hash)) {
                int found = 0;
                for (pa = 0; found == 0 && _PySet_NextEntry(a, &pa, &y, &hash);) {
                    found = same_constant(y, x);
                }
                ok = found;
            }
        }
        else {
            /* Members are C types too: comparing them runs no code that could resize a. */
            Py_ssize_t n = t == &PyTuple_Type ? PyTuple_GET_SIZE(a) : PyList_GET_SIZE(a);
            ok = n == (t == &PyTuple_Type ? PyTuple_GET_SIZE(b) : PyList_GET_SIZE(b));
            for (Py_ssize_t i = 0; ok == 1 && i < n; i++) {
                ok = t == &PyTuple_Type ? same_constant(PyTuple_GET_ITEM(a, i), PyTuple_GET_ITEM(b, i))
                                        : same_constant(PyList_GET_ITEM(a, i), PyList_GET_ITEM(b, i));
            }
        }
        Py_LeaveRecursiveCall();
        return ok;
    }
    if (t == &PyLong_Type || t == &PyUnicode_Type || t == &PyBytes_Type || t == &PyRange_Type ||
        a == Py_None || a == Py_Ellipsis || a == Py_NotImplemented) {
        return dc_truth_of(PyObject_RichCompare(a, b, Py_EQ));
    }
    if (a == b) {
        return 1;
    }
    PyObject *r = PyObject_RichCompare(a, b, Py_EQ);
    if (r == NULL) {
        return -1;
    }
    int same = r == Py_True;
    Py_DECREF(r);
    return same;
}

int
dc_run_check(GuardProgram *p, Check *c, PyObject *v, PyObject **regs, PyObject *L, PyObject *G)
{
    int quick = dc_quick_check(c, v);
    if (quick != NOT_QUICK) {
        return quick;
    }
    switch (c->op) {
    case CK_ID_WEAK:
        /* A dead reference gives None, as calling it does. */
        return v == PyWeakref_GET_OBJECT(c->a);
    case CK_EQ: /* of the type (dc_quick_check); not a float */
        return dc_truth_of(PyObject_RichCompare(v, c->b, Py_EQ));
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
        int ok = dc_truth_of(PyObject_CallFunctionObjArgs(c->a, arg, c->b, NULL));
        Py_DECREF(arg);
        return ok;
    }
    case CK_SAME: {
        PyObject *arg = c->ints[0] ? PySequence_List(v) : Py_NewRef(v);
        if (arg == NULL) {
            return -1;
        }
        int ok = same_constant(arg, c->b);
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
        PyObject *other = dc_read_source(p, regs, (Py_ssize_t)c->ints[0], L, G);
        if (other == NULL) {
            return PyErr_Occurred() ? -1 : 0;
        }
        return (v == other) == c->ints[1];
    }
    case CK_INT_EXPR:
        return check_int_expr(p, c, regs, L, G);
    case CK_IN_SOURCE: {
        PyObject *key = dc_read_source(p, regs, (Py_ssize_t)c->ints[0], L, G);
        if (key == NULL) {
            return PyErr_Occurred() ? -1 : 0;
        }
        int found = PySequence_Contains(v, key);
        return found < 0 ? -1 : found == c->ints[1];
    }
    case CK_IN_ANY:
        /* `or` stops at the first container holding the key, as Python does. */
        for (Py_ssize_t k = 1; k < c->nints; k++) {
            PyObject *container = dc_read_source(p, regs, (Py_ssize_t)c->ints[k], L, G);
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

/* Whether a check's arguments are what its kind needs (a malformed program
 * must be refused, not crash). */
int
dc_check_args_valid(GuardProgram *p, Check *c)
{
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
    case CK_SAME:
        ok = c->nints == 1;
        break;
    case CK_TENSOR:
        ok = shim.ready && PyType_Check(c->a) && PyType_IsSubtype((PyTypeObject *)c->a, shim.tensor_base) &&
             (c->b == Py_True || c->b == Py_False) && c->nints >= 4 && c->ints[3] >= 0 &&
             c->nints == 4 + 2 * c->ints[3];
        break;
    case CK_DISTINCT:
    case CK_IN_ANY:
    case CK_IS_SOURCE:
    case CK_IN_SOURCE: {
        /* Step indices, and for some a flag: IN_ANY's first int, IS/IN_SOURCE's second. */
        int pair = c->op == CK_IS_SOURCE || c->op == CK_IN_SOURCE;
        Py_ssize_t first = c->op == CK_IN_ANY, end = pair ? 1 : c->nints;
        for (Py_ssize_t k = first; k < end; k++) {
            ok = ok && c->ints[k] >= 0 && c->ints[k] < p->nsteps;
        }
        ok = ok && (!pair || (c->nints == 2 && (c->ints[1] == 0 || c->ints[1] == 1)));
        ok = ok && (c->op != CK_IN_ANY || (c->nints >= 2 && (c->ints[0] == 0 || c->ints[0] == 1)));
        break;
    }
    case CK_HAS_ATTR:
        ok = PyUnicode_Check(c->a) && c->nints == 1;
        break;
    case CK_INT_EXPR:
        ok = valid_int_expr(p, c);
        break;
    }
    return ok;
}

PyMethodDef dc_tensor_methods[] = {
    {"_guard_setup", m_guard_setup, METH_VARARGS,
     "_guard_setup((dtype, device_type, device_index, dim, sizes, strides), requires_grad_descr,\n"
     "tensor_base): addresses of the AOTInductor shim functions that tensor checks call."},
    {"_tensor_meta", m_tensor_meta, METH_O,
     "_tensor_meta(tensor) -> (dtype, device_type, device_index, sizes, strides, requires_grad)\n"
     "as tensor checks read them (only for exact torch.Tensor / nn.Parameter)."},
    {NULL, NULL, 0, NULL},
};
