"""Hostile result bundles: refused with exit 2 and one line naming the field, or imported
whole; nothing they carry becomes a path or raw markup (issue: safety)."""

from __future__ import annotations

import base64
import copy
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench import cli
from workbench.presentation import report
from workbench.reading import comparison as compare
from workbench.cli import main
from workbench.data.record import RunRecord, VariantResult
from workbench.results.store import Store, StoreError, parse_bundle, read_bundle
from tests.support.paths import ROOT



def valid_doc() -> dict:
    run = {"format": "perf-workbench-run", "version": 1, "run_id": "20260101-000000-calibration-abc123",
           "study": "calibration", "params": {"repeat": 3, "threads": 1, "torch": False},
           "env": {"fingerprint": "f00", "cpu_model": "Test CPU"}, "status": "complete",
           "created_utc": "2026-01-01T00:00:00Z", "reproduce": "python -m workbench run calibration",
           "variants": [{"variant": "empty-call", "params": {"kind": "harness"}, "samples_ns": [30.0, 31.0, 32.0],
                         "correct": True, "check": "ok", "extra": {}}],
           "outputs": {}}
    return {"format": "perf-workbench-bundle", "version": 1, "run": run,
            "attachments": [{"name": "t.json", "kind": "trace/chrome-json",
                             "data_b64": base64.b64encode(b'{"traceEvents": []}').decode()}]}


def _set(path: str, value):
    def mutate(doc):
        *parents, last = path.split(".")
        node = doc
        for p in parents:
            node = node[int(p)] if p.isdigit() else node[p]
        node[int(last) if last.isdigit() else last] = value
    return mutate


def _raw(content: str | bytes):
    return lambda doc: content  # the file's whole content


def _drop(key: str):
    return lambda doc: doc.pop(key) and None


HOSTILE = {
    "correct as a string": (_set("run.variants.0.correct", "false"), "run.variants[0].correct"),
    "a string sample": (_set("run.variants.0.samples_ns", [1.0, "2"]), "run.variants[0].samples_ns[1]"),
    "NaN sample": (_raw(json.dumps(valid_doc()).replace("30.0", "NaN")), "not a finite number"),
    "Infinity sample": (_raw(json.dumps(valid_doc()).replace("30.0", "Infinity")), "not a finite number"),
    "overflowing sample": (_raw(json.dumps(valid_doc()).replace("30.0", "1e400")), "not a finite number"),
    "study of the wrong type": (_set("run.study", 7), "run.study"),
    "study as a path": (_set("run.study", "../../studies/evil"), "run.study"),
    "unknown study": (_set("run.study", "no-such-study"), "does not have"),
    "empty run id": (_set("run.run_id", ""), "run.run_id"),
    "run id 'latest'": (_set("run.run_id", "latest"), "reserved"),
    "relative run id": (_set("run.run_id", "../../../tmp/evil"), "run.run_id"),
    "absolute run id": (_set("run.run_id", "/tmp/evil"), "run.run_id"),
    "attachment name with ..": (_set("attachments.0.name", "../../studies/evil.py"), "attachments[0].name"),
    "absolute attachment name": (_set("attachments.0.name", "/tmp/evil.py"), "attachments[0].name"),
    "hidden attachment name": (_set("attachments.0.name", ".bashrc"), "attachments[0].name"),
    "overlong attachment name": (_set("attachments.0.name", "a" * 300), "attachments[0].name"),
    "duplicate attachment names": (lambda d: d["attachments"].append(dict(d["attachments"][0])) and None,
                                   "used by an earlier"),
    "attachment not base64": (_set("attachments.0.data_b64", "!!not base64!!"), "base64"),
    "version as a string": (_set("version", "1"), "bundle field version"),
    "fractional version": (_set("version", 1.5), "bundle field version"),
    "newer version": (_set("version", 3), "newer than this workbench"),
    "markup in a variant name": (_set("run.variants.0.variant", "<script>alert(1)</script>"), "run.variants[0].variant"),
    "odd parameter name": (_set("run.params", {"a b/../c": 1}), "run.params"),
    "unknown status": (_set("run.status", "hacked"), "run.status"),
    "deep nesting": (_raw('{"format": "perf-workbench-bundle", "version": 1, "run": ' + "[" * 200 + "]" * 200 + "}"),
                     "nested deeper"),
    "nesting past the parser": (_raw("[" * 200_000), "nested too deeply"),
    "an integer of a million digits": (_raw('{"format": "perf-workbench-bundle", "version": ' + "9" * 10**6 + "}"),
                                       "not valid JSON"),
    "not JSON": (_raw("this is not json"), "not valid JSON"),
    "not UTF-8": (_raw(b"\xff\xfe\xfd{"), "not valid JSON"),
    "a JSON list": (_raw("[1, 2, 3]"), "not a perf-workbench result bundle"),
    "another format": (_set("format", "something-else"), "not a perf-workbench result bundle"),
    "no run": (_drop("run"), "'run' is a required property"),
}


