/* Native code of the opencl-events study: the counting event callback, and the dependency
 * experiment's host loop in C.
 *
 * count_event: clSetEventCallback's signature is void (cl_event, cl_int, void *user_data). It
 * only adds 1 to the counter behind user_data: no GIL, no allocation, no thread of its own, so
 * what it costs is what the OpenCL runtime's callback machinery costs (the seed's C++ callbacks
 * were as thin).
 *
 * wb_dep_time: R runs of the dependency experiment enqueued from C, as the seed's C++ test did
 * (see DependencyRuns in experiments.py, which holds the same loop in Python; there pyopencl's
 * cost is added to every enqueue and the waiting thread competes for the GIL). The OpenCL
 * entry points come from the ICD loader the process already loaded (pyopencl's), looked up by
 * wb_dep_open; the queue, kernels (arguments set) and buffers are pyopencl's, passed as handles.
 *
 * Declared without CL headers so any C compiler builds it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int32_t cl_int;
typedef uint32_t cl_uint;
typedef void *cl_handle;

void count_event(void *event, int status, void *user_data)
{
    (void)event;
    (void)status;
    __atomic_fetch_add((long *)user_data, 1L, __ATOMIC_RELAXED);
}

static cl_int (*enqueue_kernel)(cl_handle, cl_handle, cl_uint, const size_t *, const size_t *, const size_t *, cl_uint,
                                const cl_handle *, cl_handle *);
static void *(*enqueue_map)(cl_handle, cl_handle, cl_uint, uint64_t, size_t, size_t, cl_uint, const cl_handle *,
                            cl_handle *, cl_int *);
static cl_int (*enqueue_unmap)(cl_handle, cl_handle, void *, cl_uint, const cl_handle *, cl_handle *);
static cl_int (*set_callback)(cl_handle, cl_int, void (*)(void *, int, void *), void *);
static cl_int (*wait_for_events)(cl_uint, const cl_handle *);
static cl_int (*release_event)(cl_handle);
static cl_int (*finish)(cl_handle);
/* Callbacks of the dependency loop count here: static, so a callback that trails a failed or
 * timed-out batch writes to live memory. One batch at a time (the study is sequential). */
static long dep_callbacks;

/* Look the entry points up in the already loaded ICD loader at `path`; 0 on success, else the
 * 1-based index of the first symbol missing (-1: the library is not loaded). */
int wb_dep_open(const char *path)
{
    void *lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (!lib) return -1;
    void **slots[] = {(void **)&enqueue_kernel, (void **)&enqueue_map, (void **)&enqueue_unmap, (void **)&set_callback,
                      (void **)&wait_for_events, (void **)&release_event, (void **)&finish};
    const char *names[] = {"clEnqueueNDRangeKernel", "clEnqueueMapBuffer", "clEnqueueUnmapMemObject",
                           "clSetEventCallback", "clWaitForEvents", "clReleaseEvent", "clFinish"};
    for (int i = 0; i < 7; i++)
        if (!(*slots[i] = dlsym(lib, names[i]))) return i + 1;
    return 0;
}

/* The seed's waiting thread: clWaitForEvents on each map event in turn, as they are posted. */
struct waiter {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    cl_handle *events;
    long posted, waited, reps;
    cl_int error;
};

static void *wait_loop(void *arg)
{
    struct waiter *w = arg;
    for (long i = 0; i < w->reps; i++) {
        pthread_mutex_lock(&w->mu);
        while (w->posted <= i) pthread_cond_wait(&w->cv, &w->mu);
        cl_handle ev = w->events[i];
        pthread_mutex_unlock(&w->mu);
        if (!ev) break; /* the loop stopped early */
        cl_int err = wait_for_events(1, &ev);
        if (err) {
            w->error = err;
            break;
        }
        w->waited = i + 1;
    }
    return NULL;
}

