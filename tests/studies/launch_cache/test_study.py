"""launch-cache: kernel checks, glibc mmap behaviour, validation, seed data, the smoke preset."""

from __future__ import annotations

import re

import numpy as np
import pytest

import studies.launch_cache as study
from studies.launch_cache import analysis, cpu
from studies.launch_cache.measure import GOLDEN, OutOfMemory, check_checksums, expected_checksums
from workbench.running import runner
from workbench.reading.analysis import analyse, sections_of
from workbench.seam.study import ParamError, validate

needs_cc = pytest.mark.skipif(study.requires(study.SPACE.defaults("smoke")) is not None,
                              reason=str(study.requires(study.SPACE.defaults("smoke"))))


def _kernel_in_python(salt: int, gid: int, pages: int, passes: int) -> int:
    """The kernel's arithmetic word by word, as kernels/c/launch_cache.c does it."""
    mask = (1 << 64) - 1
    base = ((salt ^ gid) * int(GOLDEN)) & mask
    lines = [[(base + 8 * p + w) & mask for w in range(8)] for p in range(pages)]
    s = 0
    for _ in range(passes):
        for p in range(pages):
            s = (s + sum(lines[(p + 1) % pages])) & mask
    return s


@pytest.mark.parametrize("pages,passes", [(1, 1), (3, 2), (64, 1)])
def test_closed_form_matches_the_kernel_arithmetic(pages, passes):
    salt = 0xDEADBEEF12345
    want = expected_checksums(salt, 5, pages, passes)
    assert [int(x) for x in want] == [_kernel_in_python(salt, g, pages, passes) for g in range(5)]


def test_a_corrupted_launch_is_named():
    got = expected_checksums(7, 100, 16).copy()
    got[42] += np.uint64(1)
    ok, msg = check_checksums(got, 7, 16)
    assert not ok and "1 of 100" in msg and "launch 42" in msg


@needs_cc
@pytest.mark.parametrize("policy", ["per_call", "locked_cache", "size_limit", "pool"])
def test_c_program_checks_out_and_counts_blocks(policy):
    exe = cpu.build()
    ph = cpu.run_phase(exe, policy, threads=3, launches=60, scratch_bytes=1 << 20, k=2, pages=32, passes=2,
                       malloc="pinned", salt=99)
    assert check_checksums(ph.checksum, 99, 32, 2)[0]
    assert (ph.lat_ns > 0).all() and ph.real_ns > 0
    assert list(ph.segments_ns) == ["acquire", "kernel", "release"]
    assert (ph.lat_ns == ph.segments_ns["acquire"] + ph.segments_ns["kernel"] + ph.segments_ns["release"]).all()
    held = {"per_call": 3 << 20, "locked_cache": 1 << 20, "size_limit": 1 << 20, "pool": 2 << 20}[policy]
    assert ph.peak_bytes <= held  # pool never holds more than k blocks, the lock one
    if policy == "per_call":
        assert ph.extra["allocs"] == 60 and ph.extra["mmapped_allocs"] == 60
        assert ph.minflt >= 60 * 32  # every launch faults its touched pages in again


@needs_cc
def test_dynamic_mmap_threshold_stops_the_faults_below_32_mib():
    """glibc raises its mmap threshold after freeing a mapped block: per-call gets cached for free."""
    exe = cpu.build()
    pinned = cpu.run_phase(exe, "per_call", 1, 40, 1 << 20, 1, 32, 1, "pinned", 5)
    dynamic = cpu.run_phase(exe, "per_call", 1, 40, 1 << 20, 1, 32, 1, "dynamic", 5)
    big = cpu.run_phase(exe, "per_call", 1, 10, 40 << 20, 1, 16, 1, "dynamic", 5)
    assert pinned.extra["mmapped_allocs"] == 40
    assert dynamic.extra["mmapped_allocs"] <= 2 and dynamic.minflt < pinned.minflt / 4
    assert big.extra["mmapped_allocs"] == 10  # above the 32 MiB ceiling: mapped every time


