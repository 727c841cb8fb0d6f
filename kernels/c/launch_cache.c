/* launch_cache.c: the CPU side of the launch-cache study.
 *
 * T pthreads each run their share of N "kernel launches". Each launch needs a scratch block of
 * S bytes (the nvptx soft-stack block of the seed: a GCC review of caching it between OpenMP
 * kernel launches). The "kernel" writes one 64-byte line in each of P pages spread over the
 * block (as GPU threads use the start of their own soft-stack slice), then sums the lines of
 * its neighbours (`passes` times: the kernel's length), so two launches sharing a block at once
 * corrupt the checksum.
 *
 * Policies (how a launch gets its block):
 *   per_call      malloc + free at every launch (the seed's baseline)
 *   locked_cache  one cached block behind a mutex held for the whole kernel (the patch);
 *                 reused when large enough, else freed and reallocated
 *   size_limit    the patch as committed: locked_cache, plus a size limit on what stays cached while
 *                 the application allocates other memory (libgomp's SOFTSTACK_CACHE_LIMIT, 128 MiB).
 *                 Before each data allocation a cached block larger than the limit is freed; if the
 *                 allocation runs out of memory the cached block is freed whatever its size and the
 *                 allocation retried once (GOMP_OFFLOAD_alloc in the committed patch).
 *   pool          up to k cached blocks, a thread waits only when all k are busy (the review)
 *
 * Application data: with data=B > 0 every launch first allocates B bytes of data (the kernel's
 * mapped arguments, GOMP_OFFLOAD_alloc) and frees them after the block is released. The
 * allocator can be told to fail: oom_every=N makes every N-th data allocation (first attempts
 * only) report out of memory, a fault injection that exercises size_limit's free-and-retry path;
 * under the other policies such a launch cannot run and the program exits with status 6.
 *
 * One process runs one measurement so that glibc's malloc state (the dynamic mmap threshold,
 * arenas, trim threshold) and the resource counters start clean, as under the seed's `time`.
 *
 * Usage: launch_cache policy=per_call threads=8 launches=16384 scratch=50000000 k=3 pages=256
 *        passes=1 malloc=pinned|dynamic salt=123 out=/path/to/samples.bin
 *        [limit=134217728 data=0 oom_every=0] [parent=PID]
 * parent=PID: the program gets SIGKILL when PID (the process that started it) dies, even by
 * SIGKILL, so it never times on after a run ends (set here, not between fork and exec, where
 * the starting Python would have to run code; see workbench/base/procs.py).
 * Writes to `out`: int64 start_ns[N], acquire_ns[N], kernel_ns[N], release_ns[N], then uint64
 * checksum[N], in launch order (thread t owns launches [t*N/T, (t+1)*N/T)); prints one JSON
 * line of counters on stdout.
 */
#define _GNU_SOURCE
#include <errno.h>
#ifdef __GLIBC__
#include <gnu/libc-version.h>
#endif
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>
#include <time.h>

enum policy { PER_CALL, LOCKED_CACHE, SIZE_LIMIT, POOL };

static struct {
    enum policy policy;
    int threads;
    long launches;
    size_t scratch;
    int k;
    int pages;
    int passes;
    int pin_threshold;
    uint64_t salt;
    const char *out;
    size_t limit;
    size_t data;
    long oom_every;
    long parent;
} cfg = {PER_CALL, 8, 16384, 50000000, 3, 256, 1, 1, 1, NULL, 134217728, 0, 0, 0};

/* Bytes held at once (scratch and data) and how many allocations glibc served by mmap. */
static long held_bytes, peak_bytes, n_allocs, n_mmapped;
/* size_limit's work: blocks freed for being over the limit, out-of-memory retries; data
 * allocations asked for (first attempts), the count the fault injection goes by. */
static long n_limit_frees, n_oom_retries, n_data_asks;
static int n_blocks_made; /* locked_cache and size_limit: blocks the cache allocated */

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    void *block;      /* locked_cache: the one cached block */
    size_t size;
    void **free_list; /* pool: blocks not in use */
    int n_free, n_created;
} cache = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, 0, NULL, 0, 0};

static int64_t *start_ns, *acquire_ns, *kernel_ns, *release_ns;
static uint64_t *checksum;
static struct timespec phase_t0;
static pthread_barrier_t go;

static int64_t ns_since(const struct timespec *t0) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)(t.tv_sec - t0->tv_sec) * 1000000000LL + (t.tv_nsec - t0->tv_nsec);
}

/* glibc keeps the chunk size in the word below the user pointer; bit 1 (IS_MMAPPED) marks a
 * chunk that got its own mmap. An implementation detail, read only to count, never to free. */
static int chunk_is_mmapped(const void *p) {
#ifdef __GLIBC__
    const size_t *size_word = (const size_t *)((uintptr_t)p - sizeof(size_t));
    return (*size_word & 2) != 0;
#else
    (void)p;
    return 0;
#endif
}

