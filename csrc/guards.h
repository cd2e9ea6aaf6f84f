/* The guard program of dynacap._C (guards.c): a cache entry's guards as a
 * flat list of C checks over sources read from the frame's locals and
 * globals, built from data by dynacap/guards/program.py.
 */
#ifndef DYNACAP_GUARDS_H
#define DYNACAP_GUARDS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* Adds the GuardProgram type and the guard helpers to the module; 0 or -1. */
int dc_guards_init(PyObject *module);

#endif /* DYNACAP_GUARDS_H */
