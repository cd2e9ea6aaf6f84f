/* The per-code cache of dynacap._C (cache.c): what a code object's co_extra
 * slot holds, and how an entry is made from a callback result.
 */
#ifndef DYNACAP_CACHE_H
#define DYNACAP_CACHE_H

#include "frame.h"

#define GENERATOR_LIKE \
    (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE)

typedef struct {
    PyObject *entries; /* list of (guard_or_None, code, owner) tuples, most recently hit first */
    int skip;          /* never intercept this code again (until clear_cache) */
} CodeCache;

/* Requests the co_extra slot; 0, or -1 with ImportError. Call once at module init. */
int dc_cache_init(void);

/* The code's cache, or NULL if it has none yet (never fails). */
CodeCache *dc_code_cache(PyCodeObject *code);

/* The code's cache, created empty if needed; NULL with an exception on failure.
 * Created once and never replaced: a pointer stays valid while the code lives. */
CodeCache *dc_code_cache_ensure(PyCodeObject *code);

/* Slots 0..n-1 of a frame of `code` hold its bound arguments. */
int dc_argument_slots(PyCodeObject *code);

/* Validates a callback result `(guard_or_None, code)` for the cache of `orig`
 * (the replacement must share its argument slots and free variables) and
 * returns a new entry tuple `(guard, code, owner)`, or NULL with TypeError.
 * `owner` is the callback that made it: an entry is only used while that
 * same callback is the thread's callback. */
PyObject *dc_make_entry(PyCodeObject *orig, PyObject *result, PyObject *owner);

/* Items of an entry tuple. */
#define ENTRY_GUARD 0
#define ENTRY_CODE 1
#define ENTRY_OWNER 2

#endif /* DYNACAP_CACHE_H */