def _write(tmp_path: Path, mutate) -> Path:
    doc = valid_doc()
    out = mutate(doc)
    path = tmp_path / "hostile.bundle.json"
    if out is None:
        path.write_text(json.dumps(doc))
    else:
        path.write_bytes(out.encode() if isinstance(out, str) else out)
    return path


def _one_error_line(err: str, fragment: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert fragment in lines[0], lines[0]


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_bundle_is_refused_with_exit_2_and_one_line(case, tmp_path, capsys):
    mutate, fragment = HOSTILE[case]
    path = _write(tmp_path, mutate)
    store = tmp_path / "results.sqlite"
    assert main(["--store", str(store), "import", str(path)]) == 2
    _one_error_line(capsys.readouterr().err, fragment)
    assert Store(store).runs() == []
    if case == "unknown study":
        return  # only an import needs the study; a report of it shows the raw results
    # report and export read bundle files the same way
    assert main(["report", str(path), "-o", str(tmp_path / "r.md")]) == 2
    _one_error_line(capsys.readouterr().err, fragment)
    assert not (tmp_path / "r.md").exists()


def test_valid_bundle_imports_and_a_second_import_says_so(tmp_path, capsys):
    path = tmp_path / "ok.bundle.json"
    path.write_text(json.dumps(valid_doc()))
    store = tmp_path / "results.sqlite"
    assert main(["--store", str(store), "import", str(path)]) == 0
    assert main(["--store", str(store), "import", str(path)]) == 0
    assert "already in the store" in capsys.readouterr().out
    (rec,) = Store(store).runs()
    assert rec["variants"] == 1


def test_terminal_escapes_from_a_bundle_never_reach_the_terminal(tmp_path, capsys):
    doc = valid_doc()
    doc["run"]["env"] = {"fingerprint": "\x1b]0;pwned\x07", "cpu_model": "\x1b[2J\x1b[31mCPU"}
    path = tmp_path / "esc.bundle.json"
    path.write_text(json.dumps(doc))
    store = str(tmp_path / "results.sqlite")
    assert main(["--store", store, "import", str(path)]) == 0
    assert main(["--store", store, "runs"]) == 0
    assert main(["--store", store, "compare", "latest", "latest"]) == 2  # a run against itself: refused, in one line
    assert main(["--store", store, "report", "latest", "--format", "issue", "-o", str(tmp_path / "r.md")]) == 0
    out = capsys.readouterr()
    assert "\x1b" not in out.out + out.err and "CPU" in out.out


def test_a_bundle_of_a_running_run_is_stored_as_interrupted(tmp_path):
    doc = valid_doc()
    doc["run"]["status"] = "running"
    rec = parse_bundle(json.dumps(doc).encode())
    store = Store(tmp_path / "results.sqlite")
    assert store.import_run(rec)
    assert store.load(rec.run_id).status == "interrupted"


def test_files_that_are_not_bundles_exit_2(tmp_path, capsys):
    fifo = tmp_path / "fifo.bundle.json"
    os.mkfifo(fifo)
    empty = tmp_path / "empty.bundle.json"
    empty.write_bytes(b"")
    folder = tmp_path / "dir.bundle.json"
    folder.mkdir()
    store = str(tmp_path / "results.sqlite")
    for path, fragment in ((fifo, "not a regular file"), (empty, "not valid JSON"), (folder, "not a regular file"),
                           (tmp_path / "missing.json", "No such file")):
        assert main(["--store", store, "import", str(path)]) == 2
        _one_error_line(capsys.readouterr().err, fragment)


def test_import_is_one_transaction(tmp_path, capsys, monkeypatch):
    """Ctrl-C in the middle of an import leaves no half run; importing again then works."""
    doc = valid_doc()
    doc["run"]["variants"] = [dict(doc["run"]["variants"][0], variant=f"v{i}") for i in range(50)]
    path = tmp_path / "b.bundle.json"
    path.write_text(json.dumps(doc))
    store = tmp_path / "results.sqlite"
    real_row = Store._variant_row

    def interrupted_row(run_id, seq, v):
        if seq == 25:
            raise KeyboardInterrupt
        return real_row(run_id, seq, v)

    monkeypatch.setattr(Store, "_variant_row", staticmethod(interrupted_row))
    assert main(["--store", str(store), "import", str(path)]) == 130
    assert Store(store).runs() == []
    monkeypatch.setattr(Store, "_variant_row", staticmethod(real_row))
    assert main(["--store", str(store), "import", str(path)]) == 0
    assert Store(store).runs()[0]["variants"] == 50


def _hostile_record() -> RunRecord:
    """A record whose free-text fields carry markup (the schema allows any text there)."""
    markup = "</details><script>alert(1)</script><img src=x onerror=alert(1)>![t](http://evil.example/t.png)"
    return RunRecord(
        run_id="20260101-000000-calibration-evil01", study="calibration", params={"repeat": 3, "note": markup},
        env={"fingerprint": "f00", "cpu_model": markup, "os": "```\n# pwned"},
        status="failed", created_utc="2026-01-01T00:00:00Z", error=markup + "\n```\n</details>",
        reproduce="python -m workbench run calibration\n```\n<script>alert(2)</script>", origin=markup,
        variants=[VariantResult("empty-call", {"kind": markup}, [30.0, 31.0, 32.0], False, markup)])


def _assert_inert(text: str) -> None:
    """No HTML tag, image or link from the record survives outside a code block."""
    outside = []
    fence = None
    for line in text.splitlines():
        stripped = line.strip()
        if fence is None and stripped.startswith("```"):
            fence = stripped[:len(stripped) - len(stripped.lstrip("`"))]
            continue
        if fence is not None:
            if stripped == fence:
                fence = None
            continue
        outside.append(line)
    rest = "\n".join(outside)
    assert fence is None, "a code block was left open"
    for bad in (r"<script", r"<img", r"(?<!\\)\]\(http://evil", r"</details><script"):
        assert not re.search(bad, rest), (bad, rest)
    assert rest.count("<details>") == rest.count("</details>")


def test_report_and_notebook_escape_every_untrusted_string(tmp_path):
    rec = _hostile_record()
    text = report.markdown(rec)
    _assert_inert(text)
    assert "alert(1)" in text  # shown, as text
    nb = report.notebook(rec, "x.bundle.json")
    _assert_inert(nb.cells[0].source)
    other = _hostile_record()
    other.run_id = "20260101-000001-calibration-evil02"
    _assert_inert(compare.markdown(compare.compare_runs(rec, other)))


def test_run_ids_never_build_output_paths(tmp_path, monkeypatch, capsys):
    """A store written before ids were checked may hold any id: the report still lands in
    the reports folder, under a sanitised name."""
    store = Store(tmp_path / "results.sqlite")
    rec = _hostile_record()
    rec.run_id = "../../../escaped"
    store.save(rec)
    monkeypatch.setattr(cli.files, "REPORTS_DIR", tmp_path / "reports")
    assert main(["--store", str(store.path), "report", "../../../escaped"]) == 0
    out = Path(capsys.readouterr().out.strip())
    assert out.resolve().is_relative_to((tmp_path / "reports").resolve()) and out.name == "escaped.md"
    assert not (tmp_path.parent.parent / "escaped").exists()


def test_attachments_are_read_in_a_private_folder_never_at_their_name(tmp_path, monkeypatch):
    """studies.mc2_split.trace_tables used to write each attachment to tempdir/<name>."""
    import studies.mc2_split as mc2
    from studies.mc2_split.analysis import trace_tables

    monkeypatch.chdir(tmp_path)
    target = tmp_path / "planted.py"
    trace = json.dumps({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 0,
                                         "dur": 10}]}).encode()
    rec = RunRecord(run_id="r", study=mc2.ID, params=mc2.SPACE.defaults(), env={},
                    attachments=[(str(target), "trace/chrome-json", trace), ("../planted2.py", "trace/chrome-json", trace)])
    trace_tables(rec)
    assert not target.exists() and not (tmp_path.parent / "planted2.py").exists()