/* Out of memory with no way out: the launch cannot run. Exit status 6 tells the study. */
static void out_of_memory(const char *what, size_t n) {
    fprintf(stderr, "out of memory: %s allocation of %zu bytes failed under policy %s with %ld bytes held%s\n", what, n,
            cfg.policy == PER_CALL ? "per_call" : cfg.policy == LOCKED_CACHE ? "locked_cache"
            : cfg.policy == SIZE_LIMIT ? "size_limit" : "pool",
            __atomic_load_n(&held_bytes, __ATOMIC_RELAXED), cfg.oom_every ? " (injected: oom_every)" : "");
    exit(6);
}

/* malloc with the bookkeeping; NULL when malloc fails. */
static void *try_alloc(size_t n) {
    void *p = malloc(n);
    if (!p) return NULL;
    long held = __atomic_add_fetch(&held_bytes, (long)n, __ATOMIC_RELAXED);
    long peak = __atomic_load_n(&peak_bytes, __ATOMIC_RELAXED);
    while (held > peak && !__atomic_compare_exchange_n(&peak_bytes, &peak, held, 1, __ATOMIC_RELAXED,
                                                        __ATOMIC_RELAXED)) {
    }
    __atomic_add_fetch(&n_allocs, 1, __ATOMIC_RELAXED);
    if (chunk_is_mmapped(p)) __atomic_add_fetch(&n_mmapped, 1, __ATOMIC_RELAXED);
    return p;
}

static void *scratch_alloc(size_t n) {
    void *p = try_alloc(n);
    if (!p) out_of_memory("scratch", n);
    return p;
}

static void scratch_free(void *p, size_t n) {
    __atomic_sub_fetch(&held_bytes, (long)n, __ATOMIC_RELAXED);
    free(p);
}

/* The kernel: write, then read back the neighbour's lines `passes` times. The sum has a closed
 * form (passes * (n*base + n(n-1)/2), n = 8*pages) that the study checks launch by launch. */
static uint64_t kernel(unsigned char *buf, uint64_t gid) {
    size_t step = (cfg.scratch / (size_t)cfg.pages) & ~(size_t)63;
    uint64_t base = (cfg.salt ^ gid) * 0x9E3779B97F4A7C15ULL;
    for (int p = 0; p < cfg.pages; p++) {
        volatile uint64_t *line = (volatile uint64_t *)(buf + (size_t)p * step);
        for (int w = 0; w < 8; w++) line[w] = base + (uint64_t)p * 8 + (uint64_t)w;
    }
    uint64_t sum = 0;
    for (int r = 0; r < cfg.passes; r++)
        for (int p = 0; p < cfg.pages; p++) {
            volatile uint64_t *line = (volatile uint64_t *)(buf + (size_t)((p + 1) % cfg.pages) * step);
            for (int w = 0; w < 8; w++) sum += line[w];
        }
    return sum;
}

/* size_limit's free (nvptx_stacks_free): the cached block goes if it is over the limit, or
 * whatever its size when forced. Takes the lock, so it waits for a kernel using the block. */
static int cache_free(int force) {
    int freed = 0;
    pthread_mutex_lock(&cache.mu);
    if (cache.block && (force || cache.size > cfg.limit)) {
        scratch_free(cache.block, cache.size);
        cache.block = NULL;
        cache.size = 0;
        freed = 1;
    }
    pthread_mutex_unlock(&cache.mu);
    return freed;
}

/* The application's data for one launch. The fault injection fails every oom_every-th first
 * attempt; size_limit frees a block over the limit first, and on failure frees the cached block
 * and retries once (GOMP_OFFLOAD_alloc); the other policies have no way out. */
static void *data_alloc(void) {
    if (cfg.policy == SIZE_LIMIT && cache_free(0)) __atomic_add_fetch(&n_limit_frees, 1, __ATOMIC_RELAXED);
    long ask = __atomic_add_fetch(&n_data_asks, 1, __ATOMIC_RELAXED);
    void *p = (cfg.oom_every && ask % cfg.oom_every == 0) ? NULL : try_alloc(cfg.data);
    if (!p && cfg.policy == SIZE_LIMIT) {
        cache_free(1);
        __atomic_add_fetch(&n_oom_retries, 1, __ATOMIC_RELAXED);
        p = try_alloc(cfg.data);
    }
    if (!p) out_of_memory("data", cfg.data);
    return p;
}

/* Getting a block: per_call allocates, locked_cache takes the lock (held through the kernel),
 * pool takes a free block or allocates one of its k. */
