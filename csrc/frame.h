/* Shadow interpreter frames for the dynacap eval-frame hook (CPython 3.11 only).
 *
 * libpython keeps its frame helpers (_PyFrame_Clear, take_ownership,
 * _PyFrame_MakeAndSetFrameObject, ...) hidden, so frame.c carries small
 * equivalents written against the 3.11 struct layout. This header must not
 * pull in internal headers that need more than pycore_frame.h/pycore_code.h,
 * and nothing here may touch a frame the interpreter owns: the caller of the
 * hook clears the original frame itself.
 */
#ifndef DYNACAP_FRAME_H
#define DYNACAP_FRAME_H

#include <Python.h>

#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030C0000
#error "dynacap's frame hook is written against the CPython 3.11 frame layout only"
#endif

/* The internal headers refuse to be included outside the core unless asked. */
#define Py_BUILD_CORE
#include <internal/pycore_frame.h>
#include <internal/pycore_code.h>
#undef Py_BUILD_CORE

/* 0, or -1 with ImportError if this interpreter's frame objects do not have
 * the 3.11 layout the helpers below rely on. Call once at module init. */
int dc_frame_check_layout(void);

/* A fresh, not-yet-started frame that runs `code` on behalf of `func`.
 *
 * Specials are initialised as _PyFrame_InitializeSpecials would, except that
 * f_code is `code` rather than func->func_code: the replacement code borrows
 * the original function's globals, builtins and closure. Every local slot is
 * NULL; the caller fills the argument slots (strong references).
 * Returns NULL with MemoryError set on failure. */
_PyInterpreterFrame *dc_shadow_frame_new(PyFunctionObject *func, PyCodeObject *code);

/* Drops every reference the frame holds and frees its memory. If a frame
 * object (traceback, sys._getframe) still refers to the frame, its contents
 * are moved into that object first, so the object stays valid. The frame must
 * already be unlinked from the thread's frame chain (the eval loop has
 * returned). A pending exception is preserved. */
void dc_shadow_frame_free(_PyInterpreterFrame *frame);

#endif /* DYNACAP_FRAME_H */
