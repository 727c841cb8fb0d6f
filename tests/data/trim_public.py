"""How the public traces in this folder's trimmed fixtures were cut (see each folder's README).

    python trim_public.py kineto SRC.json.gz DST.json.gz [STEPS]
    python trim_public.py rocprofv3 SRC.json.gz DST.json.gz START_MS WINDOW_MS
    python trim_public.py rocprofv3-streams SRC.json.gz DST.json.gz EVERY

kineto: keep the first STEPS ProfilerSteps (host step ranges and the runtime calls inside them
that launched GPU work, and that GPU work), drop CPU ops, Python functions and flows, keep
only the args the importers read. rocprofv3: the kernel dispatches of one time window, the
symbols they use, the agents' identifying fields and the record-kind strings. rocprofv3-streams:
every stream kept, with every EVERY-th dispatch of each (at least its first), so the streams keep
their order of size. The tests pin
figures that Holistic Trace Analysis computed on the trimmed files themselves
(tests/traces/test_overlap.py).
"""
import gzip
import json
import os
import re
import sys

KEEP_ARGS = ("device", "stream", "correlation", "External id", "labels", "name", "sort_index")
GPU = ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation")
AGENT_KEYS = ("size", "id", "type", "node_id", "logical_node_id", "logical_node_type_id", "gpu_index", "name",
              "product_name", "vendor_name")


def _write(doc, dst):
    with open(dst, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", filename="", compresslevel=9, mtime=0) as f:
        # default separators: HTA finds the rank with the regex '"rank":\s+(\d+)' (a space after the colon)
        f.write(json.dumps(doc).encode())  # no name or time in the gzip header: reproducible


def kineto(src, dst, steps=None):
    d = json.load(gzip.open(src) if src.endswith(".gz") else open(src))
    ev = d["traceEvents"]
    step = sorted((e for e in ev if e.get("cat") == "user_annotation"
                   and re.match(r"ProfilerStep#\d+$", e.get("name", ""))), key=lambda e: e["ts"])
    lo, hi = (step[0]["ts"], step[steps - 1]["ts"] + step[steps - 1]["dur"]) if steps else (float("-inf"), float("inf"))
    keep, corr = [], set()
    for e in ev:
        cat, ph = e.get("cat"), e.get("ph")
        if ph in ("s", "f", "t") or cat in ("cpu_op", "python_function", "fwdbwd", "ac2g", "async_cpu_to_gpu"):
            continue
        if cat in ("cuda_runtime", "cuda_driver", "user_annotation") and not (lo <= e["ts"] <= hi):
            continue
        if cat == "cuda_runtime":
            corr.add((e.get("args") or {}).get("correlation"))
        keep.append(e)
    out = []
    for e in keep:
        if steps and e.get("cat") in GPU[:3] and (e.get("args") or {}).get("correlation") not in corr:
            continue
        if isinstance(e.get("args"), dict):
            e = {**e, "args": {k: v for k, v in e["args"].items() if k in KEEP_ARGS}}
        out.append(e)
    launched = {(e.get("args") or {}).get("correlation") for e in out if e.get("cat") in GPU}
    # runtime calls that launched nothing kept (cudaEventRecord, cudaStreamIsCapturing, ...) go too
    d["traceEvents"] = [e for e in out if e.get("cat") != "cuda_runtime"
                        or (e.get("args") or {}).get("correlation") in launched]
    _write(d, dst)


def rocprofv3(src, dst, start_ms, window_ms, every=None):
    d = json.load(gzip.open(src))
    n = d["rocprofiler-sdk-tool"][0]
    disp = sorted(n["buffer_records"]["kernel_dispatch"], key=lambda r: r["start_timestamp"])
    if every:
        seen = {}
        keep = []
        for r in disp:
            i = seen[r.get("stream_id", {}).get("handle")] = seen.get(r.get("stream_id", {}).get("handle"), -1) + 1
            if i % every == 0:
                keep.append(r)
    else:
        t0 = disp[0]["start_timestamp"] + int(start_ms * 1e6)
        keep = [r for r in disp if t0 <= r["start_timestamp"] < t0 + int(window_ms * 1e6)]
    ids = {r["dispatch_info"]["kernel_id"] for r in keep}
    out = {"metadata": {k: v for k, v in n["metadata"].items() if k in ("pid", "init_time", "fini_time")},
           "agents": [{k: a[k] for k in AGENT_KEYS if k in a} for a in n["agents"]],
           "counters": [], "strings": {"buffer_records": n["strings"]["buffer_records"], "marker_api": []},
           "kernel_symbols": [s for s in n["kernel_symbols"] if s["kernel_id"] in ids],
           "buffer_records": {k: (keep if k == "kernel_dispatch" else []) for k in n["buffer_records"]}}
    _write({"rocprofiler-sdk-tool": [out]}, dst)


if __name__ == "__main__":
    cmd, *rest = sys.argv[1:]
    if cmd == "kineto":
        kineto(rest[0], rest[1], int(rest[2]) if len(rest) > 2 else None)
    elif cmd == "rocprofv3-streams":
        rocprofv3(rest[0], rest[1], 0, 0, every=int(rest[2]))
    else:
        rocprofv3(rest[0], rest[1], float(rest[2]), float(rest[3]))
    print(rest[1], os.path.getsize(rest[1]))