@needs_cc
def test_size_limit_keeps_a_block_under_the_limit_and_frees_one_over_it():
    """The patch's limit: a block over it is freed before every data allocation, one under it stays."""
    exe = cpu.build()
    args = dict(threads=1, launches=80, scratch_bytes=4 << 20, k=1, pages=32, passes=1, malloc="pinned", salt=11,
                data_bytes=64 << 10)
    under = cpu.run_phase(exe, "size_limit", **args, limit=8 << 20)
    over = cpu.run_phase(exe, "size_limit", **args, limit=1 << 20)
    for ph in (under, over):
        assert check_checksums(ph.checksum, 11, 32)[0]
        assert ph.extra["data_allocs"] == 80 and ph.extra["oom_retries"] == 0
    assert under.extra["blocks_created"] == 1 and under.extra["limit_frees"] == 0
    assert under.extra["allocs"] == 80 + 1
    # Over the limit every data allocation but the first finds the block cached and frees it;
    # the next launch makes it again.
    assert over.extra["limit_frees"] == 79 and over.extra["blocks_created"] == 80
    assert over.extra["allocs"] == 80 + 80


@needs_cc
def test_out_of_memory_is_retried_by_size_limit_only():
    """Injected allocation failures: size_limit frees its cached block and retries; the locked cache cannot."""
    exe = cpu.build()
    args = dict(threads=1, launches=50, scratch_bytes=1 << 20, k=1, pages=16, passes=1, malloc="pinned", salt=3,
                data_bytes=4096, oom_every=7)
    ph = cpu.run_phase(exe, "size_limit", **args)
    assert check_checksums(ph.checksum, 3, 16)[0]
    assert ph.extra["oom_retries"] == 50 // 7
    assert ph.extra["blocks_created"] == 1 + 50 // 7  # each retry freed the cached block; the next launch remade it
    with pytest.raises(OutOfMemory, match="data allocation of 4096 bytes failed under policy locked_cache"):
        cpu.run_phase(exe, "locked_cache", **args)


@needs_cc
def test_a_policy_out_of_memory_fails_its_variant_and_the_run_goes_on(store):
    rec = runner.execute(study, {"policies": ["locked_cache", "size_limit"], "malloc": "pinned", "data_bytes": 4096,
                                 "oom_every": 5, "repeat": 2}, store, preset="smoke")
    assert rec.status == "complete"
    v = {x.variant: x for x in rec.variants}
    assert not v["locked_cache/pinned"].correct and "out of memory" in v["locked_cache/pinned"].check
    assert v["locked_cache/pinned"].samples_ns == []
    assert v["size_limit/pinned"].correct and len(v["size_limit/pinned"].samples_ns) == 400
    pol = study.analyze(rec)["policies"].set_index("variant")
    assert pol.loc["size_limit/pinned", "oom_retries"] == 200 // 5


def test_validation_names_the_parameter():
    with pytest.raises(ParamError, match="policies"):
        validate(study, {"target": "cpu", "policies": "graph"})
    with pytest.raises(ParamError, match="launches"):
        validate(study, {"threads": 8, "launches": 4})
    with pytest.raises(ParamError, match="scratch_bytes"):
        validate(study, {"scratch_bytes": 8192, "touch_pages": 256})
    with pytest.raises(ParamError, match="target"):
        validate(study, {"target": "tpu"})
    with pytest.raises(ParamError, match="blocks"):
        validate(study, {"target": "cpu", "blocks": 0})
    with pytest.raises(ParamError, match="oom_every"):
        validate(study, {"oom_every": 3})
    p = validate(study, {"target": "gpu"})
    assert study.policies_of(p) == list(study.GPU_POLICIES)


def test_requires_says_how_to_get_a_compiler(monkeypatch):
    from workbench.running import cbuild

    monkeypatch.setattr(cbuild, "compiler", lambda: None)
    assert "C compiler" in study.requires(study.SPACE.defaults("smoke"))


