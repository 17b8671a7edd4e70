/* dryz._drive: call libllama's sampler functions in a loop without a Python round trip per call.
 *
 * Nothing of the sampler is here: every function pointer is taken from the libllama that llama-cpp-python
 * loaded (passed in as integers by dryz/subject/libllama.py), and this module only sequences the calls and fills and
 * reads the candidate array. A llama_sampler_accept through ctypes costs ~0.8 us; here it costs what
 * libllama's own code costs. dryz/subject/libllama.py keeps a pure-ctypes path doing the same calls
 * (DRYZ_DRIVE=ctypes), and a test checks both give identical output.
 *
 * walk() is the tree walk of `dryz exhaustive` (plain and canonical trees, dryz/subject/walker.py): the same
 * clone/accept/apply/free sequence the Python runners made through ctypes, with the output kept in batches here.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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
typedef void *(*clone_fn)(void *);

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
/* The call sequence of one fresh run (run(), run_many()): init_dry with the configuration, every token of the
 * history accepted, one apply on the candidate array, the sampler freed. The array is read back by out_append.
 * Returns 0, or -1 when init_dry returned NULL (nothing was called then). */
typedef struct {
    unsigned long long init, accept, apply, free, vocab;
    int abi, n_ctx_train, allowed, last_n;
    float multiplier, base;
    const char **texts;
    Py_ssize_t nb;
} fresh_cfg;

static void *fresh_init(const fresh_cfg *c) {
    if (c->abi == 8)
        return ((init_dry8_fn)(uintptr_t)c->init)((const void *)(uintptr_t)c->vocab, c->n_ctx_train, c->multiplier,
                                                  c->base, c->allowed, c->last_n, c->nb ? c->texts : NULL,
                                                  (size_t)c->nb);
    return ((init_dry_fn)(uintptr_t)c->init)((const void *)(uintptr_t)c->vocab, c->multiplier, c->base, c->allowed,
                                             c->last_n, c->nb ? c->texts : NULL, (size_t)c->nb);
}

static int fresh_one(const fresh_cfg *c, const int32_t *tokens, Py_ssize_t nh, token_data_array *arr) {
    void *s = fresh_init(c);
    if (!s)
        return -1;
    accept_fn accept = (accept_fn)(uintptr_t)c->accept;
    for (Py_ssize_t i = 0; i < nh; ++i)
        accept(s, tokens[i]);
    ((apply_fn)(uintptr_t)c->apply)(s, arr);
    ((free_fn)(uintptr_t)c->free)(s);
    return 0;
}

/* Breaker strings as UTF-8 pointers (valid while `breakers`, a PySequence_Fast, lives). NULL on error. */
static const char **breaker_texts(PyObject *breakers, Py_ssize_t *nb) {
    *nb = PySequence_Fast_GET_SIZE(breakers);
    const char **texts = malloc((*nb ? *nb : 1) * sizeof(const char *));
    if (!texts) {
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < *nb; ++i)
        if (!(texts[i] = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(breakers, i)))) {
            free(texts);
            return NULL;
        }
    return texts;
}

