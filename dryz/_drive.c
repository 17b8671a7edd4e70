/* dryz._drive: call libllama's sampler functions in a loop without a Python round trip per call.
 *
 * Nothing of the sampler is here: every function pointer is taken from the libllama that llama-cpp-python
 * loaded (passed in as integers by dryz/subject.py), and this module only sequences the calls. A
 * llama_sampler_accept through ctypes costs ~0.8 us; here it costs what libllama's own code costs.
 * dryz/subject.py keeps a pure-ctypes path doing the same calls (DRYZ_DRIVE=ctypes), and a test checks both
 * give identical output.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

typedef void *(*clone_fn)(const void *);
typedef void (*accept_fn)(void *, int32_t);
typedef void (*apply_fn)(void *, void *);
typedef void (*free_fn)(void *);

/* run(clone, accept, apply, free, prototype, tokens, array): s = clone(prototype); accept(s, t) for every
 * int32 t in tokens; apply(s, array); free(s). array is the address of a llama_token_data_array the caller
 * built (its layout is the bindings'). Returns None; raises if the clone is NULL. */
static PyObject *drive_run(PyObject *self, PyObject *args) {
    unsigned long long f_clone, f_accept, f_apply, f_free, proto, array;
    Py_buffer toks;
    if (!PyArg_ParseTuple(args, "KKKKKy*K", &f_clone, &f_accept, &f_apply, &f_free, &proto, &toks, &array))
        return NULL;
    if (toks.len % (Py_ssize_t)sizeof(int32_t) != 0) {
        PyBuffer_Release(&toks);
        PyErr_SetString(PyExc_ValueError, "tokens must be a buffer of int32");
        return NULL;
    }
    void *s = ((clone_fn)(uintptr_t)f_clone)((const void *)(uintptr_t)proto);
    if (!s) {
        PyBuffer_Release(&toks);
        PyErr_SetString(PyExc_RuntimeError, "llama_sampler_clone returned NULL");
        return NULL;
    }
    const int32_t *t = (const int32_t *)toks.buf;
    Py_ssize_t n = toks.len / (Py_ssize_t)sizeof(int32_t);
    accept_fn accept = (accept_fn)(uintptr_t)f_accept;
    for (Py_ssize_t i = 0; i < n; ++i)
        accept(s, t[i]);
    PyBuffer_Release(&toks);
    ((apply_fn)(uintptr_t)f_apply)(s, (void *)(uintptr_t)array);
    ((free_fn)(uintptr_t)f_free)(s);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"run", drive_run, METH_VARARGS, "clone a prototype, accept the tokens, apply once, free"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_drive", NULL, -1, methods};

PyMODINIT_FUNC PyInit__drive(void) { return PyModule_Create(&module); }
