"""The workbench's own Tracy binding: Python zones in the same capture as IREE's runtime.

IREE's Tracy runtime (``IREE_PY_RUNTIME=tracy``: the ``iree._runtime_libs_tracy`` build of
``iree-base-runtime``) is a Tracy client whose library exports Tracy's C API (the
``___tracy_*`` functions). Once ``import iree.runtime`` has loaded it, this module finds that
same library with ``ctypes`` (``dlopen`` with ``RTLD_NOLOAD``, which never loads anything) and
emits zones, zone text, messages, plots and thread names through it. There is one Tracy
instance in the process, so Python zones share IREE's connection, clock and protocol, and a
capture by the wheel's ``iree-tracy-capture`` shows them nested with IREE's own zones. No
second client (``pytracy``, ``tracypy``, Tracy's own bindings): a capture sees one client per
port, and those speak other protocol versions (docs/python.md, "Tracy from Python").

**Inert** while that library is not loaded: no library is opened and no symbol looked up; a
zone then costs a lookup in ``sys.modules`` (the probe is repeated until the runtime appears,
so a notebook may import ``iree.runtime`` after this module).

Tracy's rules, made safe here:

- **Fixed names.** Tracy keeps the address of a zone's source location (and of a plot's name)
  and reads the strings when the capture asks, which can be after Python has torn its objects
  down (``TRACY_NO_EXIT=1`` keeps the process alive past interpreter finalisation until the
  capture has drained). So names are fixed, dotted and few (``py.invoke``; :data:`NAME_RE`),
  interned once in memory that is never freed (at most :data:`MAX_NAMES`); what varies goes
  into the zone's text, which Tracy copies.
- **Nesting.** Tracy ends a thread's innermost open zone, whichever zone asked: a zone left open
  across a ``yield`` or an ``await`` would silently take another's end. Zones are context
  managers or decorators only (a decorator refuses generator and coroutine functions), and each
  thread keeps a stack of its open zones: a zone that ends while zones opened after it are still
  open (a suspended generator's, a coroutine's) first ends those, so every zone still ends at
  a time inside its parent; they are counted as ``misnested`` (:func:`status`), a Tracy message
  names them and Python warns once.
- **Memory.** A Tracy client that is not built on demand (IREE's is not) buffers every event
  until a capture connects, about 76 bytes a zone (133 MB over 1.75M zones, measured), for as
  long as none connects. By default (:data:`MODE_VAR` unset or ``connected``) this module emits
  zones, messages and plots only while a capture is connected, so its own zones cost no memory
  without one; ``always`` emits from the start (a capture then sees what ran before it
  connected, and memory grows until one does); ``off`` makes it inert. IREE's own zones buffer
  whatever this module does: a process with the Tracy runtime loaded and no capture grows.

Cost per zone: ``benchmarks/tracy_zones.py`` measures it, inert, without a capture and with one,
beside a bare ``contextlib.nullcontext`` (one run, its machine and load:
``traces/benchmarks/tracy_zones_20261206.md``); a connected zone costs several context managers,
so timed code never runs under zones.

:mod:`workbench.running.capture` takes a capture of a child process (a private port, a hard timeout).
"""

from __future__ import annotations

import ctypes
import functools
import inspect
import os
import re
import sys
import threading
import time
import warnings
from typing import Any, Callable

#: the module IREE's Tracy runtime is loaded as (``iree._runtime.libs`` imports it)
RUNTIME_MODULE = "iree._runtime_libs_tracy._runtime"
#: ``connected`` (default), ``always`` or ``off`` (see the module docstring, "Memory")
MODE_VAR = "WORKBENCH_TRACY"
MODES = ("connected", "always", "off")
#: zone and plot names: ``py.`` and dotted lower-case words
NAME_RE = re.compile(r"py(?:\.[a-z][a-z0-9_]*)+")
#: distinct interned names and source locations a process may create (each is kept forever)
MAX_NAMES = 1024
#: zone text and messages are cut to this many bytes (Tracy's own limit is 64 KiB - 1)
MAX_TEXT = 4096
#: the colour of Python zones in Tracy's own viewer (0xRRGGBB; the workbench's charts use theirs)
COLOR = 0x2CA02C


