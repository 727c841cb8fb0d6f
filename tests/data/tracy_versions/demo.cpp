// A small Tracy-instrumented program for the workbench's reader fixtures: named threads,
// nested zones with dynamic names and texts, a lock, messages, a plot, frame marks and a
// GPU context fed by hand (GPU timestamps from the CPU clock, as an emulated device queue).
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "tracy/Tracy.hpp"
#include "client/TracyProfiler.hpp"
#include "common/TracyAlloc.hpp"

static int64_t steady_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::steady_clock::now().time_since_epoch()).count();
}

static volatile double sink;
static void spin_us(int us) {
    auto end = steady_ns() + us * 1000LL;
    double x = 1.0;
    while (steady_ns() < end) x = std::sqrt(x + 1.0);
    sink = x;
}

// An emulated GPU queue: a Tracy GPU context whose "device" timestamps are steady_clock ns.
struct FakeGpu {
    uint8_t ctx;
    uint16_t query = 0;
    FakeGpu() : ctx(tracy::GetGpuCtxCounter().fetch_add(1)) {
        auto item = tracy::Profiler::QueueSerial();
        tracy::MemWrite(&item->hdr.type, tracy::QueueType::GpuNewContext);
        tracy::MemWrite(&item->gpuNewContext.cpuTime, tracy::Profiler::GetTime());
        tracy::MemWrite(&item->gpuNewContext.gpuTime, steady_ns());
        memset(&item->gpuNewContext.thread, 0, sizeof(item->gpuNewContext.thread));
        tracy::MemWrite(&item->gpuNewContext.period, 1.0f);
        tracy::MemWrite(&item->gpuNewContext.type, tracy::GpuContextType::OpenCL);
        tracy::MemWrite(&item->gpuNewContext.context, ctx);
        tracy::MemWrite(&item->gpuNewContext.flags, tracy::GpuContextFlags(0));
        tracy::Profiler::QueueSerialFinish();
        const char name[] = "emulated GPU queue";
        auto ptr = (char*)tracy::tracy_malloc(sizeof(name) - 1);
        memcpy(ptr, name, sizeof(name) - 1);
        item = tracy::Profiler::QueueSerial();
        tracy::MemWrite(&item->hdr.type, tracy::QueueType::GpuContextName);
        tracy::MemWrite(&item->gpuContextNameFat.context, ctx);
        tracy::MemWrite(&item->gpuContextNameFat.ptr, (uint64_t)ptr);
        tracy::MemWrite(&item->gpuContextNameFat.size, (uint16_t)(sizeof(name) - 1));
        tracy::Profiler::QueueSerialFinish();
    }
    // "launch" a kernel: CPU-side zone begin/end now, device time measured around the work
    void kernel(const tracy::SourceLocationData* srcloc, int work_us) {
        uint16_t qb = query++, qe = query++;
        auto item = tracy::Profiler::QueueSerial();
        tracy::MemWrite(&item->hdr.type, tracy::QueueType::GpuZoneBeginSerial);
        tracy::MemWrite(&item->gpuZoneBegin.cpuTime, tracy::Profiler::GetTime());
        tracy::MemWrite(&item->gpuZoneBegin.srcloc, (uint64_t)srcloc);
        tracy::MemWrite(&item->gpuZoneBegin.thread, tracy::GetThreadHandle());
        tracy::MemWrite(&item->gpuZoneBegin.queryId, qb);
        tracy::MemWrite(&item->gpuZoneBegin.context, ctx);
        tracy::Profiler::QueueSerialFinish();
        int64_t t0 = steady_ns();
        spin_us(work_us);
        int64_t t1 = steady_ns();
        item = tracy::Profiler::QueueSerial();
        tracy::MemWrite(&item->hdr.type, tracy::QueueType::GpuZoneEndSerial);
        tracy::MemWrite(&item->gpuZoneEnd.cpuTime, tracy::Profiler::GetTime());
        tracy::MemWrite(&item->gpuZoneEnd.thread, tracy::GetThreadHandle());
        tracy::MemWrite(&item->gpuZoneEnd.queryId, qe);
        tracy::MemWrite(&item->gpuZoneEnd.context, ctx);
        tracy::Profiler::QueueSerialFinish();
        for (auto [q, t] : {std::pair<uint16_t, int64_t>{qb, t0}, {qe, t1}}) {
            item = tracy::Profiler::QueueSerial();
            tracy::MemWrite(&item->hdr.type, tracy::QueueType::GpuTime);
            tracy::MemWrite(&item->gpuTime.gpuTime, t);
            tracy::MemWrite(&item->gpuTime.queryId, q);
            tracy::MemWrite(&item->gpuTime.context, ctx);
            tracy::Profiler::QueueSerialFinish();
        }
    }
};

static TracyLockable(std::mutex, results_lock);
static std::atomic<int> done_tiles{0};

static void worker(int id, int iters) {
    char name[32];
    snprintf(name, sizeof(name), "worker-%d", id);
    tracy::SetThreadName(name);
    for (int i = 0; i < iters; i++) {
        ZoneScopedN("tile");
        char dyn[48];
        int n = snprintf(dyn, sizeof(dyn), "tile_%d_of_step_%d", id, i);
        ZoneName(dyn, n);
        ZoneText("w", 1);
        spin_us(300 + 100 * id);
        {
            std::lock_guard<LockableBase(std::mutex)> g(results_lock);
            ZoneScopedN("reduce");
            spin_us(50);
            done_tiles++;
        }
    }
}

int main() {
    tracy::SetThreadName("main");
    const int steps = 4;
    FakeGpu gpu;
    static constexpr tracy::SourceLocationData gemm_loc{"gemm", "gemm_kernel", __FILE__, __LINE__, 0};
    static constexpr tracy::SourceLocationData copy_loc{"copy", "copy_kernel", __FILE__, __LINE__, 0};
    TracyMessageL("demo start");
    std::thread a(worker, 0, 2 * steps), b(worker, 1, 2 * steps);
    for (int s = 0; s < steps; s++) {
        ZoneScopedN("step");
        char msg[32];
        int n = snprintf(msg, sizeof(msg), "step %d", s);
        TracyMessage(msg, n);
        {
            ZoneScopedN("prepare");
            spin_us(200);
            TracyPlot("queue_depth", (int64_t)(s * 2 + 1));
        }
        {
            ZoneScopedN("launch");
            gpu.kernel(&gemm_loc, 400);
            gpu.kernel(&copy_loc, 100);
        }
        TracyPlot("queue_depth", (int64_t)0);
        FrameMark;
    }
    a.join();
    b.join();
    TracyMessageL("demo end");
    std::printf("tiles %d\n", done_tiles.load());
    return 0;
}