static void *acquire(void) {
    if (cfg.policy == PER_CALL) return scratch_alloc(cfg.scratch);
    pthread_mutex_lock(&cache.mu);
    if (cfg.policy == LOCKED_CACHE || cfg.policy == SIZE_LIMIT) {
        if (cache.size < cfg.scratch) { /* reuse if large enough, else free and reallocate */
            if (cache.block) scratch_free(cache.block, cache.size);
            cache.block = scratch_alloc(cfg.scratch);
            n_blocks_made++; /* under the lock */
            cache.size = cfg.scratch;
        }
        return cache.block;
    }
    while (cache.n_free == 0 && cache.n_created >= cfg.k) pthread_cond_wait(&cache.cv, &cache.mu);
    if (cache.n_free > 0) {
        void *p = cache.free_list[--cache.n_free];
        pthread_mutex_unlock(&cache.mu);
        return p;
    }
    cache.n_created++;
    pthread_mutex_unlock(&cache.mu);
    return scratch_alloc(cfg.scratch); /* outside the lock: others may reuse blocks meanwhile */
}

static void release(void *p) {
    if (cfg.policy == PER_CALL) {
        scratch_free(p, cfg.scratch);
    } else if (cfg.policy == LOCKED_CACHE || cfg.policy == SIZE_LIMIT) {
        pthread_mutex_unlock(&cache.mu);
    } else {
        pthread_mutex_lock(&cache.mu);
        cache.free_list[cache.n_free++] = p;
        pthread_cond_signal(&cache.cv);
        pthread_mutex_unlock(&cache.mu);
    }
}

/* Each launch is timed in three segments (acquire, kernel, release): where the time goes. The
 * application's data, if any, is allocated in acquire and freed in release. */
static void *worker(void *arg) {
    long t = (long)arg;
    long lo = cfg.launches * t / cfg.threads, hi = cfg.launches * (t + 1) / cfg.threads;
    pthread_barrier_wait(&go);
    for (long i = lo; i < hi; i++) {
        int64_t t0 = ns_since(&phase_t0);
        void *data = cfg.data ? data_alloc() : NULL;
        void *p = acquire();
        int64_t t1 = ns_since(&phase_t0);
        uint64_t s = kernel(p, (uint64_t)i);
        int64_t t2 = ns_since(&phase_t0);
        release(p);
        if (data) scratch_free(data, cfg.data);
        int64_t t3 = ns_since(&phase_t0);
        start_ns[i] = t0;
        acquire_ns[i] = t1 - t0;
        kernel_ns[i] = t2 - t1;
        release_ns[i] = t3 - t2;
        checksum[i] = s;
    }
    return NULL;
}

