/* dryz._drive: call libllama's sampler functions in a loop without a Python round trip per call.
 *
 * Nothing of the sampler is here: every function pointer is taken from the libllama that llama-cpp-python
 * loaded (passed in as integers by dryz/subject/libllama.py), and this module only sequences the calls and fills and
 * reads the candidate array. A llama_sampler_accept through ctypes costs ~0.8 us; here it costs what
 * libllama's own code costs. dryz/subject/libllama.py keeps a pure-ctypes path doing the same calls
 * (DRYZ_DRIVE=ctypes), and a test checks both give identical output.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* llama.h's public structs (llama_token_data, llama_token_data_array). dryz/subject/libllama.py compares layout()
 * with dryz's ctypes definitions when it loads the library and refuses to use this module if
 * they differ. */
typedef struct {
    int32_t id;
    float logit;
    float p;
} token_data;

typedef struct {
    token_data *data;
    size_t size;
    int64_t selected;
    bool sorted;
} token_data_array;

typedef void *(*init_dry_fn)(const void *, float, float, int32_t, int32_t, const char **, size_t);
/* before llama.cpp PR #26524 (llama-cpp-python <= 0.3.34): n_ctx_train after the vocab */
typedef void *(*init_dry8_fn)(const void *, int32_t, float, float, int32_t, int32_t, const char **, size_t);
typedef void (*accept_fn)(void *, int32_t);
typedef void (*apply_fn)(void *, void *);
typedef void (*free_fn)(void *);

/* run(init_dry, accept, apply, free, vocab, abi, n_ctx_train, multiplier, base, allowed_length, penalty_last_n,
 *     breakers, history, ids, logits, sorted) -> (ids bytes, logits bytes, sorted)
 *
 * s = llama_sampler_init_dry(vocab, multiplier, base, allowed_length, penalty_last_n, breakers) (abi 7), or
 * llama_sampler_init_dry(vocab, n_ctx_train, multiplier, ...) (abi 8: the library's own ABI, which
 * dryz/subject/binding.py detected);
 * llama_sampler_accept(s, t) for every t in history; llama_sampler_apply(s, array) on the candidate array
 * {ids[i], logits[i], p = 0}, selected -1, sorted; llama_sampler_free(s). Returns what the array holds
 * afterwards, read through the data pointer and size the sampler left: ids as int32 bytes, logits as float32
 * bytes, and the sorted flag. breakers: a sequence of str (passed as UTF-8); history and ids: sequences of
 * int; logits: a sequence of float. */