def test_seed_figures_parse_and_give_the_seed_ratios():
    assert analysis.parse_time("12m10.456s") == pytest.approx(730.456)
    assert analysis.fmt_time(730.456) == "12m10.456s"
    s = analysis.seed_tables()["seed_summary"].set_index(["launches", "build"])
    assert s.loc[(256, "patch"), "real_vs_baseline"] == pytest.approx(1.0, abs=0.01)
    assert s.loc[(256, "patch"), "user_vs_baseline"] == pytest.approx(0.51, abs=0.01)
    assert s.loc[(1048576, "patch"), "sys_vs_baseline"] == pytest.approx(0.08, abs=0.01)
    assert s.loc[(1048576, "baseline"), "real_s"] == pytest.approx(735.391)


@needs_cc
def test_smoke_run_records_checked_variants_and_reports(store):
    rec = runner.execute(study, {}, store, preset="smoke")
    assert rec.status == "complete"
    names = [v.variant for v in rec.variants]
    # the policies, then the A/A twins of per_call (timed in every round: the run's null controls)
    assert names == ["per_call/pinned", "per_call/dynamic", "locked_cache/pinned", "locked_cache/dynamic",
                     "size_limit/pinned", "size_limit/dynamic", "pool3/pinned", "pool3/dynamic",
                     "aa:per_call/pinned", "aa:per_call/dynamic"]
    assert all(v.blocks and len(v.blocks) == len(v.samples_ns) for v in rec.variants)
    assert len({v.blocks[0] for v in rec.variants}) == len(rec.variants)  # each phase a process: a block of its own
    assert all(v.correct for v in rec.variants), [v.check for v in rec.variants if not v.correct]
    assert all(len(v.samples_ns) == 200 for v in rec.variants)
    assert all(v.params["provider"] in study.CPU_POLICIES for v in rec.variants)
    a = analyse(rec)
    assert not a.errors, a.errors
    t = a.tables
    assert "aa:per_call/pinned" not in set(t["policies"]["variant"])  # a null control, not a policy
    assert not t["drift"]["measured"].iloc[0]  # one phase a variant: too few to measure the drift
    pol = t["policies"].set_index("variant")
    assert pol.loc["per_call/pinned", "minflt_per_launch"] >= 64
    assert pol.loc["locked_cache/pinned", "peak_bytes"] == 4 << 20
    assert {"real_s", "user_s", "sys_s", "p50_us", "p99_us", "peak_mib"} <= set(pol.columns)
    shares = t["segments"].groupby("variant")["share"].sum()
    assert np.allclose(shares, 1.0) and len(shares) == 8
    # one phase: every phase ratio is shown as not meaningful, never stated in the verdict
    vs = t["derived"][t["derived"]["quantity"] == "vs per_call"]
    assert len(vs) == 6 * 3 and (vs["status"] == "not meaningful").all()
    assert not re.search(r"per_call's[^:.]*: [\d.]+x", a.verdict) and "lowest real time" in a.verdict
    assert set(a.claims["status"]) == {"not testable here"}  # one phase of short kernels on the CPU
    assert "at least 2 a variant" in a.claims.set_index("id").loc["003-many-launches-cut-all-three", "why"]
    for mode in ("pinned", "dynamic"):  # the verdict names the key table's fastest of each mode
        rows = [v for v in t["key"]["variant"] if v.endswith(mode)]
        assert pol.loc[rows[0], "real_s"] == pol.loc[rows, "real_s"].min()
        assert f"malloc={mode}: lowest real time {rows[0]} " in a.verdict
    text = "\n".join(sections_of(a))
    assert "3m55.189s" in text and "per_call/pinned" in text  # the seed's figures beside the live ones
    assert [a[0] for a in rec.attachments] == ["timeline.json"]


