"""Text and numbers at the edges (issue 28): text that is not valid Unicode, integers too large
for a float, ids with a trailing newline, bidirectional and other control characters, and an
output that cannot be written. Each is refused with exit 2 and one line naming the field (or
shown with a visible replacement), nothing is stored on a refusal, and no output carries a
control or bidi character."""

from __future__ import annotations

import copy
import json
import os
import re

import pytest

from tests.safety.hostile import cli, refused, stored_runs, valid_doc, write

# What no output of the workbench may carry: C0/C1 controls but newline, tab (and the
# carriage return of the progress bar on a terminal), the bidi controls, invisible format
# characters, lone surrogates.
UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff"
                    "\ud800-\udfff]")
TROJAN = "python -m workbench run calibration \u202e;/ fr- mr\u202c \u2067x\u2069 \x1b]0;title\x07 \u200b"


def _spoiled(where: str, value) -> dict:
    doc = copy.deepcopy(valid_doc())
    node = doc
    *parents, last = where.split(".")
    for p in parents:
        node = node[int(p)] if p.isdigit() else node[p]
    node[int(last) if last.isdigit() else last] = value
    return doc


# --- text that is not Unicode -----------------------------------------------------------------

@pytest.mark.parametrize("where, field", [("run.env.cpu_model", "run.env.cpu_model"),
                                          ("run.variants.0.check", "run.variants[0].check"),
                                          ("run.outputs.study_note", "run.outputs.study_note")])
def test_a_lone_surrogate_in_a_bundle_is_refused_naming_the_field(where, field, tmp_path):
    text = json.dumps(_spoiled(where, "PLACEHOLDER")).replace("PLACEHOLDER", "a \\ud800 b")
    store = tmp_path / "results.sqlite"
    refused(cli("import", str(write(tmp_path, text.encode())), store=store), field, "not valid Unicode")
    assert stored_runs(store) == 0


def test_a_lone_surrogate_in_a_key_is_refused(tmp_path):
    text = json.dumps(_spoiled("run.outputs.KEY", 1)).replace("KEY", "k\\udfff")
    refused(cli("import", str(write(tmp_path, text.encode())), store=tmp_path / "r.sqlite"), "run.outputs",
            "not valid Unicode")


def test_bytes_that_are_not_utf8_in_a_bundle_are_refused(tmp_path):
    raw = json.dumps(valid_doc()).replace("Test CPU", "Test XX").encode().replace(b"XX", b"\xff\xfe")
    store = tmp_path / "results.sqlite"
    refused(cli("import", str(write(tmp_path, raw)), store=store), "not valid JSON")
    assert stored_runs(store) == 0


@pytest.mark.parametrize("args, name", [
    ([b"tag", b"\xff\xfe-run", b"--note", b"x"], "argument run"),
    ([b"tag", b"latest", b"--note", b"caf\xe9"], "argument note"),
    ([b"run", b"calibration", b"--set", b"repeat=\xff"], "argument set"),
    ([b"runs", b"--study", b"calib\xffration"], "argument study"),
    ([b"report", b"\xff", b"--format", b"issue"], "argument run"),
])
def test_undecodable_bytes_in_an_argument_are_refused_naming_it(args, name, tmp_path):
    store = tmp_path / "results.sqlite"
    refused(cli(*args, store=store), name, "not valid UTF-8")
    assert not store.exists(), "nothing is made on a refusal"


def test_a_path_that_is_not_utf8_is_still_a_path(tmp_path):
    """File names are bytes on Linux: a bundle and a report whose names are not UTF-8 work, and
    the lines that name them are printable."""
    bundle = write(tmp_path, valid_doc(), name="b\udcff.bundle.json")
    store = tmp_path / "results.sqlite"
    result = cli("import", str(bundle).encode("utf-8", "surrogateescape"), store=store)
    assert result.code == 0, result.err
    assert stored_runs(store) == 1 and not UNSAFE.search(result.out)


# --- numbers -----------------------------------------------------------------------------------

@pytest.mark.parametrize("where, value, field", [
    ("run.variants.0.samples_ns", [10 ** 400, 31.0, 32.0], "run.variants[0].samples_ns[0]"),
    ("run.variants.0.samples_ns", [-(10 ** 309), 31.0], "run.variants[0].samples_ns[0]"),
    ("run.floor_ns", 10 ** 400, "run.floor_ns"),
    ("run.params.repeat", 10 ** 400, "run.params.repeat"),
    ("run.variants.0.extra.loops", 10 ** 400, "run.variants[0].extra.loops"),
    ("run.outputs.load.before.loadavg_1m", 10 ** 400, "run.outputs.load.before.loadavg_1m"),
])
def test_an_integer_too_large_for_a_float_is_refused_like_a_non_finite_float(where, value, field, tmp_path):
    store = tmp_path / "results.sqlite"
    result = cli("import", str(write(tmp_path, _spoiled(where, value))), store=store)
    refused(result, field, "not a finite number")
    assert stored_runs(store) == 0