static long status_kib(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long v = -1;
    size_t n = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, n) == 0) {
            v = strtol(line + n, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

/* Reset VmHWM to the current RSS (Linux >= 4.0) so the peak belongs to this phase alone. */
static int reset_hwm(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return 0;
    int ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok;
}

static int64_t tv_ns(struct timeval tv) { return (int64_t)tv.tv_sec * 1000000000LL + (int64_t)tv.tv_usec * 1000; }

static int parse(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        char *eq = strchr(argv[i], '=');
        if (!eq) return fprintf(stderr, "expected key=value, got %s\n", argv[i]), 0;
        *eq = 0;
        const char *k = argv[i], *v = eq + 1;
        if (!strcmp(k, "policy")) {
            if (!strcmp(v, "per_call")) cfg.policy = PER_CALL;
            else if (!strcmp(v, "locked_cache")) cfg.policy = LOCKED_CACHE;
            else if (!strcmp(v, "size_limit")) cfg.policy = SIZE_LIMIT;
            else if (!strcmp(v, "pool")) cfg.policy = POOL;
            else return fprintf(stderr, "unknown policy %s\n", v), 0;
        } else if (!strcmp(k, "threads")) cfg.threads = atoi(v);
        else if (!strcmp(k, "launches")) cfg.launches = atol(v);
        else if (!strcmp(k, "scratch")) cfg.scratch = strtoull(v, NULL, 10);
        else if (!strcmp(k, "k")) cfg.k = atoi(v);
        else if (!strcmp(k, "pages")) cfg.pages = atoi(v);
        else if (!strcmp(k, "passes")) cfg.passes = atoi(v);
        else if (!strcmp(k, "malloc")) cfg.pin_threshold = !strcmp(v, "pinned");
        else if (!strcmp(k, "salt")) cfg.salt = strtoull(v, NULL, 10);
        else if (!strcmp(k, "out")) cfg.out = v;
        else if (!strcmp(k, "limit")) cfg.limit = strtoull(v, NULL, 10);
        else if (!strcmp(k, "data")) cfg.data = strtoull(v, NULL, 10);
        else if (!strcmp(k, "oom_every")) cfg.oom_every = atol(v);
        else if (!strcmp(k, "parent")) cfg.parent = atol(v);
        else return fprintf(stderr, "unknown key %s\n", k), 0;
    }
    if (cfg.threads < 1 || cfg.launches < cfg.threads || cfg.k < 1 || cfg.pages < 1 || cfg.passes < 1 || !cfg.out || cfg.oom_every < 0 ||
        (cfg.oom_every && !cfg.data) ||
        cfg.scratch < (size_t)cfg.pages * 64)
        return fprintf(stderr, "bad arguments\n"), 0;
    return 1;
}

int main(int argc, char **argv) {
    if (!parse(argc, argv)) return 2;
    /* The parent may have died before prctl: then this process was already re-parented. */
    if (cfg.parent && (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != (pid_t)cfg.parent)) return 5;
    /* Pinning M_MMAP_THRESHOLD also switches off glibc's dynamic threshold, which otherwise
     * rises to the size of each freed mmapped chunk (up to 32 MiB on 64-bit) so that later
     * blocks of that size come from the heap and stop faulting. Irreversible per process. */
    if (cfg.pin_threshold && !mallopt(M_MMAP_THRESHOLD, 128 * 1024)) return fprintf(stderr, "mallopt failed\n"), 4;

    size_t n = (size_t)cfg.launches;
    start_ns = calloc(n, sizeof *start_ns);
    acquire_ns = calloc(n, sizeof *acquire_ns);
    kernel_ns = calloc(n, sizeof *kernel_ns);
    release_ns = calloc(n, sizeof *release_ns);
    checksum = calloc(n, sizeof *checksum);
    cache.free_list = calloc((size_t)cfg.k, sizeof(void *));
    pthread_t *th = calloc((size_t)cfg.threads, sizeof *th);
    if (!start_ns || !acquire_ns || !kernel_ns || !release_ns || !checksum || !cache.free_list || !th) return fprintf(stderr, "out of memory\n"), 3;
    /* Fault the result arrays in now so their pages do not count against the launches. */
    int64_t *arrays[] = {start_ns, acquire_ns, kernel_ns, release_ns, (int64_t *)checksum};
    for (int a = 0; a < 5; a++) memset(arrays[a], 0, n * sizeof(int64_t));
    pthread_barrier_init(&go, NULL, (unsigned)cfg.threads + 1);

    long rss_before_kib = status_kib("VmRSS:");
    int hwm_reset = reset_hwm();
    struct rusage r0, r1;
    getrusage(RUSAGE_SELF, &r0);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long t = 0; t < cfg.threads; t++) {
        int rc = pthread_create(&th[t], NULL, worker, (void *)t);
        if (rc) return fprintf(stderr, "pthread_create: %s\n", strerror(rc)), 3;
    }
    clock_gettime(CLOCK_MONOTONIC, &phase_t0);
    pthread_barrier_wait(&go); /* all threads start launching together */
    for (long t = 0; t < cfg.threads; t++) pthread_join(th[t], NULL);
    int64_t real_ns = ns_since(&t0);
    getrusage(RUSAGE_SELF, &r1);
    long hwm_kib = status_kib("VmHWM:");

    FILE *f = fopen(cfg.out, "wb");
    int written = f != NULL;
    for (int a = 0; a < 5 && written; a++) written = fwrite(arrays[a], sizeof(int64_t), n, f) == n;
    if (!written || fclose(f) != 0) return fprintf(stderr, "cannot write %s: %s\n", cfg.out, strerror(errno)), 5;
    printf("{\"real_ns\": %lld, \"user_ns\": %lld, \"sys_ns\": %lld, \"minflt\": %ld, \"majflt\": %ld, "
           "\"nvcsw\": %ld, \"nivcsw\": %ld, \"rss_before_kib\": %ld, \"hwm_kib\": %ld, \"hwm_reset\": %s, "
           "\"peak_scratch_bytes\": %ld, \"allocs\": %ld, \"mmapped_allocs\": %ld, \"blocks_created\": %d, "
           "\"limit_frees\": %ld, \"oom_retries\": %ld, \"data_allocs\": %ld, \"glibc\": \"%s\"}\n",
           (long long)real_ns, (long long)(tv_ns(r1.ru_utime) - tv_ns(r0.ru_utime)),
           (long long)(tv_ns(r1.ru_stime) - tv_ns(r0.ru_stime)), r1.ru_minflt - r0.ru_minflt,
           r1.ru_majflt - r0.ru_majflt, r1.ru_nvcsw - r0.ru_nvcsw, r1.ru_nivcsw - r0.ru_nivcsw, rss_before_kib,
           hwm_kib, hwm_reset ? "true" : "false", peak_bytes, n_allocs, n_mmapped,
           cfg.policy == POOL ? cache.n_created : cfg.policy == PER_CALL ? 0 : n_blocks_made,
           n_limit_frees, n_oom_retries, n_data_asks,
#ifdef __GLIBC__
           gnu_get_libc_version()
#else
           "not glibc"
#endif
    );
    return 0;
}