static void post(struct waiter *w, cl_handle ev)
{
    pthread_mutex_lock(&w->mu);
    w->events[w->posted++] = ev;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

enum { OUT_NS, OUT_CALLBACKS, OUT_WAITED, OUT_UNMAPS_REFUSED, OUT_ERROR, OUT_ERROR_AT, OUT_N };
enum { AT_NONE, AT_STEP, AT_COMBINE, AT_MAP, AT_UNMAP, AT_CALLBACK, AT_WAIT, AT_FINISH, AT_MEMORY };

#define FAIL(code, at)      \
    do {                    \
        out[OUT_ERROR] = (code); \
        out[OUT_ERROR_AT] = (at); \
        goto stop;          \
    } while (0)

/* R runs: every worker's step (after its own previous step, its parent's step of this run and
 * the previous run's combine), the combine (after every step and the previous run's map and
 * unmap), a non-blocking map of the host-pointer buffer, then per condition an unmap, a post to
 * the waiting thread, a CL_COMPLETE callback. Timed from the first enqueue until the queue
 * finished, every callback ran and the waiter returned (callbacks can trail clFinish). Maps left
 * open are unmapped afterwards, untimed; the runtime's refusals are counted. out[] gets
 * OUT_N values: ns, callbacks, waits, unmaps refused, the first OpenCL error and where. */
int wb_dep_time(cl_handle queue, const cl_handle *steps, const int *parents, int workers, cl_handle combine,
                cl_handle host_buf, size_t n, size_t map_bytes, long reps, int unmap, int wait, int cb,
                long long *out)
{
    memset(out, 0, OUT_N * sizeof *out);
    size_t global = n;
    long *counter = &dep_callbacks;
    __atomic_store_n(counter, 0L, __ATOMIC_RELAXED);
    cl_handle *step_ev = calloc((size_t)workers, sizeof *step_ev);
    cl_handle *prev_step = calloc((size_t)workers, sizeof *prev_step);
    cl_handle *maps = calloc((size_t)reps, sizeof *maps);    /* every map event, held to the end */
    void **open_ptrs = calloc((size_t)reps, sizeof *open_ptrs);
    cl_handle deps[3 + 64];
    cl_handle prev_comb = NULL, prev_map = NULL, prev_unmap = NULL;
    long n_open = 0, r = 0;
    struct waiter w = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .reps = reps};
    int waiting = 0;
    if (!step_ev || !prev_step || !maps || !open_ptrs || workers + 3 > (int)(sizeof deps / sizeof *deps)) {
        out[OUT_ERROR] = -6; /* CL_OUT_OF_HOST_MEMORY */
        out[OUT_ERROR_AT] = AT_MEMORY;
        goto done;
    }
    finish(queue);
    if (wait) {
        w.events = calloc((size_t)reps, sizeof *w.events);
        if (!w.events || pthread_create(&w.thread, NULL, wait_loop, &w)) FAIL(-6, AT_MEMORY);
        waiting = 1;
    }
    int64_t t0 = now_ns();
    for (r = 0; r < reps; r++) {
        for (int k = 0; k < workers; k++) {
            cl_uint nd = 0;
            if (prev_comb) deps[nd++] = prev_comb; /* the last combine read every slice */
            if (prev_step[k]) deps[nd++] = prev_step[k];
            if (parents[k] >= 0) deps[nd++] = step_ev[parents[k]];
            cl_int err = enqueue_kernel(queue, steps[k], 1, NULL, &global, NULL, nd, nd ? deps : NULL, &step_ev[k]);
            if (err) FAIL(err, AT_STEP);
        }
        cl_uint nd = 0;
        for (int k = 0; k < workers; k++) deps[nd++] = step_ev[k];
        if (prev_map) deps[nd++] = prev_map;
        if (prev_unmap) deps[nd++] = prev_unmap;
        cl_handle comb;
        cl_int err = enqueue_kernel(queue, combine, 1, NULL, &global, NULL, nd, deps, &comb);
        if (err) FAIL(err, AT_COMBINE);
        for (int k = 0; k < workers; k++) {
            if (prev_step[k]) release_event(prev_step[k]);
            prev_step[k] = step_ev[k];
        }
        if (prev_comb) release_event(prev_comb);
        if (prev_unmap) release_event(prev_unmap);
        prev_comb = comb;
        prev_unmap = NULL;
        cl_handle map_ev;
        void *ptr = enqueue_map(queue, host_buf, 0, 1 /* CL_MAP_READ */, 0, map_bytes, 1, &comb, &map_ev, &err);
        if (err) FAIL(err, AT_MAP);
        maps[r] = prev_map = map_ev;
        if (cb && (err = set_callback(map_ev, 0 /* CL_COMPLETE */, count_event, counter))) FAIL(err, AT_CALLBACK);
        if (wait) post(&w, map_ev);
        if (unmap) {
            if ((err = enqueue_unmap(queue, host_buf, ptr, 1, &map_ev, &prev_unmap))) FAIL(err, AT_UNMAP);
        } else {
            open_ptrs[n_open++] = ptr;
        }
    }
    if ((out[OUT_ERROR] = finish(queue))) out[OUT_ERROR_AT] = AT_FINISH;
    if (cb) {
        int64_t deadline = now_ns() + 10000000000LL;
        struct timespec nap = {0, 20000};
        while (__atomic_load_n(counter, __ATOMIC_RELAXED) < reps && now_ns() < deadline) nanosleep(&nap, NULL);
    }
    if (waiting) {
        pthread_join(w.thread, NULL);
        waiting = 0;
    }
    out[OUT_NS] = now_ns() - t0;
stop:
    if (waiting) { /* stopped early: let the waiter finish what was posted, then end it */
        while (w.posted < reps) post(&w, NULL);
        pthread_join(w.thread, NULL);
    }
    out[OUT_WAITED] = w.waited;
    if (w.error && !out[OUT_ERROR]) {
        out[OUT_ERROR] = w.error;
        out[OUT_ERROR_AT] = AT_WAIT;
    }
    finish(queue);
    for (long i = 0; i < n_open; i++) /* untimed: close the mappings left open */
        out[OUT_UNMAPS_REFUSED] += enqueue_unmap(queue, host_buf, open_ptrs[i], 0, NULL, NULL) != 0;
    finish(queue);
    out[OUT_CALLBACKS] = __atomic_load_n(counter, __ATOMIC_RELAXED);
    if (cb) { /* a callback may still be due on a run that failed half-way: wait for it */
        int64_t deadline = now_ns() + 1000000000LL;
        struct timespec nap = {0, 20000};
        while (__atomic_load_n(counter, __ATOMIC_RELAXED) < r && now_ns() < deadline) nanosleep(&nap, NULL);
    }
    for (long i = 0; i < reps; i++)
        if (maps[i]) release_event(maps[i]);
    for (int k = 0; k < workers; k++)
        if (prev_step[k]) release_event(prev_step[k]);
    if (prev_comb) release_event(prev_comb);
    if (prev_unmap) release_event(prev_unmap);
done:
    free(step_ev);
    free(prev_step);
    free(maps);
    free(open_ptrs);
    free(w.events);
    return (int)out[OUT_ERROR];
}