@pytest.mark.parametrize("args, fragment", [
    (["export", "RUN", "-o", "DIR"], "it is a folder"),
    (["export", "RUN", "-o", "/dev/full"], "No space left"),
    (["export", "RUN", "-o", "FILE/x.bundle.json"], "is a file, not a folder"),
    (["export", "RUN", "--format", "gbench", "-o", "FILE/x.json"], "is a file, not a folder"),
    (["export", "RUN", "-o", "RO/x.bundle.json"], "Permission denied"),
    (["report", "RUN", "-o", "DIR"], "it is a folder"),
    (["report", "RUN", "-o", "FILE/r.md"], "is a file, not a folder"),
    (["report", "RUN", "--format", "ipynb", "-o", "FILE/r.ipynb"], "is a file, not a folder"),
    (["report", "RUN", "-o", "RO/r.md"], "Permission denied"),
])
def test_output_paths_that_cannot_be_written_exit_2(tmp_path, capsys, args, fragment):
    if os.geteuid() == 0 and "RO/" in " ".join(args):
        pytest.skip("root may write into a read-only folder")
    store = Store(tmp_path / "results.sqlite")
    rec = _hostile_record()
    store.save(rec)
    (tmp_path / "DIR").mkdir()
    ro = tmp_path / "RO"
    ro.mkdir(mode=0o555)
    (tmp_path / "FILE").write_text("keep")
    args = [a.replace("RUN", rec.run_id).replace("DIR", str(tmp_path / "DIR")).replace("RO", str(ro))
            .replace("FILE", str(tmp_path / "FILE")) for a in args]
    assert main(["--store", str(store.path), *args]) == 2
    _one_error_line(capsys.readouterr().err, fragment)
    assert list((tmp_path / "DIR").iterdir()) == [] and list(ro.iterdir()) == []
    assert (tmp_path / "FILE").read_text() == "keep"


