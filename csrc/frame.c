/* Shadow-frame lifecycle for the dynacap hook: allocation, clearing, and
 * handing a finished frame's contents to a frame object that outlives it.
 *
 * These are our own versions of CPython 3.11 helpers that libpython does not
 * export. They must only ever be applied to frames dynacap allocated itself,
 * never to a frame the interpreter pushed.
 */
#include "frame.h"

#include <stddef.h>
#include <string.h>

int
dc_frame_check_layout(void)
{
    /* The frame-object allocation below assumes the 3.11 PyFrame_Type shape:
     * a frame object embeds its specials, then one word per local or stack
     * slot. A mismatch means a different build; refuse to load. */
    Py_ssize_t basic = offsetof(PyFrameObject, _f_frame_data) +
                       offsetof(_PyInterpreterFrame, localsplus);
    if (PyFrame_Type.tp_basicsize != basic ||
        PyFrame_Type.tp_itemsize != (Py_ssize_t)sizeof(PyObject *)) {
        PyErr_SetString(PyExc_ImportError,
                        "dynacap._C: PyFrame_Type layout is not the CPython 3.11 one");
        return -1;
    }
    return 0;
}

_PyInterpreterFrame *
dc_shadow_frame_new(PyFunctionObject *func, PyCodeObject *code)
{
    size_t words = FRAME_SPECIALS_SIZE + code->co_nlocalsplus + code->co_stacksize;
    _PyInterpreterFrame *frame = PyMem_Malloc(words * sizeof(PyObject *));
    if (frame == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    frame->f_func = (PyFunctionObject *)Py_NewRef(func);
    frame->f_code = (PyCodeObject *)Py_NewRef(code);
    /* Borrowed, as in the interpreter: f_func keeps both alive. */
    frame->f_globals = func->func_globals;
    frame->f_builtins = func->func_builtins;
    frame->f_locals = NULL;
    frame->frame_obj = NULL;
    frame->previous = NULL; /* the eval loop links it to the running frame */
    frame->prev_instr = _PyCode_CODE(code) - 1;
    frame->stacktop = code->co_nlocalsplus;
    frame->is_entry = false;
    frame->owner = FRAME_OWNED_BY_THREAD;
    for (int i = 0; i < code->co_nlocalsplus; i++) {
        frame->localsplus[i] = NULL;
    }
    return frame;
}

static PyFrameObject *
new_frame_object(PyCodeObject *code)
{
    int slots = code->co_nlocalsplus + code->co_stacksize;
    PyFrameObject *f = PyObject_GC_NewVar(PyFrameObject, &PyFrame_Type, slots);
    if (f == NULL) {
        return NULL;
    }
    f->f_back = NULL;
    f->f_trace = NULL;
    f->f_trace_lines = 1;
    f->f_trace_opcodes = 0;
    f->f_fast_as_locals = 0;
    f->f_lineno = 0;
    /* Not GC-tracked: an object viewing a live frame is tracked only once it
     * owns the frame's data. */
    return f;
}

/* Borrowed frame object of a live interpreter frame, created on demand.
 * Leaves the error indicator exactly as it found it; NULL on failure. */
static PyFrameObject *
frame_object_of(_PyInterpreterFrame *frame)
{
    if (frame->frame_obj != NULL) {
        return frame->frame_obj;
    }
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyFrameObject *f = new_frame_object(frame->f_code);
    PyErr_Clear();
    PyErr_Restore(type, value, tb);
    if (f == NULL) {
        return NULL;
    }
    if (frame->frame_obj != NULL) {
        /* The allocation ran the GC, whose finalizers created this frame's
         * object first (CPython GH-97002). That one may already be visible,
         * so keep it. Ours views no frame data: say so, so that its dealloc
         * touches nothing. */
        f->f_frame = (_PyInterpreterFrame *)f->_f_frame_data;
        f->f_frame->owner = FRAME_OWNED_BY_THREAD;
        Py_DECREF(f);
        return frame->frame_obj;
    }
    f->f_frame = frame;
    frame->frame_obj = f;
    return f;
}

/* The frame's memory is about to be freed while `f` is still referenced
 * elsewhere: copy the specials and live slots into `f` so that f_locals,
 * f_code, f_lineno and f_back keep working, and give `f` the references. */
static void
move_into_frame_object(PyFrameObject *f, _PyInterpreterFrame *frame)
{
    size_t size = (char *)&frame->localsplus[frame->stacktop] - (char *)frame;
    _PyInterpreterFrame *owned = (_PyInterpreterFrame *)f->_f_frame_data;
    memcpy(owned, frame, size);
    f->f_frame = owned;
    owned->owner = FRAME_OWNED_BY_FRAME_OBJECT;
    if (_PyFrame_IsIncomplete(owned)) {
        /* Died in its prologue; line lookup wants a traceable position. */
        owned->prev_instr = _PyCode_CODE(owned->f_code) + owned->f_code->_co_firsttraceable;
    }

    /* `previous` points into the caller's frame, which will go away: replace
     * the link with a strong f_back to the caller's frame object. */
    _PyInterpreterFrame *prev = owned->previous;
    while (prev != NULL && _PyFrame_IsIncomplete(prev)) {
        prev = prev->previous;
    }
    owned->previous = NULL;
    if (prev != NULL && f->f_back == NULL) {
        PyFrameObject *back = frame_object_of(prev);
        if (back != NULL) {
            f->f_back = (PyFrameObject *)Py_NewRef(back);
        }
        /* else: out of memory; the frame just loses its f_back. */
    }
    if (!PyObject_GC_IsTracked((PyObject *)f)) {
        PyObject_GC_Track((PyObject *)f);
    }
}

void
dc_shadow_frame_free(_PyInterpreterFrame *frame)
{
    PyFrameObject *f = frame->frame_obj;
    if (f != NULL) {
        frame->frame_obj = NULL;
        if (Py_REFCNT(f) > 1) {
            move_into_frame_object(f, frame);
            Py_DECREF(f);
            PyMem_Free(frame);
            return;
        }
        Py_DECREF(f);
    }
    for (int i = 0; i < frame->stacktop; i++) {
        Py_XDECREF(frame->localsplus[i]);
    }
    Py_XDECREF(frame->f_locals);
    Py_DECREF(frame->f_func);
    Py_DECREF(frame->f_code);
    PyMem_Free(frame);
}
