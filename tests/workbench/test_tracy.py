"""The workbench's Tracy binding (workbench/running/tracy.py): inert without IREE's Tracy runtime, fixed
names, nesting kept whole, nothing emitted without a capture by default. A capture through the
real runtime: tests/studies/cpu_reduction/test_tracy_zones.py."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import warnings

import pytest

from workbench.running import capture, tracy
from tests.support.paths import ROOT

#: run in a child: use every call of the binding and report what was opened
_PROBE = r"""
import ctypes, json, os, sys
opened = []
real = ctypes.CDLL.__init__
def spy(self, name, *a, **k):
    opened.append(str(name))
    return real(self, name, *a, **k)
ctypes.CDLL.__init__ = spy
import iree.runtime
from workbench.running import tracy
@tracy.zone("py.decorated", text="t")
def f():
    return 1
with tracy.zone("py.outer", text=1):
    f()
    tracy.plot("py.value", 1.0)
    tracy.message("m")
    tracy.thread_name("probe")
maps = open("/proc/self/maps").read()
print(json.dumps({"opened": opened, "active": tracy.active(), "connected": tracy.connected(),
                  "waited": tracy.wait_connected(0.05), "status": tracy.status(),
                  "tracy_mapped": "_runtime_libs_tracy" in maps,
                  "runtime_loaded": tracy.RUNTIME_MODULE in sys.modules}))