class _SourceLocation(ctypes.Structure):
    """Tracy's ``___tracy_source_location_data`` (addresses of never-freed C strings)."""

    _fields_ = [("name", ctypes.c_void_p), ("function", ctypes.c_void_p), ("file", ctypes.c_void_p),
                ("line", ctypes.c_uint32), ("color", ctypes.c_uint32)]


class _ZoneContext(ctypes.Structure):
    """Tracy's ``TracyCZoneCtx``, returned and passed by value."""

    _fields_ = [("id", ctypes.c_uint32), ("active", ctypes.c_int)]


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise ValueError(f"a Tracy name is fixed and dotted, 'py.<what>' in lower case (e.g. 'py.invoke'), not "
                         f"{name!r}: put what varies in the zone's text")
    return name


class _Client:
    """Tracy's C API in the loaded IREE Tracy runtime, and the process's interned strings."""

    def __init__(self, path: str, mode: str):
        lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD)  # the loaded library or OSError: never a second copy
        libc = ctypes.CDLL(None)
        self.path, self.mode = path, mode
        self._malloc = libc.malloc
        self._malloc.restype, self._malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
        self.begin = self._fn(lib, "zone_begin", _ZoneContext, [ctypes.c_void_p, ctypes.c_int])
        self.end = self._fn(lib, "zone_end", None, [_ZoneContext])
        self.text = self._fn(lib, "zone_text", None, [_ZoneContext, ctypes.c_char_p, ctypes.c_size_t])
        self.message = self._fn(lib, "message", None, [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int])
        self.plot = self._fn(lib, "plot", None, [ctypes.c_void_p, ctypes.c_double])
        # getattr with a string: ``lib.___tracy_x`` inside a class body would be name-mangled
        self.thread_name = getattr(lib, "___tracy_set_thread_name")
        self.thread_name.restype, self.thread_name.argtypes = None, [ctypes.c_char_p]
        self.connected = getattr(lib, "___tracy_connected")
        self.connected.restype, self.connected.argtypes = ctypes.c_int, []
        self.sites: dict[tuple, int] = {}
        self.names: dict[str, int] = {}
        self.lock = threading.Lock()
        self.live = self.connected if mode == "connected" else _always

    @staticmethod
    def _fn(lib, name: str, restype, argtypes):
        f = getattr(lib, f"___tracy_emit_{name}")
        f.restype, f.argtypes = restype, argtypes
        return f

    def _cstr(self, s: str) -> int:
        raw = s.encode("utf-8", "replace")[:MAX_TEXT] + b"\0"
        p = self._malloc(len(raw))
        if not p:
            raise MemoryError("malloc failed for a Tracy name")
        ctypes.memmove(p, raw, len(raw))
        return p

    def _full(self, what: str) -> None:
        if len(self.sites) + len(self.names) >= MAX_NAMES:
            raise RuntimeError(f"more than {MAX_NAMES} distinct Tracy names or zone sites in this process: names are "
                               f"fixed ('py.<what>'); put what varies ({what}) in the zone's text")

    def name(self, name: str) -> int:
        """The never-freed C string of a plot's name."""
        p = self.names.get(name)
        if p is None:
            with self.lock:
                p = self.names.get(name)
                if p is None:
                    self._full(name)
                    p = self.names[name] = self._cstr(name)
        return p

    def site(self, name: str, file: str, line: int) -> int:
        """The never-freed source location of zone ``name`` declared at ``file:line``."""
        key = (name, file, line)
        p = self.sites.get(key)
        if p is None:
            with self.lock:
                p = self.sites.get(key)
                if p is None:
                    self._full(f"{name} at {file}:{line}")
                    p = self._malloc(ctypes.sizeof(_SourceLocation))
                    if not p:
                        raise MemoryError("malloc failed for a Tracy source location")
                    loc = _SourceLocation.from_address(p)
                    # name and function are both the zone's name: readers key zones on either
                    loc.name = loc.function = self._cstr(name)
                    loc.file, loc.line, loc.color = self._cstr(file), line, COLOR
                    self.sites[key] = p
        return p