def test_export_gbench_states_its_json_schema_version(tmp_path, capsys):
    store = Store(tmp_path / "results.sqlite")
    store.save(_hostile_record())
    out = tmp_path / "g.json"
    assert main(["--store", str(store.path), "export", "latest", "--format", "gbench", "-o", str(out)]) == 0
    assert json.loads(out.read_text())["context"]["json_schema_version"] == 1


# --- property-based: the importer either returns a checked record or says why, nothing else ------

_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                     max_leaves=12)
_PATHS = ["format", "version", "run", "attachments", "run.run_id", "run.study", "run.params", "run.env",
          "run.status", "run.variants", "run.outputs", "run.floor_ns", "run.error", "run.reproduce",
          "run.variants.0", "run.variants.0.variant", "run.variants.0.samples_ns", "run.variants.0.correct",
          "run.variants.0.params", "run.variants.0.check", "run.variants.0.extra", "run.variants.0.samples_ns.0",
          "attachments.0", "attachments.0.name", "attachments.0.kind", "attachments.0.data_b64"]


def _import_or_refuse(data: bytes, store: Store) -> None:
    try:
        rec = parse_bundle(data)
    except StoreError as exc:
        assert "\n" not in str(exc)
        return
    try:
        store.import_run(rec)
    except StoreError as exc:
        assert "\n" not in str(exc)
    _assert_inert(report.markdown(rec))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(st.tuples(st.sampled_from(_PATHS), _JSON), min_size=1, max_size=3))
def test_fuzzed_bundles_import_or_get_one_line(tmp_path, edits):
    doc = valid_doc()
    for path, value in edits:
        try:
            _set(path, copy.deepcopy(value))(doc)
        except (KeyError, IndexError, TypeError, ValueError):
            pass  # the path no longer exists after an earlier edit
    _import_or_refuse(json.dumps(doc).encode(), Store(tmp_path / f"fuzz{os.getpid()}.sqlite"))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
def test_fuzzed_bytes_are_refused_with_one_line(tmp_path, data):
    _import_or_refuse(data, Store(tmp_path / "fuzzbytes.sqlite"))


_FREE = ["run.outputs", "run.env", "run.params.repeat", "run.variants.0.extra", "run.variants.0.params"] + [
    f"run.outputs.{k}" for k in ("plan", "simulated", "fits", "live", "chunks", "best", "warnings", "given",
                                 "programs", "platform", "capture_errors", "target")]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(study=st.sampled_from(["calibration", "cpu-reduction", "launch-cache", "mc2-split", "opencl-events", "ag-gemm"]),
       edits=st.lists(st.tuples(st.sampled_from(_FREE), _JSON), max_size=3), text=st.text(max_size=40))