@needs_cc
def test_a_wrong_checksum_marks_the_variant_failed(store, monkeypatch):
    real = cpu.run_phase

    def broken(*a, **kw):
        ph = real(*a, **kw)
        ph.checksum[3] ^= np.uint64(1)
        return ph

    monkeypatch.setattr(cpu, "run_phase", broken)
    rec = runner.execute(study, {"policies": "pool", "malloc": "pinned"}, store, preset="smoke")
    (v,) = rec.variants
    assert not v.correct and "launch 3" in v.check


@pytest.mark.gpu
def test_gpu_smoke(store):
    params = {"target": "gpu", "launches": 64, "repeat": 1}
    reason = study.requires(validate(study, params, preset="smoke"))
    if reason:
        pytest.skip(reason)
    rec = runner.execute(study, params, store, preset="smoke")
    twins = [v for v in rec.variants if v.params.get("twin_of")]
    assert len(rec.variants) == 12 + len(twins) and twins  # the A/A null controls of per_call
    assert all(v.correct for v in rec.variants), [v.check for v in rec.variants if not v.correct]


class _FakeCupy:
    """Enough of CuPy to drive the GPU phase's host logic (threads, policies, graph, checks)
    on a machine without a GPU: kernels run on the host at once, streams do nothing."""

    def __init__(self):
        import itertools
        import threading
        import types

        fake = self
        self._ptrs = itertools.count(1 << 20, 1 << 26)
        self._local = threading.local()
        self.uint64, self.uint32 = np.uint64, np.uint32
        self.__version__ = "fake"

        class Array:
            def __init__(self, a):
                self.a = a

            def __getitem__(self, sl):
                return Array(self.a[sl])

            def get(self):
                return self.a.copy()

        class Stream:
            def __init__(self, non_blocking=False):
                self.capture = None

            def __enter__(self):
                fake._local.stream = self
                return self

            def __exit__(self, *exc):
                fake._local.stream = None

            def synchronize(self):
                pass

            def wait_event(self, event):
                pass

            def begin_capture(self):
                self.capture = []

            def end_capture(self):
                calls, self.capture = self.capture, None
                return types.SimpleNamespace(launch=lambda stream=None: [k.run(a, g) for k, a, g in calls])

        class Kernel:
            def __init__(self, src, name):
                pass

            def compile(self):
                pass

            def __call__(self, grid, block, args):
                stream = getattr(fake._local, "stream", None)
                if stream is not None and stream.capture is not None:
                    stream.capture.append((self, args, grid[0]))
                else:
                    self.run(args, grid[0])

            def run(self, args, blocks=1):
                ptr, _step, pages, passes, out, seq, done, gid0, salt = args
                assert int(ptr) > 0 and int(done.a[0]) == 0
                i = int(seq.a[0])
                gid = int(gid0) + i
                out.a[gid] = expected_checksums(int(salt) ^ gid, 1, int(pages), int(passes), blocks)[0]
                seq.a[0] = i + 1

        class Pool:
            def __init__(self):
                self.total = 0

            def malloc(self, n):
                self.total = max(self.total, n)
                return types.SimpleNamespace(ptr=next(fake._ptrs))

            def total_bytes(self):
                return self.total

            def free_all_blocks(self):
                pass

        runtime = types.SimpleNamespace(
            malloc=lambda n: next(fake._ptrs), free=lambda p: None, memGetInfo=lambda: (1 << 40, 1 << 41),
            getDeviceCount=lambda: 1, driverGetVersion=lambda: 0, runtimeGetVersion=lambda: 0,
            getDeviceProperties=lambda i: {"name": b"Fake GPU", "multiProcessorCount": 4})
        device = types.SimpleNamespace(use=lambda: None, synchronize=lambda: None)
        self.cuda = types.SimpleNamespace(
            runtime=runtime, Device=lambda i: device, Stream=Stream, MemoryPool=Pool,
            Event=lambda disable_timing=False: types.SimpleNamespace(record=lambda stream=None: None))
        self.RawKernel = Kernel
        self.zeros = lambda n, dtype: Array(np.zeros(n, dtype=dtype))