def _always() -> int:
    return 1


_CLIENT: _Client | None = None
_INERT_MODE = False  # WORKBENCH_TRACY=off was read when the runtime appeared
_LOCAL = threading.local()
_COUNTS = {"zones": 0, "skipped": 0, "misnested": 0}
_WARNED: set[str] = set()


def _client() -> _Client | None:
    """The Tracy client once IREE's Tracy runtime is loaded; None (and nothing opened) before."""
    global _CLIENT, _INERT_MODE
    if _CLIENT is not None:
        return _CLIENT
    mod = sys.modules.get(RUNTIME_MODULE)
    if mod is None or _INERT_MODE:
        return None
    mode = os.environ.get(MODE_VAR, "connected").strip().lower() or "connected"
    if mode not in MODES:
        raise ValueError(f"{MODE_VAR}={mode!r}: expected one of {', '.join(MODES)}")
    if mode == "off":
        _INERT_MODE = True
        return None
    _CLIENT = _Client(str(mod.__file__), mode)
    return _CLIENT


def _stack() -> list:
    st = getattr(_LOCAL, "stack", None)
    if st is None:
        st = _LOCAL.stack = []
    return st


def _text_bytes(text: Any) -> bytes:
    return str(text).encode("utf-8", "replace")[:MAX_TEXT]


def zone(name: str, text: Any = None, *, _site: tuple[str, int] | None = None) -> "_Zone | _Inert":
    """A Tracy zone named ``name`` (``py.<what>``) around a ``with`` block, or around every call
    of a decorated function (``@zone("py.step")``); ``text`` (anything, shown as its ``str``) is
    the zone's variable detail. Without IREE's Tracy runtime it is a shared no-op (module
    docstring); a decorated function looks again at every call."""
    if name not in _VALID:
        _valid(name)
    if _CLIENT is None and (_INERT_MODE or RUNTIME_MODULE not in sys.modules or _client() is None):
        if text is not None:
            return _Inert(name, text)
        inert = _INERT.get(name)
        if inert is None:
            inert = _INERT[name] = _Inert(name, None)
        return inert
    return _Zone(name, text, _site)


def _decorate(name: str, text: Any, fn: Callable) -> Callable:
    """``fn`` with each call in a zone; generator and coroutine functions are refused: their
    zone would stay open across ``yield``/``await``."""
    if inspect.isgeneratorfunction(fn) or inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
        raise TypeError(f"{getattr(fn, '__qualname__', fn)!r} suspends (a generator or coroutine): a Tracy zone "
                        "cannot stay open across yield/await; put a 'with zone(...)' around the work between "
                        "suspensions instead")
    code = getattr(fn, "__code__", None)
    site = (code.co_filename, code.co_firstlineno) if code else ("<unknown>", 0)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with zone(name, text, _site=site):
            return fn(*args, **kwargs)

    return wrapper


class _Inert:
    """A zone while the binding is inert: nothing to begin or end."""

    __slots__ = ("name", "text")

    def __init__(self, name: str, text: Any):
        self.name, self.text = name, text

    def __enter__(self) -> "_Inert":
        return self

    def __exit__(self, *exc) -> bool:
        return False

    def __call__(self, fn: Callable) -> Callable:
        return _decorate(self.name, self.text, fn)


class _Zone:
    """A zone through the live client: begun on entry (when a capture is connected, or the mode
    is ``always``), ended on exit by :func:`_close`."""

    __slots__ = ("name", "text", "_site", "_ctx")

    def __init__(self, name: str, text: Any, site: tuple[str, int] | None):
        self.name, self.text, self._site, self._ctx = name, text, site, None

    def __enter__(self) -> "_Zone":
        c = _CLIENT
        if self._ctx is not None:
            raise RuntimeError(f"zone {self.name!r} is already open: a zone object is entered once at a time")
        if not c.live():
            _COUNTS["skipped"] += 1
            return self
        if self._site is None:
            f = sys._getframe(1)
            file, line = f.f_code.co_filename, f.f_lineno
        else:
            file, line = self._site
        ctx = c.begin(c.site(self.name, file, line), 1)
        if self.text is not None:
            t = _text_bytes(self.text)
            c.text(ctx, t, len(t))
        self._ctx = ctx
        _stack().append(self)
        _COUNTS["zones"] += 1
        return self

    def __exit__(self, *exc) -> bool:
        ctx = self._ctx
        if ctx is not None:
            stack = getattr(_LOCAL, "stack", None)
            if stack and stack[-1] is self:  # the common case, inline: this zone is the thread's innermost
                stack.pop()
                _CLIENT.end(ctx)
                self._ctx = None
            else:
                _close(self)
        return False

    def __call__(self, fn: Callable) -> Callable:
        return _decorate(self.name, self.text, fn)