static PyObject *drive_run(PyObject *self, PyObject *args) {
    unsigned long long f_init, f_accept, f_apply, f_free, vocab;
    float multiplier, base;
    int abi, n_ctx_train, allowed, last_n, sorted_flag;
    PyObject *breakers_o, *history_o, *ids_o, *logits_o;
    if (!PyArg_ParseTuple(args, "KKKKKiiffiiOOOOp", &f_init, &f_accept, &f_apply, &f_free, &vocab, &abi,
                          &n_ctx_train, &multiplier, &base, &allowed, &last_n, &breakers_o, &history_o, &ids_o,
                          &logits_o, &sorted_flag))
        return NULL;

    PyObject *breakers = NULL, *history = NULL, *ids = NULL, *logits = NULL, *result = NULL;
    token_data *data = NULL;
    void *s = NULL;
    const char **texts = NULL;

    if (!(breakers = PySequence_Fast(breakers_o, "breakers must be a sequence")) ||
        !(history = PySequence_Fast(history_o, "history must be a sequence")) ||
        !(ids = PySequence_Fast(ids_o, "ids must be a sequence")) ||
        !(logits = PySequence_Fast(logits_o, "logits must be a sequence")))
        goto done;
    Py_ssize_t nb = PySequence_Fast_GET_SIZE(breakers), nh = PySequence_Fast_GET_SIZE(history);
    Py_ssize_t n = PySequence_Fast_GET_SIZE(ids);
    if (!(texts = malloc((nb ? nb : 1) * sizeof(const char *)))) {
        PyErr_NoMemory();
        goto done;
    }
    if (PySequence_Fast_GET_SIZE(logits) != n) {
        PyErr_SetString(PyExc_ValueError, "ids and logits differ in length");
        goto done;
    }
    for (Py_ssize_t i = 0; i < nb; ++i)
        if (!(texts[i] = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(breakers, i))))
            goto done;
    /* The token array: filled (and every conversion checked) before the library is called. */
    if (!(data = malloc((n ? n : 1) * sizeof(token_data)))) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; ++i) {
        long id = PyLong_AsLong(PySequence_Fast_GET_ITEM(ids, i));
        double lg = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(logits, i));
        if (PyErr_Occurred())
            goto done;
        data[i].id = (int32_t)id, data[i].logit = (float)lg, data[i].p = 0.0f;
    }
    int32_t *tokens = malloc((nh ? nh : 1) * sizeof(int32_t));
    if (!tokens) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < nh; ++i) {
        tokens[i] = (int32_t)PyLong_AsLong(PySequence_Fast_GET_ITEM(history, i));
        if (PyErr_Occurred()) {
            free(tokens);
            goto done;
        }
    }

    if (abi == 8)
        s = ((init_dry8_fn)(uintptr_t)f_init)((const void *)(uintptr_t)vocab, n_ctx_train, multiplier, base,
                                              allowed, last_n, nb ? texts : NULL, (size_t)nb);
    else
        s = ((init_dry_fn)(uintptr_t)f_init)((const void *)(uintptr_t)vocab, multiplier, base, allowed, last_n,
                                             nb ? texts : NULL, (size_t)nb);
    if (!s) {
        free(tokens);
        PyErr_SetString(PyExc_RuntimeError, "llama_sampler_init_dry returned NULL");
        goto done;
    }
    accept_fn accept = (accept_fn)(uintptr_t)f_accept;
    for (Py_ssize_t i = 0; i < nh; ++i)
        accept(s, tokens[i]);
    free(tokens);
    token_data_array arr = {data, (size_t)n, -1, sorted_flag != 0};
    ((apply_fn)(uintptr_t)f_apply)(s, &arr);
    ((free_fn)(uintptr_t)f_free)(s);

    /* What the sampler left, through the pointer and size it left (DRY never changes them). */
    PyObject *out_ids = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)arr.size * 4);
    PyObject *out_logits = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)arr.size * 4);
    if (out_ids && out_logits) {
        int32_t *oi = (int32_t *)PyBytes_AS_STRING(out_ids);
        float *ol = (float *)PyBytes_AS_STRING(out_logits);
        for (size_t i = 0; i < arr.size; ++i)
            oi[i] = arr.data[i].id, ol[i] = arr.data[i].logit;
        result = Py_BuildValue("(NNO)", out_ids, out_logits, arr.sorted ? Py_True : Py_False);
    } else {
        Py_XDECREF(out_ids);
        Py_XDECREF(out_logits);
    }

done:
    free(texts);
    free(data);
    Py_XDECREF(breakers);
    Py_XDECREF(history);
    Py_XDECREF(ids);
    Py_XDECREF(logits);
    return result;
}

/* layout() -> (sizeof token_data, offsets of id, logit, p, sizeof token_data_array, offsets of data, size,
 * selected, sorted): what this module assumes of llama.h, for the comparison with the bindings. */
static PyObject *drive_layout(PyObject *self, PyObject *noargs) {
    return Py_BuildValue("(nnnnnnnnn)", (Py_ssize_t)sizeof(token_data), (Py_ssize_t)offsetof(token_data, id),
                         (Py_ssize_t)offsetof(token_data, logit), (Py_ssize_t)offsetof(token_data, p),
                         (Py_ssize_t)sizeof(token_data_array), (Py_ssize_t)offsetof(token_data_array, data),
                         (Py_ssize_t)offsetof(token_data_array, size),
                         (Py_ssize_t)offsetof(token_data_array, selected),
                         (Py_ssize_t)offsetof(token_data_array, sorted));
}

static PyMethodDef methods[] = {
    {"run", drive_run, METH_VARARGS, "init a DRY sampler, accept the history, apply once to a candidate array, free"},
    {"layout", drive_layout, METH_NOARGS, "the llama.h struct layout this module assumes"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_drive", NULL, -1, methods};

PyMODINIT_FUNC PyInit__drive(void) { return PyModule_Create(&module); }
