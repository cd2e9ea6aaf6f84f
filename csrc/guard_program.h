/* Internals of dynacap._C's guard program, shared by guards.c (the type,
 * sources, the run) and guard_checks.c (what each check asserts, tensors
 * through the AOTInductor shim, integer expressions). Not for other files.
 */
#ifndef DYNACAP_GUARD_PROGRAM_H
#define DYNACAP_GUARD_PROGRAM_H

#include "guards.h"

#include <stddef.h>
#include <stdint.h>

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
    SRC_KEYED_ITEM,   /* base[value of step arg] (arg: an int, an earlier step) */
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
    CK_SAME,         /* same_constant(v, b) (guard.py), C types only; with ints[0], of list(v) */
    CK_IN_SOURCE,    /* (source ints[0] in v) is ints[1] */
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
    Py_ssize_t key; /* SRC_KEYED_ITEM: the step of the key */
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

#define NOT_QUICK (-2)

/* The checks that need no call (most of them): 1 holds, 0 fails, or
 * NOT_QUICK for the others (dc_run_check). */
static inline int
dc_quick_check(Check *c, PyObject *v)
{
    switch (c->op) {
    case CK_TYPE:
        return Py_TYPE(v) == (PyTypeObject *)c->a;
    case CK_ID:
        return v == c->a;
    case CK_EQ:
        if (Py_TYPE(v) != (PyTypeObject *)c->a) {
            return 0;
        }
        if (c->a == (PyObject *)&PyFloat_Type) {
            return PyFloat_AS_DOUBLE(v) == PyFloat_AS_DOUBLE(c->b);
        }
        return NOT_QUICK;
    default:
        return NOT_QUICK;
    }
}

/* The value of step i (borrowed from regs), or NULL: the read failed, with
 * or without an exception set (guards.c). */
PyObject *dc_read_source(GuardProgram *p, PyObject **regs, Py_ssize_t i, PyObject *L, PyObject *G);

/* 1: the check holds of v, 0: it fails, -1: an exception was raised (guard_checks.c). */
int dc_run_check(GuardProgram *p, Check *c, PyObject *v, PyObject **regs, PyObject *L, PyObject *G);

/* Whether c's arguments suit its kind, given p's steps (guard_checks.c). */
int dc_check_args_valid(GuardProgram *p, Check *c);

/* PyObject_IsTrue of a new reference (consumed), -1 for NULL. */
int dc_truth_of(PyObject *result);

/* _guard_setup and _tensor_meta (guard_checks.c). */
extern PyMethodDef dc_tensor_methods[];

#endif /* DYNACAP_GUARD_PROGRAM_H */
