/* The per-code cache of dynacap._C: replacement entries and the skip mark,
 * stored in each code object's co_extra slot, and the checks an entry must
 * pass before it goes in.
 *
 * It must not call into Python beyond comparing names, and its freefunc
 * runs from code_dealloc (possibly at shutdown), so it stays trivial.
 */
#include "cache.h"

/* Our co_extra slot, requested once per process at import. */
static Py_ssize_t extra_index = -1;

/* Called by the interpreter from code_dealloc for every extra slot, NULL or
 * not, possibly during shutdown: keep it trivial. */
static void
code_cache_free(void *p)
{
    CodeCache *cache = p;
    if (cache != NULL) {
        Py_XDECREF(cache->entries);
        PyMem_Free(cache);
    }
}

CodeCache *
dc_code_cache(PyCodeObject *code)
{
    void *p = NULL;
    /* Cannot fail for a code object and an index we were given. */
    (void)_PyCode_GetExtra((PyObject *)code, extra_index, &p);
    return p;
}

/* The cache is created once per code object and never replaced, so a
 * pointer to it stays valid as long as the code object lives;
 * clear_cache empties it in place. */
CodeCache *
dc_code_cache_ensure(PyCodeObject *code)
{
    CodeCache *cache = dc_code_cache(code);
    if (cache != NULL) {
        return cache;
    }
    cache = PyMem_Calloc(1, sizeof(CodeCache));
    if (cache == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    cache->entries = PyList_New(0);
    if (cache->entries == NULL ||
        _PyCode_SetExtra((PyObject *)code, extra_index, cache) < 0) {
        code_cache_free(cache);
        return NULL;
    }
    return cache;
}

int
dc_cache_init(void)
{
    if (extra_index < 0) {
        extra_index = _PyEval_RequestCodeExtraIndex(code_cache_free);
        if (extra_index < 0) {
            PyErr_SetString(PyExc_ImportError, "dynacap._C: no co_extra slot left");
            return -1;
        }
    }
    return 0;
}

/* Slots 0..n-1 hold the bound arguments, in both the original and the
 * replacement code: the only slots a shadow frame is given. */
int
dc_argument_slots(PyCodeObject *code)
{
    return code->co_argcount + code->co_kwonlyargcount +
           ((code->co_flags & CO_VARARGS) ? 1 : 0) +
           ((code->co_flags & CO_VARKEYWORDS) ? 1 : 0);
}

static int
same_names(PyCodeObject *a, int a_start, PyCodeObject *b, int b_start, int n)
{
    for (int i = 0; i < n; i++) {
        int eq = PyObject_RichCompareBool(PyTuple_GET_ITEM(a->co_localsplusnames, a_start + i),
                                          PyTuple_GET_ITEM(b->co_localsplusnames, b_start + i),
                                          Py_EQ);
        if (eq <= 0) {
            return eq;
        }
    }
    return 1;
}

/* A replacement is run with the original's argument slots and closure, so
 * it must agree on both; anything else would read the wrong slots or past
 * the end of the closure. Checked once, when the entry is created. */
static int
check_replacement(PyCodeObject *orig, PyCodeObject *repl)
{
    const int kinds = CO_VARARGS | CO_VARKEYWORDS;
    const char *why = NULL;
    if (!(repl->co_flags & CO_OPTIMIZED) || (repl->co_flags & GENERATOR_LIKE)) {
        why = "it must be a plain function body (not a generator or coroutine)";
    }
    else if (repl->co_argcount != orig->co_argcount ||
             repl->co_posonlyargcount != orig->co_posonlyargcount ||
             repl->co_kwonlyargcount != orig->co_kwonlyargcount ||
             (repl->co_flags & kinds) != (orig->co_flags & kinds)) {
        why = "the argument counts or kinds differ";
    }
    else if (repl->co_nfreevars != orig->co_nfreevars) {
        why = "the free variables differ";
    }
    else {
        /* Free variables are the trailing slots of both codes. */
        int args_same = same_names(orig, 0, repl, 0, dc_argument_slots(orig));
        int free_same = args_same != 1 ? 1 :
            same_names(orig, orig->co_nlocalsplus - orig->co_nfreevars,
                       repl, repl->co_nlocalsplus - repl->co_nfreevars,
                       orig->co_nfreevars);
        if (args_same < 0 || free_same < 0) {
            return -1;
        }
        why = !args_same ? "the argument names differ" :
              !free_same ? "the free variables differ" : NULL;
    }
    if (why != NULL) {
        PyErr_Format(PyExc_TypeError,
                     "dynacap: replacement code %R cannot stand in for %R: %s",
                     repl, orig, why);
        return -1;
    }
    return 0;
}

PyObject *
dc_make_entry(PyCodeObject *orig, PyObject *result, PyObject *owner)
{
    if (!PyTuple_Check(result) || PyTuple_GET_SIZE(result) != 2) {
        PyErr_Format(PyExc_TypeError,
                     "dynacap callback must return None or (guard, code), not %.100s",
                     Py_TYPE(result)->tp_name);
        return NULL;
    }
    PyObject *guard = PyTuple_GET_ITEM(result, 0);
    PyObject *code = PyTuple_GET_ITEM(result, 1);
    if (guard != Py_None && !PyCallable_Check(guard)) {
        PyErr_SetString(PyExc_TypeError, "dynacap callback: guard must be callable or None");
        return NULL;
    }
    if (!PyCode_Check(code)) {
        PyErr_SetString(PyExc_TypeError, "dynacap callback: second item must be a code object");
        return NULL;
    }
    if (check_replacement(orig, (PyCodeObject *)code) < 0) {
        return NULL;
    }
    return PyTuple_Pack(3, guard, code, owner);
}