static PyObject *drive_run(PyObject *self, PyObject *args) {
    fresh_cfg c;
    int sorted_flag;
    PyObject *breakers_o, *history_o, *ids_o, *logits_o;
    if (!PyArg_ParseTuple(args, "KKKKKiiffiiOOOOp", &c.init, &c.accept, &c.apply, &c.free, &c.vocab, &c.abi,
                          &c.n_ctx_train, &c.multiplier, &c.base, &c.allowed, &c.last_n, &breakers_o, &history_o,
                          &ids_o, &logits_o, &sorted_flag))
        return NULL;

    PyObject *breakers = NULL, *history = NULL, *ids = NULL, *logits = NULL, *result = NULL;
    token_data *data = NULL;
    int32_t *tokens = NULL;
    c.texts = NULL;

    if (!(breakers = PySequence_Fast(breakers_o, "breakers must be a sequence")) ||
        !(history = PySequence_Fast(history_o, "history must be a sequence")) ||
        !(ids = PySequence_Fast(ids_o, "ids must be a sequence")) ||
        !(logits = PySequence_Fast(logits_o, "logits must be a sequence")))
        goto done;
    Py_ssize_t nh = PySequence_Fast_GET_SIZE(history), n = PySequence_Fast_GET_SIZE(ids);
    if (!(c.texts = breaker_texts(breakers, &c.nb)))
        goto done;
    if (PySequence_Fast_GET_SIZE(logits) != n) {
        PyErr_SetString(PyExc_ValueError, "ids and logits differ in length");
        goto done;
    }
    /* The token array and the history: filled (and every conversion checked) before the library is called. */
    if (!(data = malloc((n ? n : 1) * sizeof(token_data))) || !(tokens = malloc((nh ? nh : 1) * sizeof(int32_t)))) {
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
    for (Py_ssize_t i = 0; i < nh; ++i) {
        tokens[i] = (int32_t)PyLong_AsLong(PySequence_Fast_GET_ITEM(history, i));
        if (PyErr_Occurred())
            goto done;
    }
    token_data_array arr = {data, (size_t)n, -1, sorted_flag != 0};
    if (fresh_one(&c, tokens, nh, &arr) < 0) {
        PyErr_SetString(PyExc_RuntimeError, "llama_sampler_init_dry returned NULL");
        goto done;
    }

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
    free(c.texts);
    free(data);
    free(tokens);
    Py_XDECREF(breakers);
    Py_XDECREF(history);
    Py_XDECREF(ids);
    Py_XDECREF(logits);
    return result;
}

/* ---- many applies in one call: run_many (fresh samplers) and run_trace (one sampler's events) -------------
 *
 * Both take their inputs as flat buffers (bytes or any buffer): int32 tokens, int32 candidate ids, float32
 * logits, one int32 size per apply and one byte (sorted flag) per apply; and return what each apply left, flat:
 * (ids int32 bytes, logits float32 bytes, sizes int32 bytes, sorted bytes), read through the data pointer and
 * size the sampler left (as run() reads them). */

typedef struct {
    int32_t *ids;
    float *logits;
    size_t len, cap;
    int32_t *sizes;
    char *sorted;
    size_t n;
} outbuf_t;

static int out_append(outbuf_t *o, const token_data_array *arr) {
    if (o->len + arr->size > o->cap) {
        size_t cap = (o->len + arr->size) * 2 + 16;
        int32_t *ids = realloc(o->ids, cap * sizeof(int32_t));
        if (!ids)
            return -1;
        o->ids = ids;
        float *logits = realloc(o->logits, cap * sizeof(float));
        if (!logits)
            return -1;
        o->logits = logits, o->cap = cap;
    }
    for (size_t i = 0; i < arr->size; ++i)
        o->ids[o->len + i] = arr->data[i].id, o->logits[o->len + i] = arr->data[i].logit;
    o->len += arr->size;
    o->sizes[o->n] = (int32_t)arr->size;
    o->sorted[o->n] = arr->sorted ? 1 : 0;
    o->n++;
    return 0;
}

static PyObject *out_result(outbuf_t *o) {
    return Py_BuildValue("(y#y#y#y#)", (const char *)o->ids, (Py_ssize_t)(o->len * 4), (const char *)o->logits,
                         (Py_ssize_t)(o->len * 4), (const char *)o->sizes, (Py_ssize_t)(o->n * 4), o->sorted,
                         (Py_ssize_t)o->n);
}

static void out_free(outbuf_t *o) {
    free(o->ids);
    free(o->logits);
    free(o->sizes);
    free(o->sorted);
}

/* The candidate arrays of n applies: sizes (int32 per apply) over ids and logits; checked to add up. */
typedef struct {
    Py_buffer tok, cnt, ids, logits, sizes, sorted;
    int have;
} flat_in;

static void flat_release(flat_in *f) {
    Py_buffer *b[6] = {&f->tok, &f->cnt, &f->ids, &f->logits, &f->sizes, &f->sorted};
    for (int i = 0; i < f->have; ++i)
        PyBuffer_Release(b[i]);
    f->have = 0;
}

static int flat_get(flat_in *f, PyObject *tok, PyObject *cnt, PyObject *ids, PyObject *logits, PyObject *sizes,
                    PyObject *sorted) {
    PyObject *o[6] = {tok, cnt, ids, logits, sizes, sorted};
    Py_buffer *b[6] = {&f->tok, &f->cnt, &f->ids, &f->logits, &f->sizes, &f->sorted};
    f->have = 0;
    for (int i = 0; i < 6; ++i) {
        if (PyObject_GetBuffer(o[i], b[i], PyBUF_SIMPLE) < 0)
            return -1;
        f->have++;
    }
    for (int i = 0; i < 5; ++i)
        if (b[i]->len % 4) {
            PyErr_SetString(PyExc_ValueError, "tokens, counts, ids, logits and sizes must be 4-byte items");
            return -1;
        }
    Py_ssize_t napply = f->sizes.len / 4, total = 0;
    const int32_t *sz = f->sizes.buf;
    for (Py_ssize_t i = 0; i < napply; ++i) {
        if (sz[i] < 0) {
            PyErr_SetString(PyExc_ValueError, "a negative candidate count");
            return -1;
        }
        total += sz[i];
    }
    if (f->sorted.len != napply || total != f->ids.len / 4 || f->ids.len != f->logits.len) {
        PyErr_SetString(PyExc_ValueError, "candidate arrays: sizes, ids, logits and sorted flags do not add up");
        return -1;
    }
    const int32_t *cn = f->cnt.buf;
    total = 0;
    for (Py_ssize_t i = 0; i < f->cnt.len / 4; ++i) {
        if (cn[i] < 0) {
            PyErr_SetString(PyExc_ValueError, "a negative token count");
            return -1;
        }
        total += cn[i];
    }
    if (total != f->tok.len / 4) {
        PyErr_SetString(PyExc_ValueError, "token counts do not add up to the tokens given");
        return -1;
    }
    return 0;
}

/* The largest candidate array (a scratch array of that size is filled per apply). */
static Py_ssize_t flat_max_size(const flat_in *f) {
    Py_ssize_t m = 1;
    const int32_t *sz = f->sizes.buf;
    for (Py_ssize_t i = 0; i < f->sizes.len / 4; ++i)
        if (sz[i] > m)
            m = sz[i];
    return m;
}

/* What run_many and run_trace both hold before their first call: the breakers' texts in c, a scratch array for
 * the largest candidate array, and the output's per-array buffers for n arrays. 0, or -1 with the exception set
 * (what was made is freed by the caller's cleanup). */
static int batch_buffers(fresh_cfg *c, PyObject *breakers_o, PyObject **breakers, const flat_in *f, outbuf_t *o,
                         token_data **scratch, Py_ssize_t n) {
    if (!(*breakers = PySequence_Fast(breakers_o, "breakers must be a sequence")) ||
        !(c->texts = breaker_texts(*breakers, &c->nb)))
        return -1;
    if (!(*scratch = malloc(flat_max_size(f) * sizeof(token_data))) ||
        !(o->sizes = malloc((n ? n : 1) * sizeof(int32_t))) || !(o->sorted = malloc(n ? n : 1))) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* batch_buffers' counterpart, with the input's buffers: everything run_many and run_trace hold, freed. */
static void batch_release(flat_in *f, outbuf_t *o, token_data *scratch, fresh_cfg *c, PyObject *breakers) {
    flat_release(f);
    out_free(o);
    free(scratch);
    free(c->texts);
    Py_XDECREF(breakers);
}

static void fill(token_data *d, const int32_t *ids, const float *logits, int32_t n) {
    for (int32_t i = 0; i < n; ++i)
        d[i].id = ids[i], d[i].logit = logits[i], d[i].p = 0.0f;
}

/* run_many(fns, vocab, abi, n_ctx_train, multiplier, base, allowed_length, penalty_last_n, breakers,
 *          tokens, counts, ids, logits, sizes, sorted[, clone]) -> (ids, logits, sizes, sorted)
 *
 * fns: (init_dry, accept, apply, free, clone). Case i: a fresh sampler (init_dry with the configuration, as run()
 * makes it), the next counts[i] tokens accepted, one apply on the next sizes[i] candidates, freed: run()'s
 * sequence (fresh_one) for each case, all with one configuration. With clone true, one sampler is made by
 * init_dry first and never accepts a token, and each case runs on llama_sampler_clone of it instead (run_clone's
 * sequence: the clone copies the parameters, the processed breakers and the empty state); it is freed last. */
static PyObject *drive_run_many(PyObject *self, PyObject *args) {
    fresh_cfg c;
    unsigned long long f_clone;
    int use_clone = 0;
    void *proto = NULL;
    PyObject *breakers_o, *tok_o, *cnt_o, *ids_o, *logits_o, *sizes_o, *sorted_o;
    if (!PyArg_ParseTuple(args, "(KKKKK)KiiffiiOOOOOOO|p", &c.init, &c.accept, &c.apply, &c.free, &f_clone,
                          &c.vocab, &c.abi, &c.n_ctx_train, &c.multiplier, &c.base, &c.allowed, &c.last_n,
                          &breakers_o, &tok_o, &cnt_o, &ids_o, &logits_o, &sizes_o, &sorted_o, &use_clone))
        return NULL;
    flat_in f = {0};
    outbuf_t o = {0};
    PyObject *breakers = NULL, *result = NULL;
    token_data *scratch = NULL;
    c.texts = NULL;
    if (flat_get(&f, tok_o, cnt_o, ids_o, logits_o, sizes_o, sorted_o) < 0)
        goto done;
    Py_ssize_t ncase = f.sizes.len / 4;
    if (f.cnt.len / 4 != ncase) {
        PyErr_SetString(PyExc_ValueError, "run_many: one token count per case");
        goto done;
    }
    if (batch_buffers(&c, breakers_o, &breakers, &f, &o, &scratch, ncase) < 0)
        goto done;
    const int32_t *tok = f.tok.buf, *cnt = f.cnt.buf, *ids = f.ids.buf, *sz = f.sizes.buf;
    const float *lg = f.logits.buf;
    const char *srt = f.sorted.buf;
    if (use_clone && !(proto = fresh_init(&c))) {
        PyErr_SetString(PyExc_RuntimeError, "llama_sampler_init_dry returned NULL");
        goto done;
    }
    for (Py_ssize_t i = 0; i < ncase; ++i) {
        fill(scratch, ids, lg, sz[i]);
        token_data_array arr = {scratch, (size_t)sz[i], -1, srt[i] != 0};
        if (use_clone) {
            void *s = ((clone_fn)(uintptr_t)f_clone)(proto);
            if (!s) {
                PyErr_SetString(PyExc_RuntimeError, "llama_sampler_clone returned NULL");
                goto done;
            }
            accept_fn accept = (accept_fn)(uintptr_t)c.accept;
            for (int32_t k = 0; k < cnt[i]; ++k)
                accept(s, tok[k]);
            ((apply_fn)(uintptr_t)c.apply)(s, &arr);
            ((free_fn)(uintptr_t)c.free)(s);
        } else if (fresh_one(&c, tok, cnt[i], &arr) < 0) {
            PyErr_SetString(PyExc_RuntimeError, "llama_sampler_init_dry returned NULL");
            goto done;
        }
        if (out_append(&o, &arr) < 0) {
            PyErr_NoMemory();
            goto done;
        }
        tok += cnt[i], ids += sz[i], lg += sz[i];
    }
    result = out_result(&o);
done:
    if (proto)
        ((free_fn)(uintptr_t)c.free)(proto);
    batch_release(&f, &o, scratch, &c, breakers);
    return result;
}

/* run_trace(fns, vocab, abi, n_ctx_train, multiplier, base, allowed_length, penalty_last_n, breakers, ops,
 *           tokens, counts, ids, logits, sizes, sorted) -> (ids, logits, sizes, sorted)
 *
 * fns: (init_dry, clone, accept, apply, reset, free). One sampler made by init_dry (as run() makes it), then one
 * event per byte of ops, in order: 'a' accept the next counts[j] tokens (j: the accept's number), 'p' apply to the
 * next candidate array (its size from sizes, its sorted flag from sorted), 'r' reset, 'c' clone and continue on
 * the clone (the original kept alive, untouched), 'f' free the current sampler (only as the last event).
 * Afterwards the current sampler (unless freed) and then the kept originals, newest first, are freed: every
 * sampler made is freed exactly once, also on an error (clone returning NULL, a bad op). */
#define TRACE_MAX_SAMPLERS 1024

static PyObject *drive_run_trace(PyObject *self, PyObject *args) {
    fresh_cfg c;
    unsigned long long f_clone, f_reset;
    PyObject *breakers_o, *ops_o, *tok_o, *cnt_o, *ids_o, *logits_o, *sizes_o, *sorted_o;
    if (!PyArg_ParseTuple(args, "(KKKKKK)KiiffiiOOOOOOOO", &c.init, &f_clone, &c.accept, &c.apply, &f_reset,
                          &c.free, &c.vocab, &c.abi, &c.n_ctx_train, &c.multiplier, &c.base, &c.allowed,
                          &c.last_n, &breakers_o, &ops_o, &tok_o, &cnt_o, &ids_o, &logits_o, &sizes_o, &sorted_o))
        return NULL;
    flat_in f = {0};
    outbuf_t o = {0};
    Py_buffer ops = {0};
    int have_ops = 0;
    PyObject *breakers = NULL, *result = NULL;
    token_data *scratch = NULL;
    void *live[TRACE_MAX_SAMPLERS];
    int nlive = 0, cur_freed = 0;
    c.texts = NULL;
    if (flat_get(&f, tok_o, cnt_o, ids_o, logits_o, sizes_o, sorted_o) < 0)
        goto done;
    if (PyObject_GetBuffer(ops_o, &ops, PyBUF_SIMPLE) < 0)
        goto done;
    have_ops = 1;
    /* The events, checked before the library is called: counts and arrays match the ops, free only last. */
    const char *op = ops.buf;
    Py_ssize_t nops = ops.len, n_acc = 0, n_app = 0, n_clone = 0;
    for (Py_ssize_t i = 0; i < nops; ++i) {
        switch (op[i]) {
        case 'a': n_acc++; break;
        case 'p': n_app++; break;
        case 'c': n_clone++; break;
        case 'r': break;
        case 'f':
            if (i == nops - 1)
                break;
            /* fall through */
        default:
            PyErr_SetString(PyExc_ValueError, "run_trace: bad event (free only as the last event)");
            goto done;
        }
    }
    if (n_acc != f.cnt.len / 4 || n_app != f.sizes.len / 4 || n_clone >= TRACE_MAX_SAMPLERS) {
        PyErr_SetString(PyExc_ValueError, "run_trace: the events do not match the token counts and arrays");
        goto done;
    }
    if (batch_buffers(&c, breakers_o, &breakers, &f, &o, &scratch, n_app) < 0)
        goto done;
    void *s = fresh_init(&c);
    if (!s) {
        PyErr_SetString(PyExc_RuntimeError, "llama_sampler_init_dry returned NULL");
        goto done;
    }
    live[nlive++] = s;
    accept_fn accept = (accept_fn)(uintptr_t)c.accept;
    apply_fn apply = (apply_fn)(uintptr_t)c.apply;
    const int32_t *tok = f.tok.buf, *cnt = f.cnt.buf, *ids = f.ids.buf, *sz = f.sizes.buf;
    const float *lg = f.logits.buf;
    const char *srt = f.sorted.buf;
    for (Py_ssize_t i = 0; i < nops; ++i) {
        void *cur = live[nlive - 1];
        switch (op[i]) {
        case 'a':
            for (int32_t k = 0; k < *cnt; ++k)
                accept(cur, tok[k]);
            tok += *cnt++;
            break;
        case 'p': {
            fill(scratch, ids, lg, *sz);
            token_data_array arr = {scratch, (size_t)*sz, -1, *srt != 0};
            apply(cur, &arr);
            if (out_append(&o, &arr) < 0) {
                PyErr_NoMemory();
                goto done;
            }
            ids += *sz, lg += *sz, srt++, sz++;
            break;
        }
        case 'r':
            ((void (*)(void *))(uintptr_t)f_reset)(cur);
            break;
        case 'c': {
            void *k = ((clone_fn)(uintptr_t)f_clone)(cur);
            if (!k) {
                PyErr_SetString(PyExc_RuntimeError, "llama_sampler_clone returned NULL");
                goto done;
            }
            live[nlive++] = k;
            break;
        }
        case 'f':
            cur_freed = 1; /* marked first: a free that fails is never retried */
            ((free_fn)(uintptr_t)c.free)(cur);
            break;
        }
    }
    result = out_result(&o);
done:
    /* the current sampler (unless a free event freed it), then the kept originals, newest first */
    for (int i = nlive - 1; i >= 0; --i)
        if (!(i == nlive - 1 && cur_freed))
            ((free_fn)(uintptr_t)c.free)(live[i]);
    if (have_ops)
        PyBuffer_Release(&ops);
    batch_release(&f, &o, scratch, &c, breakers);
    return result;
}

/* run_clone(clone, accept, apply, free, proto, history, ids, logits, sorted) -> (ids bytes, logits bytes, sorted)
 *
 * run() on a sampler made once: s = llama_sampler_clone(proto) (proto: an initialized DRY sampler that never
 * accepted a token, so its clone is what init_dry with the same arguments returns: the clone copies the
 * parameters, the processed breakers and the empty state), llama_sampler_accept(s, t) for every t in history,
 * llama_sampler_apply(s, array) as run() fills it, llama_sampler_free(s). For a real vocabulary, where
 * init_dry's breaker processing costs tens of milliseconds. With reuse true the first address is
 * llama_sampler_reset instead: the prototype is reset and used itself (no clone, no free; DRYZ_VOCAB_SAMPLER=reset:
 * the clone copies the processed breakers, ~0.1-0.3 ms on llama-bpe with the default breakers). */


static PyObject *drive_run_clone(PyObject *self, PyObject *args) {
    unsigned long long f_clone, f_accept, f_apply, f_free, proto;
    int sorted_flag, reuse = 0;
    PyObject *history_o, *ids_o, *logits_o;
    if (!PyArg_ParseTuple(args, "KKKKKOOOp|p", &f_clone, &f_accept, &f_apply, &f_free, &proto, &history_o, &ids_o,
                          &logits_o, &sorted_flag, &reuse))
        return NULL;
    PyObject *history = NULL, *ids = NULL, *logits = NULL, *result = NULL;
    token_data *data = NULL;
    int32_t *tokens = NULL;
    if (!(history = PySequence_Fast(history_o, "history must be a sequence")) ||
        !(ids = PySequence_Fast(ids_o, "ids must be a sequence")) ||
        !(logits = PySequence_Fast(logits_o, "logits must be a sequence")))
        goto done;
    Py_ssize_t nh = PySequence_Fast_GET_SIZE(history), n = PySequence_Fast_GET_SIZE(ids);
    if (PySequence_Fast_GET_SIZE(logits) != n) {
        PyErr_SetString(PyExc_ValueError, "ids and logits differ in length");
        goto done;
    }
    if (!(data = malloc((n ? n : 1) * sizeof(token_data))) || !(tokens = malloc((nh ? nh : 1) * sizeof(int32_t)))) {
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
    for (Py_ssize_t i = 0; i < nh; ++i) {
        tokens[i] = (int32_t)PyLong_AsLong(PySequence_Fast_GET_ITEM(history, i));
        if (PyErr_Occurred())
            goto done;
    }
    void *s;
    if (reuse) { /* f_clone is llama_sampler_reset: the prototype itself, reset (no clone, no free) */
        s = (void *)(uintptr_t)proto;
        ((void (*)(void *))(uintptr_t)f_clone)(s);
    } else
        s = ((void *(*)(void *))(uintptr_t)f_clone)((void *)(uintptr_t)proto);
    if (!s) {
        PyErr_SetString(PyExc_RuntimeError, "llama_sampler_clone returned NULL");
        goto done;
    }
    accept_fn accept = (accept_fn)(uintptr_t)f_accept;
    for (Py_ssize_t i = 0; i < nh; ++i)
        accept(s, tokens[i]);
    token_data_array arr = {data, (size_t)n, -1, sorted_flag != 0};
    ((apply_fn)(uintptr_t)f_apply)(s, &arr);
    if (!reuse)
        ((free_fn)(uintptr_t)f_free)(s);
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
    free(tokens);
    free(data);
    Py_XDECREF(history);
    Py_XDECREF(ids);
    Py_XDECREF(logits);
    return result;
}

/* ---- walk: a depth-first walk of a history tree, every call to the library made here ---------------------
 *
 * walk(fns, vocab, abi, n_ctx_train, multiplier, base, allowed_length, penalty_last_n, breakers,
 *      kid_off, kid_tok, kid_m, cand_off, cand_ids, caps, roots, max_len, emit, changed_exc, check_every)
 *   -> number of histories applied
 *
 * fns: (init_dry, clone, accept, apply, free) addresses. The tree has S = len(kid_off) - 1 states m; a node
 * in state m has the children kid_off[m] .. kid_off[m+1]-1 (token kid_tok[i], state kid_m[i]) in walk order
 * and the candidates cand_ids[cand_off[m] .. cand_off[m+1]-1] (all int32 arrays, as bytes). caps: int64
 * bytes, (max_len + 1) * S batch capacities, rows, per (length n, state m). roots: a sequence of
 * (prefix tokens, state m): per root a new sampler (init_dry with the arguments as run() passes them), the
 * prefix accepted, then every history prefix + x with 1 <= len(x), len(prefix + x) <= max_len, one apply each.
 *
 * A child's sampler is a llama_sampler_clone of its parent's after the parent's apply, then one accept of the
 * child's token; the last child takes its parent's sampler over instead of a clone, so every sampler is freed
 * exactly once (at a leaf, or when its subtree is done) and at most one sampler per depth is alive. Each apply
 * runs on a candidate array {ids = the state's candidates, logit 0, p 0}, selected -1, unsorted; afterwards the
 * array must hold the same data pointer, size and ids (else changed_exc is raised), and its logits are copied
 * out. Output per (n, m) group: the token history (n int64) and the logits (float32 per candidate) of each
 * history, in bytearrays of caps rows; a full group (and every group at the end, in (n, m) order) is handed to
 * emit(n, m, H bytearray, logits bytearray) and a new pair is allocated.
 *
 * The GIL is released while the library runs and taken back for emit, for allocations, and every check_every
 * histories for PyErr_CheckSignals (a KeyboardInterrupt stops the walk there). On any error every live
 * sampler is freed before returning NULL (with the error set aside meanwhile). */

typedef struct {
    PyObject *H, *L;     /* the batch being filled (bytearrays of cap rows), or NULL */
    int64_t *h;
    float *l;
    Py_ssize_t fill, cap;
} group_t;

typedef struct {
    clone_fn clone;
    accept_fn accept;
    apply_fn apply;
    free_fn free;
    int S, max_len;
    const int32_t *kid_off, *kid_tok, *kid_m, *cand_off, *cand_ids;
    group_t *groups;       /* (max_len + 1) * S */
    token_data *scratch;   /* one candidate array of the largest candidate count */
    int64_t path[256];     /* the tokens of the current history */
    PyObject *emit, *changed_exc;
    PyThreadState *ts;     /* non-NULL while the GIL is released */
    PyObject *et, *ev, *etb; /* the walk's error, held while the live samplers are freed */
    long long applied, check_every, until_check;
} walker_t;

#define WALK_MAX_LEN 256

static inline void gil_take(walker_t *w) {
    if (w->ts) {
        PyEval_RestoreThread(w->ts);
        w->ts = NULL;
    }
}

static inline void gil_drop(walker_t *w) {
    if (!w->ts)
        w->ts = PyEval_SaveThread();
}

/* An error was set (GIL held): keep it aside, so the samplers are freed with no exception pending (the
 * library does not care; a test's ctypes wrappers of the library's functions do). */
static int failed(walker_t *w) {
    gil_take(w);
    PyErr_Fetch(&w->et, &w->ev, &w->etb);
    return -1;
}

/* Hand group g's batch to emit (GIL held). 0 on success. */
static int group_flush(walker_t *w, int n, int m) {
    group_t *g = &w->groups[n * w->S + m];
    if (!g->H || !g->fill)
        return 0;
    int c = w->cand_off[m + 1] - w->cand_off[m];
    PyObject *H = g->H, *L = g->L;
    Py_ssize_t fill = g->fill;
    g->H = g->L = NULL, g->h = NULL, g->l = NULL, g->fill = 0;
    int rc = -1;
    if (fill < g->cap && (PyByteArray_Resize(H, fill * n * 8) < 0 || PyByteArray_Resize(L, fill * c * 4) < 0))
        goto done;
    PyObject *r = PyObject_CallFunction(w->emit, "iiOO", n, m, H, L);
    if (r) {
        Py_DECREF(r);
        rc = 0;
    }
done:
    Py_DECREF(H);
    Py_DECREF(L);
    return rc;
}

/* Apply s to a fresh candidate array of state m and record the history path[0..n) in group (n, m).
 * 0 on success, -1 with an exception set (the caller still owns s). */
static int record(walker_t *w, void *s, int n, int m) {
    group_t *g = &w->groups[n * w->S + m];
    int c = w->cand_off[m + 1] - w->cand_off[m];
    const int32_t *ids = w->cand_ids + w->cand_off[m];
    if (!g->H) {
        gil_take(w);
        g->H = PyByteArray_FromStringAndSize(NULL, g->cap * n * 8);
        g->L = PyByteArray_FromStringAndSize(NULL, g->cap * c * 4);
        if (!g->H || !g->L) {
            Py_CLEAR(g->H);
            Py_CLEAR(g->L);
            return failed(w);
        }
        g->h = (int64_t *)PyByteArray_AS_STRING(g->H);
        g->l = (float *)PyByteArray_AS_STRING(g->L);
        g->fill = 0;
        gil_drop(w);
    }
    token_data *d = w->scratch;
    for (int i = 0; i < c; ++i)
        d[i].id = ids[i], d[i].logit = 0.0f, d[i].p = 0.0f;
    token_data_array arr = {d, (size_t)c, -1, false};
    w->apply(s, &arr);
    if (arr.data != d || arr.size != (size_t)c) {
        gil_take(w);
        PyErr_SetString(w->changed_exc, "the sampler changed the candidate array's size or data pointer");
        return failed(w);
    }
    float *lo = g->l + g->fill * c;
    for (int i = 0; i < c; ++i) {
        if (d[i].id != ids[i]) {
            gil_take(w);
            PyErr_SetString(w->changed_exc, "the sampler changed candidate ids in the array (DRY must not)");
            return failed(w);
        }
        lo[i] = d[i].logit;
    }
    int64_t *ho = g->h + g->fill * n;
    for (int i = 0; i < n; ++i)
        ho[i] = w->path[i];
    w->applied++;
    if (++g->fill == g->cap) {
        gil_take(w);
        if (group_flush(w, n, m) < 0)
            return failed(w);
        gil_drop(w);
    }
    if (--w->until_check <= 0) {
        w->until_check = w->check_every;
        gil_take(w);
        if (PyErr_CheckSignals() < 0)
            return failed(w);
        gil_drop(w);
    }
    return 0;
}

/* The subtree below a node of depth `depth` in state m whose sampler is s (already applied, or the root).
 * Takes ownership of s: it is freed (or handed to the last child) on every path. */
static int visit(walker_t *w, void *s, int depth, int m) {
    int lo = w->kid_off[m], hi = w->kid_off[m + 1];
    int n = depth + 1;
    if (lo == hi) {
        w->free(s);
        return 0;
    }
    for (int i = lo; i < hi; ++i) {
        int last = i == hi - 1;
        void *c = last ? s : w->clone(s);
        if (!c) {
            w->free(s);
            gil_take(w);
            PyErr_SetString(PyExc_RuntimeError, "llama_sampler_clone returned NULL");
            return failed(w);
        }
        int32_t t = w->kid_tok[i];
        int mc = w->kid_m[i];
        w->path[depth] = t;
        w->accept(c, t);
        if (record(w, c, n, mc) < 0) {
            w->free(c);
            if (!last)
                w->free(s);
            return -1;
        }
        if (n < w->max_len) {
            if (visit(w, c, n, mc) < 0) {
                if (!last)
                    w->free(s);
                return -1;
            }
        } else {
            w->free(c);
        }
    }
    return 0;
}

static int as_int32s(PyObject *o, Py_buffer *b, const char *what) {
    if (PyObject_GetBuffer(o, b, PyBUF_SIMPLE) < 0)
        return -1;
    if (b->len % 4) {
        PyBuffer_Release(b);
        b->obj = NULL;
        PyErr_Format(PyExc_ValueError, "%s: not int32 bytes", what);
        return -1;
    }
    return 0;
}

static PyObject *drive_walk(PyObject *self, PyObject *args) {
    unsigned long long f_init, f_clone, f_accept, f_apply, f_free, vocab;
    float multiplier, base;
    int abi, n_ctx_train, allowed, last_n, max_len;
    long long check_every;
    PyObject *breakers_o, *kid_off_o, *kid_tok_o, *kid_m_o, *cand_off_o, *cand_ids_o, *caps_o, *roots_o, *emit,
        *changed_exc;
    if (!PyArg_ParseTuple(args, "(KKKKK)KiiffiiOOOOOOOOiOOL", &f_init, &f_clone, &f_accept, &f_apply, &f_free,
                          &vocab, &abi, &n_ctx_train, &multiplier, &base, &allowed, &last_n, &breakers_o,
                          &kid_off_o, &kid_tok_o, &kid_m_o, &cand_off_o, &cand_ids_o, &caps_o, &roots_o, &max_len,
                          &emit, &changed_exc, &check_every))
        return NULL;

    Py_buffer bufs[6];
    PyObject *objs[6] = {kid_off_o, kid_tok_o, kid_m_o, cand_off_o, cand_ids_o, caps_o};
    const char *names[6] = {"kid_off", "kid_tok", "kid_m", "cand_off", "cand_ids", "caps"};
    int nbufs = 0;
    PyObject *breakers = NULL, *roots = NULL, *result = NULL;
    const char **texts = NULL;
    walker_t w;
    memset(&w, 0, sizeof w);
    for (; nbufs < 6; ++nbufs)
        if (as_int32s(objs[nbufs], &bufs[nbufs], names[nbufs]) < 0)
            goto done;
    if (!PyCallable_Check(emit)) {
        PyErr_SetString(PyExc_TypeError, "emit must be callable");
        goto done;
    }
    if (max_len < 0 || max_len >= WALK_MAX_LEN) {
        PyErr_Format(PyExc_ValueError, "max_len must be in 0..%d", WALK_MAX_LEN - 1);
        goto done;
    }
    /* The tables, checked once here so the walk itself trusts them. */
    Py_ssize_t n_off = bufs[0].len / 4, n_kids = bufs[1].len / 4, n_coff = bufs[3].len / 4,
               n_cand = bufs[4].len / 4;
    w.S = (int)(n_off - 1);
    w.max_len = max_len;
    w.kid_off = bufs[0].buf, w.kid_tok = bufs[1].buf, w.kid_m = bufs[2].buf;
    w.cand_off = bufs[3].buf, w.cand_ids = bufs[4].buf;
    if (w.S < 1 || n_coff != n_off || bufs[2].len != bufs[1].len ||
        bufs[5].len != (Py_ssize_t)(max_len + 1) * w.S * 8 || w.kid_off[0] != 0 || w.kid_off[w.S] != n_kids ||
        w.cand_off[0] != 0 || w.cand_off[w.S] != n_cand) {
        PyErr_SetString(PyExc_ValueError, "walk: inconsistent tree tables");
        goto done;
    }
    int cmax = 0;
    for (int m = 0; m < w.S; ++m) {
        if (w.kid_off[m + 1] < w.kid_off[m] || w.cand_off[m + 1] < w.cand_off[m]) {
            PyErr_SetString(PyExc_ValueError, "walk: offsets must not decrease");
            goto done;
        }
        if (w.cand_off[m + 1] - w.cand_off[m] > cmax)
            cmax = w.cand_off[m + 1] - w.cand_off[m];
    }
    for (Py_ssize_t i = 0; i < n_kids; ++i)
        if (w.kid_m[i] < 0 || w.kid_m[i] >= w.S) {
            PyErr_SetString(PyExc_ValueError, "walk: a child's state is out of range");
            goto done;
        }
    const int64_t *caps = bufs[5].buf;
    if (!(w.groups = calloc((size_t)(max_len + 1) * w.S, sizeof(group_t))) ||
        !(w.scratch = malloc((cmax ? cmax : 1) * sizeof(token_data)))) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < (Py_ssize_t)(max_len + 1) * w.S; ++i)
        w.groups[i].cap = caps[i] > 0 ? caps[i] : 1;
    w.clone = (clone_fn)(uintptr_t)f_clone, w.accept = (accept_fn)(uintptr_t)f_accept;
    w.apply = (apply_fn)(uintptr_t)f_apply, w.free = (free_fn)(uintptr_t)f_free;
    w.emit = emit, w.changed_exc = changed_exc;
    w.check_every = w.until_check = check_every > 0 ? check_every : 1;

    if (!(breakers = PySequence_Fast(breakers_o, "breakers must be a sequence")) ||
        !(roots = PySequence_Fast(roots_o, "roots must be a sequence")))
        goto done;
    Py_ssize_t nb = PySequence_Fast_GET_SIZE(breakers), nr = PySequence_Fast_GET_SIZE(roots);
    if (!(texts = malloc((nb ? nb : 1) * sizeof(const char *)))) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < nb; ++i)
        if (!(texts[i] = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(breakers, i))))
            goto done;

    for (Py_ssize_t r = 0; r < nr; ++r) {
        /* The root: its prefix tokens converted (and checked) before the library is called. */
        int32_t prefix[WALK_MAX_LEN];
        PyObject *tokens_o, *root = PySequence_Fast_GET_ITEM(roots, r);
        int m0;
        if (!PyArg_ParseTuple(root, "Oi", &tokens_o, &m0))
            goto done;
        PyObject *tokens = PySequence_Fast(tokens_o, "a root's prefix must be a sequence");
        if (!tokens)
            goto done;
        Py_ssize_t np_ = PySequence_Fast_GET_SIZE(tokens);
        if (np_ >= WALK_MAX_LEN || m0 < 0 || m0 >= w.S) {
            Py_DECREF(tokens);
            PyErr_SetString(PyExc_ValueError, "walk: a root's prefix is too long or its state out of range");
            goto done;
        }
        for (Py_ssize_t i = 0; i < np_; ++i)
            prefix[i] = (int32_t)PyLong_AsLong(PySequence_Fast_GET_ITEM(tokens, i));
        Py_DECREF(tokens);
        if (PyErr_Occurred())
            goto done;
        if (np_ >= max_len)
            continue;  /* nothing below it within max_len */
        void *s;
        if (abi == 8)
            s = ((init_dry8_fn)(uintptr_t)f_init)((const void *)(uintptr_t)vocab, n_ctx_train, multiplier, base,
                                                  allowed, last_n, nb ? texts : NULL, (size_t)nb);
        else
            s = ((init_dry_fn)(uintptr_t)f_init)((const void *)(uintptr_t)vocab, multiplier, base, allowed,
                                                 last_n, nb ? texts : NULL, (size_t)nb);
        if (!s) {
            PyErr_SetString(PyExc_RuntimeError, "llama_sampler_init_dry returned NULL");
            goto done;
        }
        gil_drop(&w);
        for (Py_ssize_t i = 0; i < np_; ++i) {
            w.path[i] = prefix[i];
            w.accept(s, prefix[i]);
        }
        int rc = visit(&w, s, (int)np_, m0);
        gil_take(&w);
        if (rc < 0) {
            PyErr_Restore(w.et, w.ev, w.etb);
            goto done;
        }
    }
    /* The rest of every batch, in (n, m) order. */
    for (int n = 1; n <= max_len; ++n)
        for (int m = 0; m < w.S; ++m)
            if (group_flush(&w, n, m) < 0)
                goto done;
    result = PyLong_FromLongLong(w.applied);

done:
    gil_take(&w);
    if (w.groups)
        for (Py_ssize_t i = 0; i < (Py_ssize_t)(max_len + 1) * w.S; ++i) {
            Py_XDECREF(w.groups[i].H);
            Py_XDECREF(w.groups[i].L);
        }
    free(w.groups);
    free(w.scratch);
    free(texts);
    Py_XDECREF(breakers);
    Py_XDECREF(roots);
    for (int i = 0; i < nbufs; ++i)
        PyBuffer_Release(&bufs[i]);
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
    {"run_clone", drive_run_clone, METH_VARARGS, "clone an initialized sampler, accept the history, apply once, free"},
    {"run_many", drive_run_many, METH_VARARGS, "run() for many cases of one configuration: fresh samplers, flat buffers"},
    {"run_trace", drive_run_trace, METH_VARARGS, "one sampler through a trace's events; every apply's output, flat"},
    {"walk", drive_walk, METH_VARARGS, "walk a history tree depth-first with llama_sampler_clone, output in batches"},
    {"layout", drive_layout, METH_NOARGS, "the llama.h struct layout this module assumes"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_drive", NULL, -1, methods};

PyMODINIT_FUNC PyInit__drive(void) { return PyModule_Create(&module); }
