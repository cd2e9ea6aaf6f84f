/* dynacap._C: the PEP 523 eval-frame hook, per-thread callback state, cache
 * lookup and the module's functions. The per-code cache itself (co_extra
 * storage, entry checks) is in cache.c; shadow frames are in frame.c.
 *
 * For every fresh function frame on a thread that has set a callback, the hook
 * evaluates the guards of the code's cache entries made by that callback (one
 * callback per capture context: backend and options); a hit runs the entry's
 * code in a shadow frame, a miss asks the callback for a new entry.
 *
 * It must not modify or clear the interpreter's own frame (on 3.11 the caller
 * clears it), must not intercept frames started while the callback, a guard,
 * a trace/profile function or the garbage collector runs, and must not stay
 * installed while no thread has a callback: an installed hook disables 3.11's inlined
 * Python-to-Python calls for everyone.
 */
#include "cache.h"
#include "frame.h"
#include "guards.h"

#include <string.h>

/* The interpreter's garbage-collector state: whether a collection is running.
 * pycore_gc.h defines the public header's deprecated _PyGC_FINALIZED again. */
#undef _PyGC_FINALIZED
#define Py_BUILD_CORE
#include <internal/pycore_interp.h>
#undef Py_BUILD_CORE

/* ------------------------------------------------------------------------ */
/* Interpreter-wide state. All of it is guarded by the GIL.                  */

/* Eval function that was installed before ours; we chain to it for every
 * frame we do not replace, and for the shadow frames we do run. Never NULL:
 * the getter reports the default evaluator as _PyEval_EvalFrameDefault. */
static _PyFrameEvalFunction previous_eval = _PyEval_EvalFrameDefault;

/* Threads whose callback is set. The hook is installed exactly while > 0. */
static int active_threads = 0;

/* Counters are global (all threads together): they are for tests and
 * benchmarks, and the GIL makes plain increments safe. */
static struct {
    unsigned long long hits;           /* a guard (or a None guard) accepted an entry */
    unsigned long long misses;         /* no entry accepted: the callback was asked */
    unsigned long long callback_calls; /* callback invocations, raising ones included */
    unsigned long long shadow_runs;    /* replacement code evaluated in a shadow frame */
} stats;

static PyObject *dynacap_eval_frame(PyThreadState *, _PyInterpreterFrame *, int);

static void
hook_acquire(void)
{
    if (active_threads++ == 0) {
        PyInterpreterState *interp = PyInterpreterState_Get();
        _PyFrameEvalFunction current = _PyInterpreterState_GetEvalFrameFunc(interp);
        if (current != dynacap_eval_frame) {
            previous_eval = current;
        }
        _PyInterpreterState_SetEvalFrameFunc(interp, dynacap_eval_frame);
    }
}