def test_gpu_phase_logic_with_a_fake_cupy(store, monkeypatch):
    """Every GPU policy's host path (threads, block hand-over, graph replay, segments) runs and checks."""
    import sys

    from studies.launch_cache import gpu

    monkeypatch.setitem(sys.modules, "cupy", _FakeCupy())
    gpu._kernel.cache_clear()
    try:
        rec = runner.execute(study, {"target": "gpu", "threads": 3, "launches": 60, "repeat": 1}, store,
                             preset="smoke")
    finally:
        gpu._kernel.cache_clear()
    assert len(rec.variants) == 12 + 2  # and the A/A twins of per_call
    assert all(v.correct for v in rec.variants), [v.check for v in rec.variants if not v.correct]
    t = study.analyze(rec)
    peak = t["policies"].set_index("variant")["peak_bytes"]
    assert peak["locked_cache/sync"] == 4 << 20 and peak["pool3/async"] <= 3 * (4 << 20)
    assert set(t["segments"]["segment"]) == {"acquire", "launch", "sync", "release"}


def test_gpu_size_limit_retries_and_fill_blocks_with_a_fake_cupy(store, monkeypatch):
    """The GPU policies' data path: size_limit frees its block and retries an out-of-memory, the
    locked cache fails its variant; blocks=0 fills the (fake) GPU and the sums count every block."""
    import sys

    from studies.launch_cache import gpu

    monkeypatch.setitem(sys.modules, "cupy", _FakeCupy())
    gpu._kernel.cache_clear()
    try:
        rec = runner.execute(study, {"target": "gpu", "threads": 2, "launches": 40, "repeat": 1, "sync": True,
                                     "policies": ["locked_cache", "size_limit"], "data_bytes": 4096, "oom_every": 4,
                                     "blocks": 0}, store, preset="smoke")
    finally:
        gpu._kernel.cache_clear()
    assert rec.outputs["blocks"] == gpu.FILL_BLOCKS_PER_SM * 4
    v = {x.variant: x for x in rec.variants}
    assert not v["locked_cache/sync"].correct and "injected" in v["locked_cache/sync"].check
    assert v["size_limit/sync"].correct, v["size_limit/sync"].check
    pol = study.analyze(rec)["policies"].set_index("variant")
    assert pol.loc["size_limit/sync", "oom_retries"] == 10 and pol.loc["size_limit/sync", "limit_frees"] == 0


def test_a_gpu_phase_starts_from_a_placement_chosen_by_its_salt(monkeypatch):
    """A kernel's time depends on where its block lies, so each phase holds salt % PLACEMENTS
    scratch-sized spacers before its policy allocates (and frees them with its blocks): a policy
    that keeps one block no longer gets the same place in every phase."""
    import sys

    from studies.launch_cache import gpu

    fake, held = _FakeCupy(), set()
    malloc = fake.cuda.runtime.malloc

    def tracked(n):
        held.add(ptr := malloc(n))
        return ptr

    fake.cuda.runtime.malloc, fake.cuda.runtime.free = tracked, held.discard
    monkeypatch.setitem(sys.modules, "cupy", fake)
    gpu._kernel.cache_clear()
    try:
        for salt in (3 * gpu.PLACEMENTS, 3 * gpu.PLACEMENTS + 5, 5 * gpu.PLACEMENTS + gpu.PLACEMENTS - 1):
            ph = gpu.run_phase("locked_cache", 2, 20, 1 << 20, 1, 32, 1, True, salt)
            assert ph.extra["placement_spacers"] == salt % gpu.PLACEMENTS
            assert not held, "a spacer or block outlived its phase"
            assert check_checksums(ph.checksum, salt, 32, 1, 1)[0]
    finally:
        gpu._kernel.cache_clear()