_INERT: dict[str, _Inert] = {}
_VALID: set[str] = set()


def _valid(name: str) -> str:
    _check_name(name)
    if len(_VALID) < MAX_NAMES:
        _VALID.add(name)
    return name


def _close(z: _Zone) -> None:
    """End ``z`` in Tracy; zones opened after it on this thread and still open end first."""
    c = _CLIENT
    stack = _stack()
    if stack and stack[-1] is z:
        stack.pop()
        c.end(z._ctx)
        z._ctx = None
        return
    at = next((i for i in range(len(stack) - 1, -1, -1) if stack[i] is z), None)
    if at is None:  # opened on another thread: only that thread may end it (its next exit below does)
        _warn_once(f"py zone {z.name} ended on a thread other than the one that opened it: left to that thread")
        return
    stale = stack[at + 1:]
    for s in reversed(stale):
        c.end(s._ctx)
        s._ctx = None
    c.end(z._ctx)
    z._ctx = None
    del stack[at:]
    _COUNTS["misnested"] += len(stale)
    names = ", ".join(s.name for s in stale)
    note = (f"py zones misnested: {names} still open when {z.name} ended (held across yield/await?); ended with "
            f"{z.name}")
    if c.live():
        t = _text_bytes(note)
        c.message(t, len(t), 0)
    _warn_once(note)


def _warn_once(note: str) -> None:
    if note not in _WARNED and len(_WARNED) < MAX_NAMES:
        _WARNED.add(note)
        warnings.warn(note, RuntimeWarning, stacklevel=4)


def message(text: Any) -> None:
    """A Tracy message (an instant on this thread's lane) with ``text``; inert without the runtime."""
    c = _CLIENT or _client()
    if c is not None and c.live():
        t = _text_bytes(text)
        c.message(t, len(t), 0)


def plot(name: str, value: float) -> None:
    """A point of plot ``name`` (``py.<what>``); inert without the runtime."""
    if name not in _VALID:
        _valid(name)
    c = _CLIENT or _client()
    if c is not None and c.live():
        c.plot(c.name(name), float(value))


def thread_name(name: str) -> None:
    """Name this thread's lane in the capture (Tracy copies it; Linux also names the OS thread,
    cut to 15 bytes). Applies even before a capture connects: a lane is named once."""
    c = _CLIENT or _client()
    if c is not None:
        c.thread_name(_text_bytes(name)[:255])


def active() -> bool:
    """IREE's Tracy runtime is loaded and this module emits through it (the mode is not ``off``)."""
    return (_CLIENT or _client()) is not None


def connected() -> bool:
    """A Tracy capture is connected to this process."""
    c = _CLIENT or _client()
    return c is not None and bool(c.connected())


def wait_connected(timeout_s: float) -> bool:
    """Wait up to ``timeout_s`` for a capture to connect; False at once when inert."""
    c = _CLIENT or _client()
    if c is None:
        return False
    deadline = time.monotonic() + timeout_s
    while not c.connected():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.005)
    return True


def status() -> dict[str, Any]:
    """What the binding did in this process: the runtime it found (None: inert), the mode, and
    counts of zones emitted, skipped (no capture connected) and misnested."""
    c = _CLIENT or _client()
    return {"runtime": c.path if c else None, "mode": c.mode if c else ("off" if _INERT_MODE else None),
            "connected": bool(c.connected()) if c else False, **_COUNTS,
            "names": len(c.sites) + len(c.names) if c else 0}
