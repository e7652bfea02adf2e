/* hostlib._native: the native engine as a CPython extension.
 *
 * Plan: a call's input and output buffers and what each use carries (plan.h).
 * Engine: the protocol state machine (engine.h) with the step methods the executable
 * specification has (begin, receive, poll, next_deadline, finish), and `run`, which carries out a
 * whole call over a socket in C with the GIL released (driver.h). hostlib/native.py wraps both
 * with the Python-facing API: exceptions, EngineStats, the PacketEngine interface. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "driver.h"
#include "engine.h"
#include "plan.h"
#include "protocol.h"
#include "quantize.h"

/* ================================================================== Plan */

typedef struct {
    PyObject_HEAD
    struct p4r_plan plan;
    Py_buffer input, output;
    int has_input, has_output, initialised;
    int busy; /* held by an engine's call in flight */
} PlanObject;

static int itemsize_of(int dtype) {
    switch (dtype) {
    case P4R_INT32:
    case P4R_FLOAT32:
        return 4;
    case P4R_FLOAT16:
    case P4R_BFLOAT16:
        return 2;
    case P4R_FLOAT64:
        return 8;
    default:
        return 0;
    }
}

static int valid_k(int k) { return k == 32 || k == 64 || k == 128 || k == 256 || k == 512 || k == 1024; }

static int Plan_init(PlanObject *self, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"kind", "input", "input_dtype", "output", "output_dtype", "values_per_packet",
                            "world_size", "average", "raise_nonfinite", "bits", NULL};
    int kind, input_dtype, output_dtype, k, world_size, average, raise_nonfinite, bits = 32;
    PyObject *input, *output;
    if (self->initialised) {
        PyErr_SetString(PyExc_RuntimeError, "a plan is initialised once");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "iOiOiiipp|i", names, &kind, &input, &input_dtype, &output,
                                     &output_dtype, &k, &world_size, &average, &raise_nonfinite, &bits))
        return -1;
    if (bits != 32 && !(bits == 16 && kind == P4R_PLAN_FLOAT)) {
        PyErr_Format(PyExc_ValueError, "the wire carries 32 bits per value, or 16 for floats; not %d", bits);
        return -1;
    }
    if (!valid_k(k)) {
        PyErr_Format(PyExc_ValueError, "values per packet must be 32, 64, 128, 256, 512 or 1024, not %d", k);
        return -1;
    }
    if (world_size < 1 || world_size > P4R_MAX_WORKERS) {
        PyErr_Format(PyExc_ValueError, "world size %d is outside 1..%d", world_size, P4R_MAX_WORKERS);
        return -1;
    }
    int inputs_ok = (kind == P4R_PLAN_INT && input_dtype == P4R_INT32 &&
                     (output_dtype == P4R_INT32 || output_dtype == P4R_NONE)) ||
                    (kind == P4R_PLAN_FLOAT &&
                     (input_dtype == P4R_FLOAT32 || input_dtype == P4R_FLOAT16 || input_dtype == P4R_BFLOAT16) &&
                     output_dtype != P4R_INT32) ||
                    (kind == P4R_PLAN_REFUSED && output_dtype == P4R_NONE);
    if (!inputs_ok || (output_dtype != P4R_NONE && itemsize_of(output_dtype) == 0)) {
        PyErr_Format(PyExc_ValueError, "no plan of kind %d reads dtype %d and writes dtype %d", kind,
                     input_dtype, output_dtype);
        return -1;
    }
    Py_ssize_t size = 0;
    if (kind != P4R_PLAN_REFUSED) {
        if (PyObject_GetBuffer(input, &self->input, PyBUF_C_CONTIGUOUS) < 0) return -1;
        self->has_input = 1;
        int itemsize = itemsize_of(input_dtype);
        if (self->input.itemsize != itemsize || self->input.len % itemsize) {
            PyErr_SetString(PyExc_ValueError, "the input's item size does not match its dtype");
            return -1;
        }
        size = self->input.len / itemsize;
    }
    if (output != Py_None) {
        if (output_dtype == P4R_NONE) {
            PyErr_SetString(PyExc_ValueError, "an output buffer needs an output dtype");
            return -1;
        }
        if (PyObject_GetBuffer(output, &self->output, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) return -1;
        self->has_output = 1;
        int itemsize = itemsize_of(output_dtype);
        if (self->output.itemsize != itemsize || self->output.len != size * itemsize) {
            PyErr_Format(PyExc_ValueError, "the output must hold %zd elements of %d bytes", size, itemsize);
            return -1;
        }
    }
    if (p4r_plan_init(&self->plan, kind, input_dtype, self->has_input ? self->input.buf : NULL, output_dtype,
                      self->has_output ? self->output.buf : NULL, (size_t)size, k, world_size, average,
                      raise_nonfinite, bits)) {
        PyErr_NoMemory();
        return -1;
    }
    self->initialised = 1;
    return 0;
}