"""


def _probe(**env) -> dict:
    base = {k: v for k, v in os.environ.items() if k not in ("IREE_PY_RUNTIME", tracy.MODE_VAR)}
    proc = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, cwd=ROOT,
                          env=base | env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(importlib.util.find_spec("iree.runtime") is None, reason="iree-base-runtime is not installed")
def test_without_the_tracy_runtime_nothing_is_opened():
    got = _probe()
    assert got["opened"] == [] and not got["tracy_mapped"] and not got["runtime_loaded"]
    assert not got["active"] and not got["connected"] and not got["waited"]
    assert got["status"]["runtime"] is None and got["status"]["zones"] == 0


@pytest.mark.skipif(importlib.util.find_spec("iree._runtime_libs_tracy") is None,
                    reason="iree-base-runtime has no Tracy runtime here")
def test_off_keeps_it_inert_even_with_the_tracy_runtime_loaded():
    got = _probe(IREE_PY_RUNTIME="tracy", WORKBENCH_TRACY="off")
    assert got["runtime_loaded"] and got["opened"] == [] and not got["active"]
    assert got["status"]["mode"] == "off" and got["status"]["zones"] == 0


@pytest.mark.skipif(importlib.util.find_spec("iree._runtime_libs_tracy") is None,
                    reason="iree-base-runtime has no Tracy runtime here")
def test_with_the_runtime_and_no_capture_zones_are_skipped_not_buffered():
    """The default mode: without a capture nothing of ours is emitted (so nothing buffers); the
    library opened is the loaded one (RTLD_NOLOAD), plus the C library for malloc."""
    got = _probe(IREE_PY_RUNTIME="tracy")
    assert got["active"] and not got["connected"] and not got["waited"]
    assert len(got["opened"]) == 2 and "_runtime_libs_tracy" in got["opened"][0]
    assert got["status"]["zones"] == 0 and got["status"]["skipped"] == 2 and got["status"]["names"] == 0


@pytest.mark.parametrize("name", ["invoke", "py", "py.", "py.Invoke", "py.in voke", "py.x-y", "py.1x", 3, None])
def test_names_are_fixed_and_dotted(name):
    with pytest.raises(ValueError, match="py.<what>"):
        tracy.zone(name)
    with pytest.raises(ValueError, match="py.<what>"):
        tracy.plot(name, 1.0)


def test_a_decorator_refuses_what_suspends():
    def gen():
        yield 1

    async def coro():
        return 1

    async def agen():
        yield 1

    for fn in (gen, coro, agen):
        with pytest.raises(TypeError, match="yield/await"):
            tracy.zone("py.x")(fn)


class _FakeClient:
    """Records the C calls the binding makes, as the real client would receive them."""

    def __init__(self, connected: bool = True):
        self.calls: list[tuple] = []
        self.is_connected = connected
        self.mode, self.path, self.sites, self.names = "connected", "fake.so", {}, {}
        self._next = 0

    def live(self) -> bool:
        return self.is_connected

    def connected(self) -> int:
        return int(self.is_connected)

    def site(self, name, file, line):
        return self.sites.setdefault((name, file, line), len(self.sites) + 1)

    def begin(self, site, active):
        self._next += 1
        self.calls.append(("begin", self._next))
        return self._next

    def end(self, ctx):
        self.calls.append(("end", ctx))

    def text(self, ctx, data, size):
        self.calls.append(("text", ctx, data))

    def message(self, data, size, callstack):
        self.calls.append(("message", data))


@pytest.fixture
def fake(monkeypatch):
    client = _FakeClient()
    monkeypatch.setattr(tracy, "_CLIENT", client)
    monkeypatch.setattr(tracy, "_COUNTS", {"zones": 0, "skipped": 0, "misnested": 0})
    monkeypatch.setattr(tracy, "_WARNED", set())
    monkeypatch.setattr(tracy, "_LOCAL", type(tracy._LOCAL)())
    return client


def test_zones_begin_and_end_in_order_with_text(fake):
    @tracy.zone("py.inner")
    def inner():
        return 7

    with tracy.zone("py.outer", text=12):
        assert inner() == 7
    assert fake.calls == [("begin", 1), ("text", 1, b"12"), ("begin", 2), ("end", 2), ("end", 1)]
    assert tracy.status()["zones"] == 2 and tracy.status()["misnested"] == 0
    # the decorator's site is the function's definition, not the wrapper's
    assert {f for _, f, _ in fake.sites} == {__file__}


def test_a_zone_held_across_yield_cannot_take_another_zones_end(fake):
    """Tracy ends a thread's innermost zone: a generator suspended inside its zone would make the
    outer zone's end close the generator's zone. The binding ends the stale zone first, once."""
    def gen():
        with tracy.zone("py.gen"):
            yield 1
            yield 2

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with tracy.zone("py.outer"):
            g = gen()
            next(g)
        assert [c for c in fake.calls if c[0] != "message"] == [("begin", 1), ("begin", 2), ("end", 2), ("end", 1)]
        g.close()  # the generator's own exit now ends nothing more
    ends = [c for c in fake.calls if c[0] == "end"]
    assert ends == [("end", 2), ("end", 1)]
    assert tracy.status()["misnested"] == 1
    assert any(c[0] == "message" and b"misnested" in c[1] for c in fake.calls)
    assert len([w for w in caught if "misnested" in str(w.message)]) == 1


def test_without_a_capture_nothing_is_emitted(fake):
    fake.is_connected = False
    with tracy.zone("py.a", text="x"):
        tracy.message("m")
        tracy.plot("py.p", 1.0)
    assert fake.calls == [] and tracy.status()["skipped"] == 1 and tracy.status()["zones"] == 0


def test_a_zone_object_is_entered_once_at_a_time(fake):
    z = tracy.zone("py.a")
    with z:
        with pytest.raises(RuntimeError, match="entered once"):
            z.__enter__()
    with z:  # again, after its end
        pass
    assert [c[0] for c in fake.calls] == ["begin", "end", "begin", "end"]


def test_the_capture_environment_is_private_and_zone_only():
    env = capture.child_env(45678, base={"PATH": "/bin"})
    assert env["TRACY_PORT"] == "45678" and env["IREE_PY_RUNTIME"] == "tracy" and env["TRACY_NO_EXIT"] == "1"
    assert env["TRACY_ONLY_LOCALHOST"] == env["TRACY_ONLY_IPV4"] == env["TRACY_NO_SYS_TRACE"] == "1"
    a, b = capture.free_port(), capture.free_port()
    assert 1024 <= a < 65536 and 1024 <= b < 65536