static void
hook_release(void)
{
    if (--active_threads == 0) {
        PyInterpreterState *interp = PyInterpreterState_Get();
        /* If someone installed their own hook on top of ours, theirs stays;
         * ours keeps passing frames through to previous_eval meanwhile. */
        if (_PyInterpreterState_GetEvalFrameFunc(interp) == dynacap_eval_frame) {
            _PyInterpreterState_SetEvalFrameFunc(interp, previous_eval);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Per-thread state.                                                          */

typedef struct {
    PyObject *callback; /* strong; NULL when unset */
    int busy;           /* inside the callback or a guard: let every frame pass */
} ThreadState;

/* The hot path reads the state through TSS (a pthread key, no dict lookup).
 * Ownership sits in a capsule in the thread's dict, because that dict is
 * cleared when the thread ends: a thread that dies with a callback set must
 * still release the hook. */
static Py_tss_t tss_key = Py_tss_NEEDS_INIT;
#define THREAD_CAPSULE_NAME "dynacap._C.thread_state"

static void
thread_state_destroy(PyObject *capsule)
{
    ThreadState *ts = PyCapsule_GetPointer(capsule, THREAD_CAPSULE_NAME);
    if (ts == NULL) {
        PyErr_Clear();
        return;
    }
    /* Usually runs on the dying thread; at interpreter teardown it may run
     * on another one, whose own TSS must be left alone. */
    if (PyThread_tss_get(&tss_key) == ts) {
        PyThread_tss_set(&tss_key, NULL);
    }
    PyObject *callback = ts->callback;
    PyMem_RawFree(ts);
    if (callback != NULL) {
        hook_release();
        Py_DECREF(callback);
    }
}

static ThreadState *
thread_state_ensure(void)
{
    ThreadState *ts = PyThread_tss_get(&tss_key);
    if (ts != NULL) {
        return ts;
    }
    PyObject *dict = PyThreadState_GetDict();
    if (dict == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "dynacap._C: thread has no state dict");
        return NULL;
    }
    ts = PyMem_RawCalloc(1, sizeof(ThreadState));
    if (ts == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    PyObject *capsule = PyCapsule_New(ts, THREAD_CAPSULE_NAME, thread_state_destroy);
    if (capsule == NULL) {
        PyMem_RawFree(ts);
        return NULL;
    }
    int failed = PyDict_SetItemString(dict, THREAD_CAPSULE_NAME, capsule);
    Py_DECREF(capsule); /* on failure this frees ts */
    if (failed) {
        return NULL;
    }
    if (PyThread_tss_set(&tss_key, ts) != 0) {
        PyDict_DelItemString(dict, THREAD_CAPSULE_NAME);
        PyErr_SetString(PyExc_RuntimeError, "dynacap._C: cannot set thread-local state");
        return NULL;
    }
    return ts;
}

/* ------------------------------------------------------------------------ */
/* Reading a fresh frame.                                                     */

/* Only not-yet-started function bodies can be replaced. Module/class bodies
 * and exec carry an f_locals dict a shadow frame would drop (exec can even
 * run a function's code that way); generator frames live inside their
 * generator; a started frame has state we cannot move. */
static int
is_fresh_function_frame(_PyInterpreterFrame *frame)
{
    int flags = frame->f_code->co_flags;
    return frame->owner != FRAME_OWNED_BY_GENERATOR &&
           (flags & CO_OPTIMIZED) && frame->f_locals == NULL &&
           !(flags & GENERATOR_LIKE) &&
           _PyInterpreterFrame_LASTI(frame) < 0;
}

/* name -> value for everything bound at frame entry. The prologue
 * (MAKE_CELL, COPY_FREE_VARS) has not run: a cell argument still holds its
 * raw value, pure cells are NULL, and free variables are still only in the
 * function's closure, in the same order as the trailing free slots. */
static PyObject *
frame_locals(_PyInterpreterFrame *frame)
{
    PyCodeObject *code = frame->f_code;
    PyObject *closure = frame->f_func->func_closure;
    int free_start = code->co_nlocalsplus - code->co_nfreevars;
    PyObject *locals = PyDict_New();
    if (locals == NULL) {
        return NULL;
    }
    for (int i = 0; i < code->co_nlocalsplus; i++) {
        PyObject *value;
        if (i < free_start) {
            value = frame->localsplus[i];
        }
        else if (closure != NULL && i - free_start < PyTuple_GET_SIZE(closure)) {
            value = PyCell_GET(PyTuple_GET_ITEM(closure, i - free_start));
        }
        else {
            value = NULL;
        }
        if (value != NULL &&
            PyDict_SetItem(locals, PyTuple_GET_ITEM(code->co_localsplusnames, i), value) < 0) {
            Py_DECREF(locals);
            return NULL;
        }
    }
    return locals;
}

/* ------------------------------------------------------------------------ */
/* Cache lookup and entry creation.                                           */

/* Guards and the callback are dynacap's own work: a trace or profile function
 * (debugger, coverage, profiler) must not see their frames, nor the fake
 * tensors they handle, any more than it would when the program runs eagerly.
 * Returns whether tracing was paused (only when it is on: one load otherwise). */
static inline int
pause_tracing(PyThreadState *tstate)
{
    if (!tstate->cframe->use_tracing) {
        return 0;
    }
    PyThreadState_EnterTracing(tstate);
    return 1;
}

static inline void
resume_tracing(PyThreadState *tstate, int paused)
{
    if (paused) {
        PyThreadState_LeaveTracing(tstate);
    }
}

/* Runs the guards of the entries of `cache` made by this thread's callback,
 * in order. On a hit, *out is a new reference to the entry's code and the
 * entry moves to the front. *locals is built on the first guard that needs it
 * and handed back for reuse by the caller.
 * Returns 0 (hit or miss) or -1 with an exception that must propagate. */
static int
cache_lookup(PyThreadState *tstate, ThreadState *ts, _PyInterpreterFrame *frame,
             CodeCache *cache, PyObject **locals, PyCodeObject **out)
{
    *out = NULL;
    /* Guards run Python code: another thread may append to the list or
     * clear_cache may empty it meanwhile. Hold the list, re-read its size
     * each round, and hold the entry across its guard call. */
    PyObject *entries = Py_NewRef(cache->entries);
    int saved_busy = ts->busy;
    int status = 0;
    int paused = pause_tracing(tstate);
    ts->busy = 1;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(entries); i++) {
        /* Entries of other callbacks (another backend or options) are never
         * used: one pointer compare, no reference taken. */
        if (PyTuple_GET_ITEM(PyList_GET_ITEM(entries, i), ENTRY_OWNER) != ts->callback) {
            continue;
        }
        PyObject *entry = Py_NewRef(PyList_GET_ITEM(entries, i));
        PyObject *guard = PyTuple_GET_ITEM(entry, ENTRY_GUARD);
        int ok = 1;
        if (guard != Py_None) {
            if (*locals == NULL && (*locals = frame_locals(frame)) == NULL) {
                Py_DECREF(entry);
                status = -1;
                break;
            }
            PyObject *args[2] = {*locals, frame->f_globals};
            PyObject *res = PyObject_Vectorcall(guard, args, 2, NULL);
            ok = res == NULL ? -1 : PyObject_IsTrue(res);
            Py_XDECREF(res);
            if (ok < 0) {
                /* A failing guard just rejects its entry, but an interrupt
                 * or exit request must still reach the program. */
                if (!PyErr_ExceptionMatches(PyExc_Exception)) {
                    Py_DECREF(entry);
                    status = -1;
                    break;
                }
                PyErr_Clear();
                ok = 0;
            }
        }
        if (ok) {
            *out = (PyCodeObject *)Py_NewRef(PyTuple_GET_ITEM(entry, ENTRY_CODE));
            if (i > 0 && i < PyList_GET_SIZE(entries) &&
                PyList_GET_ITEM(entries, i) == entry) {
                /* Rotate [0..i] right by one; the list keeps its references. */
                PyObject **items = ((PyListObject *)entries)->ob_item;
                memmove(&items[1], &items[0], i * sizeof(PyObject *));
                items[0] = entry;
            }
            Py_DECREF(entry);
            break;
        }
        Py_DECREF(entry);
    }
    ts->busy = saved_busy;
    resume_tracing(tstate, paused);
    Py_DECREF(entries);
    return status;
}

/* ------------------------------------------------------------------------ */
/* The hook.                                                                  */

/* Runs `code` in place of `frame`, which stays untouched: the interpreter
 * clears it after we return. The caller holds a reference to `code`, so a
 * clear_cache during the run cannot free it. */
static PyObject *
run_replacement(PyThreadState *tstate, _PyInterpreterFrame *frame, PyCodeObject *code)
{
    _PyInterpreterFrame *shadow = dc_shadow_frame_new(frame->f_func, code);
    if (shadow == NULL) {
        return NULL;
    }
    /* Raw copies are right even for cell arguments and free variables: the
     * replacement's own prologue runs MAKE_CELL and COPY_FREE_VARS. Free
     * slots must stay NULL, since COPY_FREE_VARS overwrites without DECREF. */
    int nargs = dc_argument_slots(code);
    for (int i = 0; i < nargs; i++) {
        shadow->localsplus[i] = Py_XNewRef(frame->localsplus[i]);
    }
    stats.shadow_runs++;
    PyObject *result = previous_eval(tstate, shadow, 0);
    dc_shadow_frame_free(shadow);
    return result;
}

/* Asks the callback for an entry; *owner receives a new reference to the
 * callback that answered (it may replace itself with set_callback while it
 * runs, and the entry belongs to the one that made it). */
static PyObject *
call_callback(PyThreadState *tstate, ThreadState *ts, _PyInterpreterFrame *frame,
              PyObject *locals, PyObject **owner)
{
    PyObject *callback = Py_NewRef(ts->callback);
    PyObject *args[5] = {
        (PyObject *)frame->f_code, (PyObject *)frame->f_func, locals,
        frame->f_globals, frame->f_builtins,
    };
    int saved_busy = ts->busy;
    int paused = pause_tracing(tstate);
    ts->busy = 1;
    stats.callback_calls++;
    PyObject *result = PyObject_Vectorcall(callback, args, 5, NULL);
    ts->busy = saved_busy;
    resume_tracing(tstate, paused);
    *owner = callback;
    return result;
}

static PyObject *
dynacap_eval_frame(PyThreadState *tstate, _PyInterpreterFrame *frame, int throwflag)
{
    /* throwflag: a generator is being unwound by throw()/close(); replacing
     * or failing that frame would skip its cleanup (finally, __exit__).
     * tstate->tracing: a sys.settrace/setprofile function (and whatever it
     * calls) is running; capturing it would trace the tracer, whose state
     * changes on every event (and would never be traced itself anyway).
     * gc.collecting: gc callbacks, finalizers and weakref callbacks run by a
     * collection, which starts wherever an allocation crosses a threshold:
     * never code of the program being captured. */
    ThreadState *ts = PyThread_tss_get(&tss_key);
    if (ts == NULL || ts->callback == NULL || ts->busy || throwflag ||
        tstate->tracing || tstate->interp->gc.collecting || !is_fresh_function_frame(frame)) {
        return previous_eval(tstate, frame, throwflag);
    }
    PyCodeObject *code = frame->f_code;
    CodeCache *cache = dc_code_cache(code);
    if (cache != NULL && cache->skip) {
        return previous_eval(tstate, frame, throwflag);
    }

    PyObject *locals = NULL;
    PyCodeObject *replacement = NULL;
    if (cache != NULL && cache_lookup(tstate, ts, frame, cache, &locals, &replacement) < 0) {
        Py_XDECREF(locals);
        return NULL;
    }
    if (replacement != NULL) {
        stats.hits++;
    }
    else {
        stats.misses++;
        if (locals == NULL && (locals = frame_locals(frame)) == NULL) {
            return NULL;
        }
        PyObject *owner;
        PyObject *result = call_callback(tstate, ts, frame, locals, &owner);
        if (result == NULL) {
            Py_DECREF(owner);
            Py_DECREF(locals);
            return NULL;
        }
        if (result == Py_None) {
            Py_DECREF(result);
            Py_DECREF(owner);
            Py_DECREF(locals);
            return previous_eval(tstate, frame, throwflag);
        }
        PyObject *entry = dc_make_entry(code, result, owner);
        Py_DECREF(result);
        Py_DECREF(owner);
        if (entry == NULL || (cache = dc_code_cache_ensure(code)) == NULL ||
            PyList_Insert(cache->entries, 0, entry) < 0) {
            Py_XDECREF(entry);
            Py_DECREF(locals);
            return NULL;
        }
        replacement = (PyCodeObject *)Py_NewRef(PyTuple_GET_ITEM(entry, ENTRY_CODE));
        Py_DECREF(entry);
    }
    Py_XDECREF(locals);
    PyObject *result = run_replacement(tstate, frame, replacement);
    Py_DECREF(replacement);
    return result;
}

/* ------------------------------------------------------------------------ */
/* Module functions.                                                          */

static PyCodeObject *
code_arg(PyObject *arg)
{
    if (!PyCode_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "expected a code object, not %.100s",
                     Py_TYPE(arg)->tp_name);
        return NULL;
    }
    return (PyCodeObject *)arg;
}

static PyObject *
m_set_callback(PyObject *module, PyObject *callback)
{
    if (callback != Py_None && !PyCallable_Check(callback)) {
        PyErr_SetString(PyExc_TypeError, "set_callback: expected a callable or None");
        return NULL;
    }
    ThreadState *ts = PyThread_tss_get(&tss_key);
    if (ts == NULL) {
        if (callback == Py_None) {
            Py_RETURN_NONE; /* nothing set on this thread, nothing to create */
        }
        if ((ts = thread_state_ensure()) == NULL) {
            return NULL;
        }
    }
    PyObject *previous = ts->callback; /* its reference goes to our caller */
    if (callback == Py_None) {
        ts->callback = NULL;
        if (previous != NULL) {
            hook_release();
        }
    }
    else {
        ts->callback = Py_NewRef(callback);
        if (previous == NULL) {
            hook_acquire();
        }
    }
    return previous != NULL ? previous : Py_NewRef(Py_None);
}

/* call_with_callback(callback, fn, *args, **kwargs): fn(*args, **kwargs) with this thread's
 * callback set, then the previous one restored (even when fn raises).  One C call instead of
 * two set_callback calls around a Python-level call: this is the per-call path of optimize(). */
static PyObject *
m_call_with_callback(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (nargs < 2) {
        PyErr_SetString(PyExc_TypeError, "call_with_callback(callback, fn, *args, **kwargs)");
        return NULL;
    }
    PyObject *previous = m_set_callback(module, args[0]);
    if (previous == NULL) {
        return NULL;
    }
    PyObject *result = PyObject_Vectorcall(args[1], args + 2, nargs - 2, kwnames);
    PyObject *exc_type, *exc_value, *exc_tb;
    PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
    PyObject *restored = m_set_callback(module, previous);
    Py_DECREF(previous);
    if (restored == NULL) {
        Py_XDECREF(result);
        Py_XDECREF(exc_type);
        Py_XDECREF(exc_value);
        Py_XDECREF(exc_tb);
        return NULL;
    }
    Py_DECREF(restored);
    PyErr_Restore(exc_type, exc_value, exc_tb);
    return result;
}

static PyObject *
m_hook_installed(PyObject *module, PyObject *unused)
{
    PyInterpreterState *interp = PyInterpreterState_Get();
    return PyBool_FromLong(_PyInterpreterState_GetEvalFrameFunc(interp) == dynacap_eval_frame);
}

static PyObject *
m_set_skip(PyObject *module, PyObject *arg)
{
    PyCodeObject *code = code_arg(arg);
    CodeCache *cache = code ? dc_code_cache_ensure(code) : NULL;
    if (cache == NULL) {
        return NULL;
    }
    cache->skip = 1;
    Py_RETURN_NONE;
}

static PyObject *
m_is_skip(PyObject *module, PyObject *arg)
{
    PyCodeObject *code = code_arg(arg);
    if (code == NULL) {
        return NULL;
    }
    CodeCache *cache = dc_code_cache(code);
    return PyBool_FromLong(cache != NULL && cache->skip);
}

static PyObject *
m_cache_entries(PyObject *module, PyObject *arg)
{
    PyCodeObject *code = code_arg(arg);
    if (code == NULL) {
        return NULL;
    }
    CodeCache *cache = dc_code_cache(code);
    if (cache == NULL) {
        return PyList_New(0);
    }
    /* A copy: the hook relies on being the only one that reorders the list. */
    return PyList_GetSlice(cache->entries, 0, PY_SSIZE_T_MAX);
}

static PyObject *
m_clear_cache(PyObject *module, PyObject *arg)
{
    PyCodeObject *code = code_arg(arg);
    if (code == NULL) {
        return NULL;
    }
    CodeCache *cache = dc_code_cache(code);
    if (cache != NULL) {
        cache->skip = 0;
        /* In place: the list stays consistent while dropped entries run
         * arbitrary finalizers. */
        if (PyList_SetSlice(cache->entries, 0, PY_SSIZE_T_MAX, NULL) < 0) {
            return NULL;
        }
    }
    Py_RETURN_NONE;
}

static PyObject *
m_drop_entries(PyObject *module, PyObject *args)
{
    PyObject *code_obj, *guard;
    if (!PyArg_ParseTuple(args, "OO:drop_entries", &code_obj, &guard)) {
        return NULL;
    }
    PyCodeObject *code = code_arg(code_obj);
    if (code == NULL) {
        return NULL;
    }
    CodeCache *cache = dc_code_cache(code);
    Py_ssize_t dropped = 0;
    if (cache != NULL) {
        /* In place and one at a time: a dropped entry may run finalizers that
         * look at the list (the hook re-reads its size and checks identity). */
        Py_ssize_t i = 0;
        while (i < PyList_GET_SIZE(cache->entries)) {
            PyObject *entry = PyList_GET_ITEM(cache->entries, i);
            if (PyTuple_GET_ITEM(entry, ENTRY_GUARD) == guard) {
                if (PyList_SetSlice(cache->entries, i, i + 1, NULL) < 0) {
                    return NULL;
                }
                dropped++;
            }
            else {
                i++;
            }
        }
    }
    return PyLong_FromSsize_t(dropped);
}

static PyObject *
m_cache_stats(PyObject *module, PyObject *unused)
{
    return Py_BuildValue("{s:K,s:K,s:K,s:K}",
                         "hits", stats.hits,
                         "misses", stats.misses,
                         "callback_calls", stats.callback_calls,
                         "shadow_runs", stats.shadow_runs);
}

static PyObject *
m_reset_cache_stats(PyObject *module, PyObject *unused)
{
    memset(&stats, 0, sizeof(stats));
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"set_callback", m_set_callback, METH_O,
     "set_callback(callback_or_None) -> previous\n\n"
     "Set the calling thread's callback, called as\n"
     "callback(code, func, f_locals, f_globals, f_builtins) on a cache miss.\n"
     "It returns None (run the original this time) or (guard_or_None, code).\n"
     "Entries a callback made are used only while it is the thread's callback.\n"
     "The hook is installed while any thread has a callback."},
    {"call_with_callback", (PyCFunction)(void (*)(void))m_call_with_callback, METH_FASTCALL | METH_KEYWORDS,
     "call_with_callback(callback, fn, *args, **kwargs): call fn with this thread's callback set"},
    {"hook_installed", m_hook_installed, METH_NOARGS,
     "hook_installed() -> bool: whether the eval-frame hook is installed."},
    {"set_skip", m_set_skip, METH_O,
     "set_skip(code): never intercept this code again (until clear_cache)."},
    {"is_skip", m_is_skip, METH_O, "is_skip(code) -> bool"},
    {"drop_entries", m_drop_entries, METH_VARARGS,
     "drop_entries(code, guard) -> count: drop the code's cache entries whose guard is `guard`."},
    {"cache_entries", m_cache_entries, METH_O,
     "cache_entries(code) -> list of (guard, code, owner), in lookup order (a copy);\n"
     "owner is the callback that made the entry, the only one it is used for."},
    {"clear_cache", m_clear_cache, METH_O,
     "clear_cache(code): drop the code's cache entries and its skip mark."},
    {"cache_stats", m_cache_stats, METH_NOARGS,
     "cache_stats() -> dict of hits, misses, callback_calls, shadow_runs,\n"
     "counted over all threads since import or reset_cache_stats()."},
    {"reset_cache_stats", m_reset_cache_stats, METH_NOARGS,
     "reset_cache_stats(): zero the counters of cache_stats()."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "dynacap._C",
    .m_doc = "PEP 523 frame hook and per-code cache of dynacap (CPython 3.11).",
    /* Single-phase init: process-wide state, one interpreter only. */
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC
PyInit__C(void)
{
    if (dc_frame_check_layout() < 0) {
        return NULL;
    }
    if (!PyThread_tss_is_created(&tss_key) && PyThread_tss_create(&tss_key) != 0) {
        PyErr_SetString(PyExc_ImportError, "dynacap._C: cannot create thread-local key");
        return NULL;
    }
    if (dc_cache_init() < 0) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&module_def);
    if (module != NULL && dc_guards_init(module) < 0) {
        Py_CLEAR(module);
    }
    return module;
}