def test_large_integers_a_float_holds_import(tmp_path):
    doc = _spoiled("run.variants.0.samples_ns", [2 ** 70, 2 ** 64 + 1, 31, 32, 33])
    doc["run"]["floor_ns"] = 2 ** 63 + 5  # past SQLite's INTEGER
    store = tmp_path / "results.sqlite"
    assert cli("import", str(write(tmp_path, doc)), store=store).code == 0
    result = cli("report", "latest", "--format", "issue", "-o", str(tmp_path / "r.md"), store=store)
    assert result.code == 0, result.err


# --- ids matched in full -------------------------------------------------------------------------

@pytest.mark.parametrize("where, value, field", [
    ("run.run_id", "20260101-000000-calibration-abc123\n", "run.run_id"),
    ("run.study", "calibration\n", "run.study"),
    ("run.variants.0.variant", "empty-call\n", "run.variants[0].variant"),
    ("attachments.0.name", "t.json\n", "attachments[0].name"),
    ("attachments.0.kind", "trace/chrome-json\n", "attachments[0].kind"),
])
def test_an_id_with_a_trailing_newline_is_refused(where, value, field, tmp_path):
    store = tmp_path / "results.sqlite"
    refused(cli("import", str(write(tmp_path, _spoiled(where, value))), store=store), field, "does not match")
    assert stored_runs(store) == 0


def test_a_parameter_name_with_a_trailing_newline_is_refused(tmp_path):
    doc = valid_doc()
    doc["run"]["params"]["repeat\n"] = doc["run"]["params"].pop("repeat")
    refused(cli("import", str(write(tmp_path, doc)), store=tmp_path / "r.sqlite"), "run.params", "does not match")


# --- control and bidi characters -------------------------------------------------------------------

def test_bidi_and_control_characters_from_a_bundle_reach_no_output(tmp_path):
    doc = valid_doc()
    doc["run"]["reproduce"] = TROJAN
    doc["run"]["variants"][0]["check"] = "ok " + TROJAN
    doc["run"]["env"]["cpu_model"] = "CPU \u202eevil"
    doc["run"]["outputs"]["study_note"] = TROJAN
    store = tmp_path / "results.sqlite"
    result = cli("import", str(write(tmp_path, doc)), store=store)
    assert result.code == 0, result.err
    outputs = [result.out + result.err]
    for args in (["runs"], ["runs", "--json"], ["report", "latest", "--format", "issue"],
                 ["export", "latest", "-o", str(tmp_path / "again.bundle.json")]):
        got = cli(*args, store=store)
        assert got.code == 0, (args, got.err)
        outputs.append(got.out + got.err)
    for fmt in ("issue", "md", "html"):
        path = tmp_path / f"r.{fmt}"
        assert cli("report", "latest", "--format", fmt, "-o", str(path), store=store).code == 0
        outputs.append(path.read_text())
    for text in outputs:
        assert not UNSAFE.search(text), UNSAFE.findall(text)
    assert "\ufffd" in outputs[-1], "shown as a visible replacement"


def test_the_terminal_gets_no_control_or_bidi_character_from_a_trace(tmp_path):
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "name": "k\u202eernel\x1b[2J", "cat": "c\u2067at", "ts": 1, "dur": 5, "pid": 1, "tid": 1},
        {"ph": "X", "name": "other", "cat": "cat", "ts": 10, "dur": 5, "pid": 1, "tid": 1}]}))
    result = cli("trace", str(trace))
    assert result.code == 0, result.err
    assert not UNSAFE.search(result.out + result.err)


# --- outputs that cannot be written ----------------------------------------------------------------

def test_a_full_standard_output_is_one_line_and_exit_2(tmp_path):
    with open("/dev/full", "wb") as full:
        result = cli("list", stdout=full)
    refused(result, "cannot write the output")


def test_a_reader_that_stops_early_is_not_an_error():
    """``| head``: the pipe closed before the output: exit 0, nothing on stderr."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    with os.fdopen(write_end, "wb") as closed:
        result = cli("list", stdout=closed)
    assert result.code == 0 and not result.err_lines, result.err


def test_the_figures_a_writer_derived_are_not_read_back_so_a_nan_there_imports(tmp_path):
    """A variant without samples is written with NaN spread (the committed ag-gemm and mc2-split
    bundles have such): those figures are recomputed on reading, so they are not checked."""
    doc = _spoiled("run.variants.0.iqr_ns", float("nan"))
    doc["run"]["variants"][0]["median_ns"] = float("inf")
    store = tmp_path / "results.sqlite"
    result = cli("import", str(write(tmp_path, doc)), store=store)
    assert result.code == 0, result.err
