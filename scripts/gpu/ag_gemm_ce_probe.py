"""Old (main before the fix) vs new copy-engine fetch, one GPU, emulated peers (pinned host):
copies alone and the whole kernel, interleaved with cuBLAS, every variant checked first and after
(traces/ag-gemm/ce_probe_h100*.md). A one-off: the old kernel is main at 418591e, loaded as a
second package beside this one. From the repository root:

    mkdir -p oldk/kernels_old/triton && touch oldk/kernels_old/__init__.py oldk/kernels_old/triton/__init__.py
    for f in ag_gemm copyengine; do git show 418591e:kernels/triton/$f.py > oldk/kernels_old/triton/$f.py; done
    sed -i 's/from kernels.triton import copyengine/from kernels_old.triton import copyengine/' \
        oldk/kernels_old/triton/ag_gemm.py
    python scripts/gpu/ag_gemm_ce_probe.py 12      # rounds
"""
import statistics, sys, time
sys.path.insert(0, "."); sys.path.insert(0, "oldk")
import torch
import kernels_old.triton.ag_gemm as old
import kernels.triton.ag_gemm as new
from studies.ag_gemm import kernelbench as kb

def copies_first(hb, out):
    args, kwargs = hb.launch_args(out)
    hb.ce.mark_start()
    hb.ce.issue(hb.epoch)
    new.ag_gemm_hbm_kernel[(hb.programs,)](*args, **kwargs)
    hb.ce.join()
    return out


def exposed(fn, n=12):
    """us per call from an idle GPU (no spin first): the host's issue time shows where it is longer."""
    flush = torch.empty(kb.FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    xs = []
    for _ in range(n):
        flush.zero_(); torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); torch.cuda.synchronize()
        xs.append(a.elapsed_time(b) * 1e3)
    return statistics.median(xs[2:])


REPEAT = int(sys.argv[1]) if len(sys.argv) > 1 else 15
print("device:", torch.cuda.get_device_name(0), "| torch", torch.__version__, flush=True)
for m, wss in ((1024, (2, 4)), (4096, (2,)), (16384, (2,))):
    t0 = time.time()
    prob = kb.make_problem(m, 3584, 8192, "fp16")
    cands = [("cublas", kb.build("cublas", prob, 1, new.HbmKnobs()))]
    for ws in wss:
        for tag, mod in (("old", old), ("new", new)):
            for meth in ("ce-copy", "emulated-ce"):
                cands.append((f"{meth} ws{ws} {tag}", kb.build(meth, prob, ws, mod.HbmKnobs(), kmod=mod)))
        c = kb.build("emulated-ce", prob, ws, new.HbmKnobs())
        cands.append((f"emulated-ce ws{ws} new, copies queued before the launch",
                      kb.Contestant((lambda hb=c.hbm, out=c.out: copies_first(hb, out)), c.out, c.hbm, c.peers)))
        cands.append((f"emulated (SM fetch) ws{ws}", kb.build("emulated", prob, ws, new.HbmKnobs())))
    good = []
    for name, c in cands:
        ok, msg = kb.check(c, prob)
        mech = c.hbm.mechanism["fetch"] if c.hbm is not None else ""
        print(f"  check {name}: {ok} {msg[:90]} | {mech[:110]}", flush=True)
        if ok:
            good.append((name, c))
    host = {}
    for name, c in good:  # host us per call (GPU idle between calls): what a real call exposes
        xs = []
        for _ in range(14):
            torch.cuda.synchronize(); h = time.perf_counter(); c.fn(); xs.append((time.perf_counter() - h) * 1e6)
        torch.cuda.synchronize()
        host[name] = (statistics.median(xs[2:]), exposed(c.fn))
    samples = kb.time_interleaved([c.fn for _, c in good], REPEAT)
    base = statistics.median(samples[0]) / 1e3
    print(f"\n### fp16 M={m} N=3584 K=8192 ({REPEAT} interleaved rounds, L2 flushed, GPU spin before each start)\n")
    print("| variant | device us median [min, max] | / cuBLAS | host us per call | us per call from an idle GPU | check after timing |")
    print("|---|---|---|---|---|---|")
    for (name, c), s in zip(good, samples):
        us = [x / 1e3 for x in s]
        ok, msg = kb.check(c, prob)
        print(f"| {name} | {statistics.median(us):,.1f} [{min(us):,.1f}, {max(us):,.1f}] | "
              f"{statistics.median(us) / base:.2f}x | {host[name][0]:,.0f} | {host[name][1]:,.0f} | {'ok' if ok else msg[:60]} |", flush=True)
    print(f"({time.time() - t0:.0f} s)\n", flush=True)
    del cands, good, prob
    torch.cuda.empty_cache()