static void Plan_dealloc(PlanObject *self) {
    if (self->initialised) p4r_plan_free(&self->plan);
    if (self->has_input) PyBuffer_Release(&self->input);
    if (self->has_output) PyBuffer_Release(&self->output);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int plan_ready(PlanObject *self) {
    if (!self->initialised) {
        PyErr_SetString(PyExc_RuntimeError, "the plan was not initialised");
        return 0;
    }
    return 1;
}

static PyObject *Plan_get_uses(PlanObject *self, void *closure) {
    if (!plan_ready(self)) return NULL;
    return PyLong_FromLong(self->plan.uses);
}

static PyObject *Plan_get_size(PlanObject *self, void *closure) {
    if (!plan_ready(self)) return NULL;
    return PyLong_FromSize_t(self->plan.size);
}

static PyObject *Plan_agreed(PlanObject *self, PyObject *unused) {
    if (!plan_ready(self)) return NULL;
    if (self->plan.agreed == NULL) return PyBytes_FromStringAndSize("", 0);
    return PyBytes_FromStringAndSize((const char *)self->plan.agreed, (Py_ssize_t)self->plan.count);
}

static PyObject *Plan_nonfinite_blocks(PlanObject *self, PyObject *unused) {
    if (!plan_ready(self)) return NULL;
    size_t first;
    size_t blocks = p4r_plan_nonfinite_blocks(&self->plan, &first);
    return Py_BuildValue("(nn)", (Py_ssize_t)blocks, (Py_ssize_t)first);
}

static PyGetSetDef Plan_getset[] = {
    {"uses", (getter)Plan_get_uses, NULL, "packets the call takes (for float plans, once begun)", NULL},
    {"size", (getter)Plan_get_size, NULL, "elements", NULL},
    {NULL},
};

static PyMethodDef Plan_methods[] = {
    {"agreed", (PyCFunction)Plan_agreed, METH_NOARGS, "per chunk, the wire exponent it was sent with"},
    {"nonfinite_blocks", (PyCFunction)Plan_nonfinite_blocks, METH_NOARGS,
     "(blocks agreed non-finite, index of the first)"},
    {NULL},
};

static PyTypeObject PlanType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "hostlib._native.Plan",
    .tp_basicsize = sizeof(PlanObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Plan(kind, input, input_dtype, output, output_dtype, values_per_packet, world_size, "
              "average, raise_nonfinite, bits=32): one call's buffers and what each use carries",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Plan_init,
    .tp_dealloc = (destructor)Plan_dealloc,
    .tp_getset = Plan_getset,
    .tp_methods = Plan_methods,
};

/* ================================================================== Engine */

typedef struct {
    PyObject_HEAD
    struct p4r_engine *engine;
    PlanObject *plan; /* the call in flight's plan */
    int running;      /* `run` is carrying out a call without the GIL */
    int pending_fail; /* atomic: 0, or fail() during run: 1, 2 for an AllreduceAborted */
    int wake_fd;      /* eventfd: fail() wakes the loop */
    int wake_open;
    struct p4r_transport *transport; /* run's buffers, from its first call on */
} EngineObject;

static int Engine_init(EngineObject *self, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"job_id", "rank", "key", "world_size", "pool_size", "values_per_packet",
                            "progress_timeout", "congestion_control", NULL};
    int job_id, rank, world_size, pool_size, k, congestion_control = 1;
    unsigned long long key;
    double progress_timeout;
    if (self->engine != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "an engine is initialised once");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "iiKiiid|p", names, &job_id, &rank, &key, &world_size,
                                     &pool_size, &k, &progress_timeout, &congestion_control))
        return -1;
    if (job_id < 0 || job_id > 0xFFFF || key > 0xFFFFFFFFull || !valid_k(k)) {
        PyErr_SetString(PyExc_ValueError, "job id, key or values per packet out of range");
        return -1;
    }
    if (world_size < 1 || world_size > P4R_MAX_WORKERS || rank < 0 || rank >= world_size) {
        PyErr_Format(PyExc_ValueError, "rank %d of %d is outside 0..%d of 1..%d workers", rank, world_size,
                     world_size - 1, P4R_MAX_WORKERS);
        return -1;
    }
    if (pool_size < 2 || pool_size > (int)P4R_SLOT_MASK + 1) {
        PyErr_Format(PyExc_ValueError, "pool size %d is outside 2..%d", pool_size, (int)P4R_SLOT_MASK + 1);
        return -1;
    }
    self->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (self->wake_fd < 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    self->wake_open = 1;
    self->engine = malloc(sizeof *self->engine);
    if (self->engine == NULL ||
        p4r_engine_init(self->engine, (uint16_t)job_id, (uint8_t)rank, (uint32_t)key, world_size, pool_size,
                        k, progress_timeout, congestion_control)) {
        free(self->engine);
        self->engine = NULL;
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void Engine_dealloc(EngineObject *self) {
    if (self->engine != NULL) {
        p4r_engine_free(self->engine);
        free(self->engine);
    }
    if (self->plan != NULL) self->plan->busy = 0;
    Py_XDECREF(self->plan);
    if (self->wake_open) close(self->wake_fd);
    if (self->transport != NULL) {
        p4r_transport_free(self->transport);
        free(self->transport);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int engine_usable(EngineObject *self) {
    if (self->engine == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "the engine was not initialised");
        return 0;
    }
    if (self->running) {
        PyErr_SetString(PyExc_RuntimeError, "the engine is running a call on another thread");
        return 0;
    }
    return 1;
}

static PyObject *take_out(EngineObject *self) {
    struct p4r_out *out = &self->engine->out;
    PyObject *list = PyList_New((Py_ssize_t)out->count);
    if (list == NULL) return NULL;
    for (size_t i = 0; i < out->count; i++) {
        PyObject *packet = PyBytes_FromStringAndSize((const char *)out->data + i * out->frame, out->length[i]);
        if (packet == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, packet);
    }
    p4r_out_clear(out);
    return list;
}

/* What Engine.begin checks before a call starts: none in flight, a usable plan, uses within a call. */
static int prepare_call(EngineObject *self, PyObject *plan_object) {
    if (!engine_usable(self)) return 0;
    if (!PyObject_TypeCheck(plan_object, &PlanType)) {
        PyErr_SetString(PyExc_TypeError, "the native engine carries out hostlib._native.Plan plans");
        return 0;
    }
    PlanObject *plan = (PlanObject *)plan_object;
    if (!plan_ready(plan)) return 0;
    if (self->engine->active) {
        PyErr_SetString(PyExc_RuntimeError, "a call is already in flight");
        return 0;
    }
    if (plan->busy) {
        PyErr_SetString(PyExc_RuntimeError, "the plan belongs to another engine's call in flight");
        return 0;
    }
    p4r_plan_start(&plan->plan, p4r_plan_width(&plan->plan, self->engine->half_slots), self->engine->rank);
    if (plan->plan.uses > P4R_MAX_USES_PER_CALL) {
        PyErr_Format(PyExc_ValueError, "a call takes at most %d packets, not %ld", P4R_MAX_USES_PER_CALL,
                     plan->plan.uses);
        return 0;
    }
    plan->busy = 1;
    Py_INCREF(plan);
    Py_XSETREF(self->plan, plan);
    p4r_out_clear(&self->engine->out);
    return 1;
}

static PyObject *Engine_begin(EngineObject *self, PyObject *args) {
    PyObject *plan;
    unsigned long long descriptor;
    double now;
    if (!PyArg_ParseTuple(args, "OKd", &plan, &descriptor, &now)) return NULL;
    if (!prepare_call(self, plan)) return NULL;
    p4r_engine_begin(self->engine, &self->plan->plan, (uint32_t)descriptor, now);
    return take_out(self);
}

static PyObject *Engine_receive(EngineObject *self, PyObject *args) {
    Py_buffer datagram;
    double now;
    unsigned char tos = 0;
    if (!PyArg_ParseTuple(args, "y*d|b", &datagram, &now, &tos)) return NULL;
    if (!engine_usable(self)) {
        PyBuffer_Release(&datagram);
        return NULL;
    }
    p4r_out_clear(&self->engine->out);
    p4r_engine_receive(self->engine, datagram.buf, (size_t)datagram.len, now, tos);
    PyBuffer_Release(&datagram);
    return take_out(self);
}

static PyObject *Engine_poll(EngineObject *self, PyObject *args) {
    double now;
    if (!PyArg_ParseTuple(args, "d", &now)) return NULL;
    if (!engine_usable(self)) return NULL;
    p4r_out_clear(&self->engine->out);
    p4r_engine_poll(self->engine, now);
    return take_out(self);
}

static PyObject *Engine_next_deadline(EngineObject *self, PyObject *unused) {
    if (!engine_usable(self)) return NULL;
    return PyFloat_FromDouble(p4r_engine_next_deadline(self->engine));
}

static PyObject *Engine_fail(EngineObject *self, PyObject *args) {
    int aborted;
    if (!PyArg_ParseTuple(args, "p", &aborted)) return NULL;
    if (self->engine == NULL) Py_RETURN_NONE;
    if (self->running) { /* the loop applies it at its next step; the eventfd wakes it now */
        __atomic_store_n(&self->pending_fail, aborted ? 2 : 1, __ATOMIC_RELEASE);
        uint64_t one = 1;
        if (write(self->wake_fd, &one, sizeof one) < 0 && errno != EAGAIN) {
            return PyErr_SetFromErrno(PyExc_OSError);
        }
    } else {
        p4r_engine_fail(self->engine, aborted);
    }
    Py_RETURN_NONE;
}

static PyObject *Engine_finish(EngineObject *self, PyObject *args) {
    double now;
    if (!PyArg_ParseTuple(args, "d", &now)) return NULL;
    if (!engine_usable(self)) return NULL;
    struct p4r_engine *e = self->engine;
    int pending = __atomic_exchange_n(&self->pending_fail, 0, __ATOMIC_ACQ_REL);
    if (pending) p4r_engine_fail(e, pending == 2);
    int active = e->active;
    uint32_t number = e->call.number, descriptor = e->call.descriptor;
    long uses = e->call.uses;
    struct p4r_error error;
    p4r_engine_finish(e, now, &error);
    if (self->plan != NULL) self->plan->busy = 0;
    Py_CLEAR(self->plan);
    if (!active || error.kind == P4R_OK) Py_RETURN_NONE;
    return Py_BuildValue("{s:i,s:I,s:I,s:l,s:I,s:I,s:I,s:d,s:i,s:K,s:K}", "kind", error.kind, "number",
                         number, "descriptor", descriptor, "uses", uses, "rank", error.rank, "offender", error.offender, "held", error.held,
                         "idle", error.idle, "outstanding", error.outstanding, "retransmissions",
                         (unsigned long long)error.retransmissions, "refused",
                         (unsigned long long)error.refused);
}

/* The run's buffers, made on first use; 0 (with MemoryError set) when they cannot be. */
static int have_transport(EngineObject *self) {
    if (self->transport != NULL) return 1;
    struct p4r_transport *transport = malloc(sizeof *transport);
    if (transport == NULL || p4r_transport_init(transport)) {
        free(transport);
        PyErr_NoMemory();
        return 0;
    }
    self->transport = transport;
    return 1;
}

static PyObject *Engine_attach_lane(EngineObject *self, PyObject *args) {
    int fd, lease;
    if (!PyArg_ParseTuple(args, "ii", &fd, &lease)) return NULL;
    if (!engine_usable(self) || !have_transport(self)) return NULL;
    if (self->running) {
        PyErr_SetString(PyExc_RuntimeError, "a call is in flight");
        return NULL;
    }
    int error = p4r_transport_attach(self->transport, fd, lease);
    if (error) {
        errno = error;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    Py_RETURN_NONE;
}

static PyObject *Engine_detach_lane(EngineObject *self, PyObject *unused) {
    if (self->running) {
        PyErr_SetString(PyExc_RuntimeError, "a call is in flight");
        return NULL;
    }
    if (self->transport != NULL) p4r_transport_detach(self->transport);
    Py_RETURN_NONE;
}

static PyObject *Engine_transport_counters(EngineObject *self, PyObject *unused) {
    struct p4r_transport *t = self->transport;
    unsigned long long c[4] = {0, 0, 0, 0};
    if (t != NULL) {
        c[0] = __atomic_load_n(&t->lane_sent, __ATOMIC_RELAXED);
        c[1] = __atomic_load_n(&t->lane_received, __ATOMIC_RELAXED);
        c[2] = __atomic_load_n(&t->udp_sent, __ATOMIC_RELAXED);
        c[3] = __atomic_load_n(&t->udp_received, __ATOMIC_RELAXED);
    }
    return Py_BuildValue("{s:K,s:K,s:K,s:K}", "lane_sent", c[0], "lane_received", c[1], "udp_sent", c[2],
                         "udp_received", c[3]);
}

static PyObject *Engine_lane_attached(EngineObject *self, PyObject *unused) {
    return PyBool_FromLong(self->transport != NULL && self->transport->link.lane != NULL);
}

static PyObject *Engine_run(EngineObject *self, PyObject *args) {
    PyObject *plan;
    unsigned long long descriptor;
    int fd;
    if (!PyArg_ParseTuple(args, "OKi", &plan, &descriptor, &fd)) return NULL;
    if (!engine_usable(self) || !have_transport(self)) return NULL;
    if (!prepare_call(self, plan)) return NULL;
    struct p4r_engine *e = self->engine;
    struct p4r_plan *p = &self->plan->plan;
    uint64_t stale;
    while (read(self->wake_fd, &stale, sizeof stale) > 0) {
    }
    self->running = 1;
    int error;
    Py_BEGIN_ALLOW_THREADS;
    p4r_engine_begin(e, p, (uint32_t)descriptor, p4r_monotonic());
    error = p4r_drive(e, self->transport, fd, self->wake_fd, &self->pending_fail);
    Py_END_ALLOW_THREADS;
    self->running = 0;
    if (error) {
        errno = error;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    Py_RETURN_NONE;
}

static PyObject *Engine_sample_rtt(EngineObject *self, PyObject *args) {
    double rtt;
    if (!PyArg_ParseTuple(args, "d", &rtt)) return NULL;
    if (!engine_usable(self)) return NULL;
    p4r_engine_sample_rtt(self->engine, rtt);
    Py_RETURN_NONE;
}

#define LOAD(field) (unsigned long long)__atomic_load_n(&s->field, __ATOMIC_RELAXED)

/* Readable while `run` works on another thread: every field is loaded atomically. */
static PyObject *Engine_counters(EngineObject *self, PyObject *unused) {
    if (self->engine == NULL) return PyDict_New();
    const struct p4r_stats *s = &self->engine->stats;
    double busy;
    __atomic_load(&s->busy_seconds, &busy, __ATOMIC_RELAXED);
    return Py_BuildValue(
        "{s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:d}", "packets_sent",
        LOAD(packets_sent), "packets_received", LOAD(packets_received), "bytes_sent", LOAD(bytes_sent),
        "bytes_received", LOAD(bytes_received), "retransmissions", LOAD(retransmissions), "queries",
        LOAD(queries), "fast_retransmissions", LOAD(fast_retransmissions), "timeouts", LOAD(timeouts),
        "missing_received", LOAD(missing_received), "missing_resends", LOAD(missing_resends), "ignored",
        LOAD(ignored), "needless_questions", LOAD(needless_questions), "forged", LOAD(forged), "refused",
        LOAD(refused), "calls", LOAD(calls), "aborted_calls", LOAD(aborted_calls), "ce_marks", LOAD(ce_marks),
        "window_decreases", LOAD(window_decreases), "random_losses", LOAD(random_losses), "cwnd", LOAD(cwnd),
        "busy_seconds", busy);
}

static PyObject *Engine_rtt_samples(EngineObject *self, PyObject *args) {
    Py_ssize_t start;
    if (!PyArg_ParseTuple(args, "n", &start)) return NULL;
    if (self->engine == NULL) return PyList_New(0);
    const struct p4r_stats *s = &self->engine->stats;
    size_t count = __atomic_load_n(&s->rtt_count, __ATOMIC_ACQUIRE);
    if (start < 0 || (size_t)start > count) start = (Py_ssize_t)count;
    PyObject *list = PyList_New((Py_ssize_t)count - start);
    if (list == NULL) return NULL;
    for (size_t i = (size_t)start; i < count; i++) {
        PyObject *value = PyFloat_FromDouble(s->rtt_samples[i]);
        if (value == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)(i - (size_t)start), value);
    }
    return list;
}

static PyObject *Engine_get_call_number(EngineObject *self, void *closure) {
    return PyLong_FromUnsignedLong(self->engine ? self->engine->call_number : 0);
}

static PyObject *Engine_get_half(EngineObject *self, void *closure) {
    return PyLong_FromLong(self->engine ? self->engine->half : 0);
}

static PyObject *Engine_get_active(EngineObject *self, void *closure) {
    return PyBool_FromLong(self->engine && self->engine->active);
}

static PyObject *Engine_get_done(EngineObject *self, void *closure) {
    return PyBool_FromLong(!self->engine || p4r_engine_done(self->engine));
}

static PyObject *Engine_get_double(EngineObject *self, void *offset) {
    if (self->engine == NULL) return PyFloat_FromDouble(0.0);
    return PyFloat_FromDouble(*(double *)((char *)self->engine + (size_t)offset));
}

static int Engine_set_double(EngineObject *self, PyObject *value, void *offset) {
    if (value == NULL) {
        PyErr_SetString(PyExc_AttributeError, "cannot delete an engine parameter");
        return -1;
    }
    if (!engine_usable(self)) return -1;
    double number = PyFloat_AsDouble(value);
    if (number == -1.0 && PyErr_Occurred()) return -1;
    if (!(number > 0)) {
        PyErr_SetString(PyExc_ValueError, "must be a positive number of seconds");
        return -1;
    }
    *(double *)((char *)self->engine + (size_t)offset) = number;
    return 0;
}

static PyGetSetDef Engine_getset[] = {
    {"call_number", (getter)Engine_get_call_number, NULL, "number of the next (or current) call", NULL},
    {"half", (getter)Engine_get_half, NULL, "which half of the pool the next call uses", NULL},
    {"active", (getter)Engine_get_active, NULL, "a call is in flight", NULL},
    {"done", (getter)Engine_get_done, NULL, "the call in flight needs nothing more", NULL},
    {"rto", (getter)Engine_get_double, (setter)Engine_set_double, "the retransmission timeout, seconds",
     (void *)offsetof(struct p4r_engine, rto)},
    {"progress_timeout", (getter)Engine_get_double, (setter)Engine_set_double,
     "seconds without progress before a call fails", (void *)offsetof(struct p4r_engine, progress_timeout)},
    {NULL},
};

static PyMethodDef Engine_methods[] = {
    {"begin", (PyCFunction)Engine_begin, METH_VARARGS, "begin(plan, descriptor, now) -> packets"},
    {"receive", (PyCFunction)Engine_receive, METH_VARARGS, "receive(datagram, now, tos=0) -> packets"},
    {"poll", (PyCFunction)Engine_poll, METH_VARARGS, "poll(now) -> packets"},
    {"next_deadline", (PyCFunction)Engine_next_deadline, METH_NOARGS, "when poll must run next"},
    {"fail", (PyCFunction)Engine_fail, METH_VARARGS, "fail(aborted): fail the call in flight"},
    {"finish", (PyCFunction)Engine_finish, METH_VARARGS, "finish(now) -> None or the call's error"},
    {"run", (PyCFunction)Engine_run, METH_VARARGS,
     "run(plan, descriptor, fd): a whole call over a connected UDP socket, without the GIL"},
    {"attach_lane", (PyCFunction)Engine_attach_lane, METH_VARARGS,
     "attach_lane(memfd, lease): run's datagrams go through the switch's shared-memory lane"},
    {"transport_counters", (PyCFunction)Engine_transport_counters, METH_NOARGS,
     "datagrams run carried, by way: {lane_sent, lane_received, udp_sent, udp_received}"},
    {"detach_lane", (PyCFunction)Engine_detach_lane, METH_NOARGS, "let the lane go: UDP alone from now on"},
    {"lane_attached", (PyCFunction)Engine_lane_attached, METH_NOARGS, "whether run uses a lane (it may drop one)"},
    {"sample_rtt", (PyCFunction)Engine_sample_rtt, METH_VARARGS, "feed one round-trip sample"},
    {"counters", (PyCFunction)Engine_counters, METH_NOARGS, "the counters, as EngineStats names them"},
    {"rtt_samples", (PyCFunction)Engine_rtt_samples, METH_VARARGS, "rtt_samples(start) -> samples"},
    {NULL},
};

static PyTypeObject EngineType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "hostlib._native.Engine",
    .tp_basicsize = sizeof(EngineObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Engine(job_id, rank, key, world_size, pool_size, values_per_packet, progress_timeout)",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Engine_init,
    .tp_dealloc = (destructor)Engine_dealloc,
    .tp_getset = Engine_getset,
    .tp_methods = Engine_methods,
};

/* ================================================================== module */

static PyObject *to_half(PyObject *module, PyObject *args) {
    Py_buffer doubles;
    if (!PyArg_ParseTuple(args, "y*", &doubles)) return NULL;
    Py_ssize_t count = doubles.len / 8;
    PyObject *out = PyBytes_FromStringAndSize(NULL, count * 2);
    if (out != NULL) {
        uint16_t *halves = (uint16_t *)PyBytes_AS_STRING(out);
        for (Py_ssize_t i = 0; i < count; i++) {
            double value;
            memcpy(&value, (const char *)doubles.buf + 8 * i, 8);
            halves[i] = p4r_double_to_half(value);
        }
    }
    PyBuffer_Release(&doubles);
    return out;
}

static PyMethodDef module_methods[] = {
    {"to_half", to_half, METH_VARARGS, "float64 bytes -> float16 bytes, as the plans round results"},
    {NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "hostlib._native", "The native packet engine (see hostlib/native.py).", -1,
    module_methods,
};

PyMODINIT_FUNC PyInit__native(void) {
    if (PyType_Ready(&PlanType) < 0 || PyType_Ready(&EngineType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    Py_INCREF(&PlanType);
    Py_INCREF(&EngineType);
    if (PyModule_AddObject(m, "Plan", (PyObject *)&PlanType) < 0 ||
        PyModule_AddObject(m, "Engine", (PyObject *)&EngineType) < 0)
        return NULL;
    struct {
        const char *name;
        long value;
    } ints[] = {
        {"HEADER_BYTES", P4R_HEADER_BYTES}, {"MAX_WORKERS", P4R_MAX_WORKERS}, {"EXP_BIAS", P4R_EXP_BIAS},
        {"EXP_NONE", P4R_EXP_NONE}, {"EXP_NONFINITE", P4R_EXP_NONFINITE}, {"USE_BITS", P4R_USE_BITS},
        {"MAX_USES_PER_CALL", P4R_MAX_USES_PER_CALL}, {"CALL_NUMBERS", P4R_CALL_NUMBERS},
        {"SET_BIT", P4R_SET_BIT}, {"SLOT_MASK", P4R_SLOT_MASK}, {"DATA", P4R_DATA}, {"RESULT", P4R_RESULT},
        {"MISSING", P4R_MISSING}, {"ABORT", P4R_ABORT}, {"STALE", P4R_STALE}, {"QUERY", P4R_QUERY},
        {"RTO_SRTT_MULTIPLE", P4R_RTO_SRTT_MULTIPLE}, {"FAST_RETRANSMIT_AFTER", P4R_FAST_RETRANSMIT_AFTER},
        {"REORDER_SHARE", P4R_REORDER_SHARE},
        {"REMEMBERED_ABORTS", P4R_REMEMBERED_ABORTS}, {"RTT_SAMPLES", P4R_RTT_SAMPLES},
        {"QUESTION_BACKOFFS", P4R_QUESTION_BACKOFFS}, {"QUESTION_BUDGET", P4R_QUESTION_BUDGET},
        {"QUESTION_MEMORY", P4R_QUESTION_MEMORY}, {"QUESTION_WAIT_SHARE", P4R_QUESTION_WAIT_SHARE},
        {"CODE_POS_INF", P4R_CODE_POS_INF}, {"CODE_NEG_INF", P4R_CODE_NEG_INF}, {"CODE_NAN", P4R_CODE_NAN},
        {"PLAN_INT", P4R_PLAN_INT}, {"PLAN_FLOAT", P4R_PLAN_FLOAT}, {"PLAN_REFUSED", P4R_PLAN_REFUSED},
        {"NONE", P4R_NONE}, {"INT32", P4R_INT32}, {"FLOAT32", P4R_FLOAT32}, {"FLOAT16", P4R_FLOAT16},
        {"FLOAT64", P4R_FLOAT64}, {"BFLOAT16", P4R_BFLOAT16}, {"CODE16_POS_INF", P4R_CODE16_POS_INF},
        {"CODE16_NEG_INF", P4R_CODE16_NEG_INF}, {"CODE16_NAN", P4R_CODE16_NAN}, {"ERR_MISMATCH", P4R_ERR_MISMATCH}, {"ERR_ABANDONED", P4R_ERR_ABANDONED},
        {"ERR_TIMEOUT", P4R_ERR_TIMEOUT}, {"ERR_EXTERNAL", P4R_ERR_EXTERNAL}, {"ERR_MEMORY", P4R_ERR_MEMORY},
        /* where lanes.h puts things, for tests that play a hostile rank writing into its lane */
        {"LANES", P4R_LANES}, {"LANE_BYTES", sizeof(struct p4r_lane)}, {"LANE_SLOTS", P4R_LANE_SLOTS},
        {"LANE_SLOT_BYTES", P4R_LANE_SLOT_BYTES}, {"LANE_CLOSED", offsetof(struct p4r_lane, closed)},
        {"LANE_UP_TAIL", offsetof(struct p4r_lane, up.tail)}, {"LANE_UP_HEAD", offsetof(struct p4r_lane, up.head)},
        {"LANE_UP_SLOTS", offsetof(struct p4r_lane, up.slots)},
        {"LANE_DOWN_TAIL", offsetof(struct p4r_lane, down.tail)},
        {"LANE_DOWN_HEAD", offsetof(struct p4r_lane, down.head)},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        if (PyModule_AddIntConstant(m, ints[i].name, ints[i].value) < 0) return NULL;
    }
    struct {
        const char *name;
        double value;
    } floats[] = {{"RTO_MIN", P4R_RTO_MIN}, {"RTO_MAX", P4R_RTO_MAX}, {"RTO_INITIAL", P4R_RTO_INITIAL},
                  {"QUESTION_MIN", P4R_QUESTION_MIN}, {"LOSS_MEMORY", P4R_LOSS_MEMORY},
                  {"QUEUE_DELAY", P4R_QUEUE_DELAY}, {"QUEUE_TARGET", P4R_QUEUE_TARGET}};
    for (size_t i = 0; i < sizeof floats / sizeof floats[0]; i++) {
        if (PyModule_AddObject(m, floats[i].name, PyFloat_FromDouble(floats[i].value)) < 0) return NULL;
    }
    return m;
}
