"""Helpers of the launch-cache study: what one launch phase returns and how launches are checked.

``cpu`` runs the phase in a compiled C program (kernels/c/launch_cache.c), ``gpu`` in CuPy with
host threads; both hand back a :class:`Phase` and use the same kernel arithmetic, so one
closed-form reference checks every launch of either.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from workbench.data.record import VariantResult

GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # the multiplier both kernels use
SOFTSTACK_CACHE_LIMIT = 134217728  # libgomp's limit on the soft-stack block kept cached (128 MiB)


class OutOfMemory(RuntimeError):
    """A launch could not get its memory and its policy has no way out: the variant fails."""


@dataclass
class Phase:
    """One timed launch phase (all threads, all launches) of one policy.

    Per-launch arrays are in launch order (thread t owns a contiguous slice); ``start_ns``
    counts from the phase start. ``segments_ns`` splits each launch's time into consecutive
    parts (e.g. acquire, kernel, release) that add up to ``lat_ns``. ``peak_bytes`` is the
    scratch held at once as the policy counts it.
    """

    real_ns: int
    user_ns: int
    sys_ns: int
    minflt: int
    majflt: int
    nvcsw: int
    nivcsw: int
    peak_bytes: int
    start_ns: np.ndarray
    segments_ns: dict[str, np.ndarray]
    checksum: np.ndarray
    thread_of: np.ndarray  # host thread index per launch
    extra: dict = field(default_factory=dict)

    @property
    def lat_ns(self) -> np.ndarray:
        return np.sum(list(self.segments_ns.values()), axis=0)

    def counters(self) -> dict:
        """The scalar figures of the phase (what a `time` run would print, and more)."""
        return {"real_s": self.real_ns / 1e9, "user_s": self.user_ns / 1e9, "sys_s": self.sys_ns / 1e9,
                "minflt": self.minflt, "majflt": self.majflt, "nvcsw": self.nvcsw, "nivcsw": self.nivcsw,
                "peak_bytes": self.peak_bytes, **self.extra}


def split(launches: int, threads: int) -> list[tuple[int, int]]:
    """Thread t's launches [lo, hi): the same split the C program uses."""
    return [(launches * t // threads, launches * (t + 1) // threads) for t in range(threads)]


def thread_index(launches: int, threads: int) -> np.ndarray:
    out = np.empty(launches, dtype=np.int32)
    for t, (lo, hi) in enumerate(split(launches, threads)):
        out[lo:hi] = t
    return out


def expected_checksums(salt: int, launches: int, pages: int, passes: int = 1, blocks: int = 1) -> np.ndarray:
    """Closed form of each launch's checksum: blocks * passes * (n*base + n(n-1)/2), n = 8*pages,
    mod 2^64.

    The kernel writes base+j for j < n (base = (salt ^ launch) * GOLDEN) and sums the
    neighbours' lines, which together are the same n words, ``passes`` times; on the GPU each
    of ``blocks`` thread blocks does the whole of it and adds its sum to the launch's result.
    """
    gid = np.arange(launches, dtype=np.uint64)
    n = np.uint64(8 * pages)
    with np.errstate(over="ignore"):
        base = (np.uint64(salt) ^ gid) * GOLDEN
        return (base * n + np.uint64((8 * pages) * (8 * pages - 1) // 2)) * np.uint64(passes) * np.uint64(blocks)


def check_checksums(got: np.ndarray, salt: int, pages: int, passes: int = 1, blocks: int = 1) -> tuple[bool, str]:
    """Compare every launch's checksum with the closed form; the message says where it broke."""
    want = expected_checksums(salt, len(got), pages, passes, blocks)
    bad = np.flatnonzero(got.astype(np.uint64) != want)
    if bad.size == 0:
        return True, f"all {len(got)} launch checksums match the closed form"
    i = int(bad[0])
    return False, (f"{bad.size} of {len(got)} launch checksums wrong (first: launch {i}, got {int(got[i])}, "
                   f"want {int(want[i])}): a block was shared by two launches at once or the kernel is wrong")


# --- a policy's result from its phases ------------------------------------------------------------

def percentiles(lat_ns: np.ndarray) -> dict[str, float]:
    q = np.percentile(lat_ns, [50, 90, 99, 99.9])
    return {"p50": float(q[0]), "p90": float(q[1]), "p99": float(q[2]), "p999": float(q[3]),
            "max": float(lat_ns.max()), "mean": float(lat_ns.mean())}


def segment_stats(x: np.ndarray) -> dict[str, float]:
    """Mean (the means of the segments add up to the mean launch), median and p99, in ns."""
    q = np.percentile(x, [50, 99])
    return {"mean": float(x.mean()), "p50": float(q[0]), "p99": float(q[1])}


def subsample(x: np.ndarray, keep: int) -> tuple[np.ndarray, int]:
    """The indices of at most ``keep`` values, evenly spaced in launch order, and the stride
    (reported with the samples)."""
    if len(x) <= keep:
        return np.arange(len(x)), 1
    return np.linspace(0, len(x) - 1, keep).round().astype(np.int64), int(np.ceil(len(x) / keep))


def trace_events(variant: str, pid: int, phase, per_thread: int) -> list[dict]:
    """Chrome-trace spans of the first launches of each thread (ts/dur in us)."""
    events = [{"ph": "M", "name": "process_name", "pid": pid, "args": {"name": variant}}]
    for t in np.unique(phase.thread_of):
        idx = np.flatnonzero(phase.thread_of == t)[:per_thread]
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": int(t), "args": {"name": f"host thread {t}"}})
        lat = phase.lat_ns
        for i in idx:
            parts = {f"{name}_us": float(seg[i]) / 1e3 for name, seg in phase.segments_ns.items()}
            events.append({"ph": "X", "cat": "launch", "name": "launch", "pid": pid, "tid": int(t),
                           "ts": phase.start_ns[i] / 1e3, "dur": lat[i] / 1e3, "args": {"launch": int(i), **parts}})
    return events


def variant_result(name: str, vparams: dict, a: dict, params) -> VariantResult:
    """One policy's result from its phases: latencies pooled over phases (subsampled for
    storage, percentiles from all), per-segment statistics, each phase's counters, the checks."""
    lat = np.concatenate(a["lat"])
    idx, stride = subsample(lat, params["max_samples"])
    samples = lat[idx].astype(float).tolist()
    # each phase is a process of its own: a block of the run (the variants' phases alternate)
    blocks = np.concatenate([np.full(len(x), b) for x, b in zip(a["lat"], a["blocks"])])[idx].tolist()
    done = len(a["reps"])
    phases = f"{done} phases" if done == params["repeat"] else f"{done} of {params['repeat']} phases"
    check = "; ".join(a["fails"]) if a["fails"] else f"{phases}: {a['check']}"
    segments = {seg: segment_stats(np.concatenate([d[seg] for d in a["seg"]])) for seg in a["seg"][0]}
    return VariantResult(name, vparams, samples, not a["fails"], check, {
        "repeats": a["reps"], "lat_pct_ns": percentiles(lat), "segments_ns": segments,
        "launches_timed": int(lat.size), "samples_stride": stride, "touch_pages": params["touch_pages"],
    }, blocks)