def test_fuzzed_free_form_fields_import_and_report_inert(tmp_path, study, edits, text):
    """What the schema leaves free (outputs, env, params' values, extra, check and error text)
    reaches every study's analysis and report: the report is written, its markup inert."""
    doc = valid_doc()
    doc["run"]["study"] = study
    doc["run"]["variants"][0]["check"] = doc["run"]["error"] = doc["run"]["reproduce"] = text
    for path, value in edits:
        try:
            _set(path, copy.deepcopy(value))(doc)
        except (KeyError, IndexError, TypeError, ValueError):
            pass
    _import_or_refuse(json.dumps(doc).encode(), Store(tmp_path / "free.sqlite"))


# --- bombs, under a memory limit ---------------------------------------------------------------

_BOMB_CHILD = r"""
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[1]), int(sys.argv[1])))
from workbench.cli import main
codes = [main(["--store", sys.argv[2], "import", f]) for f in sys.argv[3:]]
print(codes)
"""


def test_bundle_bombs_are_refused_within_a_memory_limit(tmp_path):
    """Nesting past any parser, a giant integer, a file over the size cap (sparse: never read)
    and a huge base64 attachment: each is refused with exit 2 in a process limited to 1.5 GiB."""
    nest = tmp_path / "nest.bundle.json"
    nest.write_text('{"format": "perf-workbench-bundle", "version": 1, "run": ' + "[" * 2_000_000 + "}")
    digits = tmp_path / "digits.bundle.json"
    digits.write_text('{"format": "perf-workbench-bundle", "version": ' + "7" * 5_000_000 + "}")
    big = tmp_path / "big.bundle.json"
    with open(big, "wb") as fh:
        fh.truncate(300 << 20)
    blob = tmp_path / "blob.bundle.json"
    doc = valid_doc()
    doc["attachments"][0]["data_b64"] = "A" * (60 << 20) + "!"
    blob.write_text(json.dumps(doc))
    files = [nest, digits, big, blob]
    env = os.environ | {"PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", _BOMB_CHILD, str(3 << 29), str(tmp_path / "s.sqlite"),
                           *map(str, files)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == str([2] * len(files)), proc.stdout
    errors = proc.stderr.strip().splitlines()
    assert len(errors) == len(files) and all(e.startswith("error: ") for e in errors), errors


def _zstd_entry(payload_chunks, name="t.json"):
    import zstandard

    packer = zstandard.ZstdCompressor(level=1).compressobj()
    frame = b"".join(packer.compress(c) for c in payload_chunks) + packer.flush()
    return {"name": name, "kind": "trace/chrome-json", "encoding": "zstd", "data_b64": base64.b64encode(frame).decode()}


def test_attachments_travel_as_zstd_frames_and_come_back_byte_for_byte():
    """Bundle version 2: a large attachment is written as a zstd frame, a small one plain, and
    both read back as the bytes that went in; a version 1 bundle still reads."""
    from workbench.results.store import to_bundle

    rec = parse_bundle(json.dumps(valid_doc()).encode())
    big = json.dumps({"traceEvents": [{"name": f"k{i % 7}", "ts": i, "dur": 3} for i in range(5000)]}).encode()
    rec.attachments = [("big.json", "trace/chrome-json", big), ("small.json", "trace/chrome-json", b"{}")]
    doc = to_bundle(rec)
    assert doc["version"] == 2
    assert [a.get("encoding") for a in doc["attachments"]] == ["zstd", None]
    assert len(doc["attachments"][0]["data_b64"]) < len(big) / 4
    back = parse_bundle(json.dumps(doc).encode())
    assert back.attachments == rec.attachments


def test_a_zstd_bomb_or_a_broken_frame_is_refused_in_one_line():
    """A frame of a few hundred KiB that unpacks to 300 MiB is refused once the bundle's cap is
    passed (read in bounded steps, never sized from its header); a frame that is not zstd, or
    an encoding the workbench does not know, is refused naming the field."""
    bomb = valid_doc()
    bomb["version"] = 2
    bomb["attachments"] = [_zstd_entry(bytes(1 << 20) for _ in range(300))]
    with pytest.raises(StoreError, match=r"attachments\[0\]: unpacks to more than"):
        parse_bundle(json.dumps(bomb).encode())
    broken = valid_doc()
    broken["version"] = 2
    broken["attachments"][0]["encoding"] = "zstd"  # plain base64 of JSON text, not a frame
    with pytest.raises(StoreError, match=r"attachments\[0\]\.data_b64: not a valid zstd frame"):
        parse_bundle(json.dumps(broken).encode())
    other = valid_doc()
    other["attachments"][0]["encoding"] = "gzip"
    with pytest.raises(StoreError, match=r"attachments\[0\]\.encoding"):
        parse_bundle(json.dumps(other).encode())
