"""The CLI contract: exit codes, --json record shape, reports, export/import, compare."""

import json
import subprocess
import sys

import pytest

from workbench.cli import main
from tests.support.paths import ROOT


def _run_json(capsys, *args):
    code = main(list(args))
    out = capsys.readouterr()
    return code, out


@pytest.fixture
def calib_run(store, capsys):
    code, out = _run_json(capsys, "--store", str(store.path), "run", "calibration",
                          "--set", "repeat=5", "--set", "threads=1", "--set", "torch=false", "--json")
    assert code == 0, out.err
    return json.loads(out.out)


def test_run_json_contract(calib_run):
    from workbench.data.schema import RECORD_VERSION, check_record

    rec = calib_run
    check_record(rec)  # the published schema (workbench/data/schema.py) of the --json record
    assert rec["format"] == "perf-workbench-run" and rec["version"] == RECORD_VERSION
    assert set(["run_id", "study", "params", "env", "variants", "outputs"]) <= set(rec)
    assert rec["study"] == "calibration" and rec["params"]["repeat"] == 5
    for v in rec["variants"]:
        assert set(["variant", "params", "samples_ns", "median_ns", "ci_ns", "correct"]) <= set(v)
        assert len(v["samples_ns"]) == 5 and v["ci_ns"][0] <= v["median_ns"] <= v["ci_ns"][1]
    assert rec["env"]["fingerprint"] and "python -m workbench run calibration" in rec["reproduce"]
    # the analysis rides along: verdict, claims (calibration has no seed: none), disturbance
    # a run measured under load (this machine often is) leads with that, then the study's verdict
    lead = "Measured under load" if rec["disturbance"] else "Per call: harness floor"
    assert rec["verdict"].startswith(lead) and "Per call: harness floor" in rec["verdict"] and rec["claims"] == []
    assert isinstance(rec["disturbance"], list) and "drift between blocks" in rec["levels"]
    assert set(rec["outputs"]["load"]) == {"before", "after"}
    assert all("loadavg_1m" in v["extra"]["load"] for v in rec["variants"])


def test_bad_parameter_exits_2_names_it_and_stores_nothing(store, capsys):
    code, out = _run_json(capsys, "--store", str(store.path), "run", "calibration", "--set", "repeat=0", "--json")
    assert code == 2
    assert "repeat" in out.err and "allowed" in out.err and out.out == ""
    assert store.runs() == []


def test_unknown_study_exits_2(store, capsys):
    code, out = _run_json(capsys, "--store", str(store.path), "run", "nope")
    assert code == 2 and "unknown study" in out.err


def test_foreign_store_exits_2_and_is_untouched(tmp_path, capsys):
    bad = tmp_path / "x.sqlite"
    bad.write_text("hello")
    code, out = _run_json(capsys, "--store", str(bad), "runs")
    assert code == 2 and "left untouched" in out.err
    assert bad.read_text() == "hello"


def test_list_names_studies_with_their_seed(capsys):
    code, out = _run_json(capsys, "list", "--json")
    rows = json.loads(out.out)
    assert code == 0 and any(r["id"] == "calibration" for r in rows)
    assert all(r["seed"] and r["seed_title"] for r in rows)
    assert {r["page"] for r in rows} >= {"studies/calibration/README.md", "studies/mc2_split/README.md"}


def test_runs_compare_report_export_import(tmp_path, store, capsys, calib_run):
    sp = str(store.path)
    code, out = _run_json(capsys, "--store", sp, "run", "calibration", "--set", "repeat=5", "--set", "threads=1",
                          "--set", "torch=false", "--json")
    second = json.loads(out.out)["run_id"]
    code, out = _run_json(capsys, "--store", sp, "runs", "--json")
    assert {r["run_id"] for r in json.loads(out.out)} == {calib_run["run_id"], second}

    code, out = _run_json(capsys, "--store", sp, "compare", calib_run["run_id"], second, "--json")
    cmp = json.loads(out.out)
    assert code == 0 and cmp["same_machine"] and len(cmp["rows"]) == len(calib_run["variants"])

    md = tmp_path / "r.md"
    assert main(["--store", sp, "report", second, "--format", "md", "-o", str(md)]) == 0
    text = md.read_text()
    assert "**Verdict:**" in text and "<details><summary>Environment and reproduce command" in text
    assert text.count("<details>") == text.count("</details>")
    for link in [l for l in text.splitlines() if l.startswith("![")]:
        target = link.split("](")[1].rstrip(")")
        assert not target.startswith("/") and (md.parent / target).exists()

    bundle = tmp_path / "b.bundle.json"
    assert main(["--store", sp, "export", second, "-o", str(bundle)]) == 0
    other = tmp_path / "other.sqlite"
    assert main(["--store", str(other), "import", str(bundle)]) == 0
    capsys.readouterr()
    main(["--store", str(other), "runs", "--json"])
    assert [r["run_id"] for r in json.loads(capsys.readouterr().out)] == [second]

    gb = tmp_path / "g.json"
    assert main(["--store", sp, "export", second, "-o", str(gb), "--format", "gbench"]) == 0
    assert json.loads(gb.read_text())["benchmarks"]


def test_export_attachments_writes_each_trace_and_refuses_a_bad_name(tmp_path, store, capsys):
    """A run's captures come out as files that ``trace FILE`` reads; an attachment whose name is
    a path (a bundle is untrusted) is refused, the others still written."""
    from workbench.data.record import RunRecord
    from workbench.results.store import read_bundle
    from workbench.traces import load

    bundle = ROOT / "traces" / "cpu-reduction" / "python-zones-2cpu.bundle.json"
    sp = str(store.path)
    assert main(["--store", sp, "import", str(bundle)]) == 0
    run_id = read_bundle(bundle).run_id
    out = tmp_path / "captures"
    assert main(["--store", sp, "export", run_id, "--format", "attachments", "-o", str(out)]) == 0
    files = sorted(p.name for p in out.iterdir())
    assert files == ["profile_n1000000_c8_aligned_w1_python.tracy.json.gz", "profile_n1000000_w1_torch.tracy.json.gz"]
    spans, _ = load(out / files[0])
    assert (spans["name"].astype(str) == "py.invoke").sum() > 0
    rec = RunRecord("20260101-000000-calibration-abcdef", "calibration", {}, env={}, status="complete",
                    created_utc="2026-01-01T00:00:00Z", outputs={})
    rec.attachments = [("../escape.txt", "text/plain", b"x"), ("ok.txt", "text/plain", b"y")]
    store.save(rec)
    capsys.readouterr()
    assert main(["--store", sp, "export", rec.run_id, "--format", "attachments", "-o", str(tmp_path / "a")]) == 2
    assert "not a plain file name" in capsys.readouterr().err
    assert [p.name for p in (tmp_path / "a").iterdir()] == ["ok.txt"] and not (tmp_path / "escape.txt").exists()


def test_notebook_report_executes(tmp_path, store, calib_run):
    import nbformat
    from nbclient import NotebookClient

    from workbench.presentation.report import kernel_env

    nb_path = tmp_path / "nb" / "run.ipynb"
    assert main(["--store", str(store.path), "report", calib_run["run_id"], "--format", "ipynb", "-o", str(nb_path)]) == 0
    assert (nb_path.parent / "run.bundle.json").exists()
    # Execute away from the store: the notebook must need only its bundle (and the workbench
    # importable: kernel_env puts this one on the kernel's path).
    store.close()
    store.path.unlink()
    nb = nbformat.read(str(nb_path), as_version=4)
    NotebookClient(nb, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(nb_path.parent)}}).execute(env=kernel_env())
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    shown = "".join(o.get("text", "") + str(o.get("data", {}).get("text/html", "")) for o in outputs)
    assert "<strong>Verdict:</strong> " in shown and "Per call: harness floor" in shown  # the analysis leads the notebook


def test_module_entry_point_runs():
    proc = subprocess.run([sys.executable, "-m", "workbench", "list"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "calibration" in proc.stdout


def test_background_job_runs_the_cli_and_reports_progress(store):
    import time

    from workbench.running import jobs

    job = jobs.start("calibration", {"repeat": 3, "threads": 1, "torch": False}, store_path=store.path)
    deadline = time.time() + 120
    while not job.done and time.time() < deadline:
        time.sleep(0.2)
    assert job.returncode == 0, job.error_text()
    assert job.progress() == (1.0, "done")
    rec = job.record()
    assert rec["study"] == "calibration" and store.load(rec["run_id"]).status == "complete"
    job.cleanup()
    assert not job.progress_path.parent.exists()


def test_two_runs_queue_on_the_machine_lock(store, tmp_path):
    """A second run waits for the lock instead of timing on a busy machine."""
    import fcntl
    import os
    import threading
    import time

    from workbench.running import runner

    lock_path = os.environ["WORKBENCH_LOCK"]
    messages = []
    with open(lock_path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        entered = threading.Event()

        def second():
            with runner.machine_lock(on_wait=messages.append):
                entered.set()

        t = threading.Thread(target=second)
        t.start()
        time.sleep(0.5)
        assert not entered.is_set() and messages and messages[0].startswith("queued")
        fcntl.flock(fh, fcntl.LOCK_UN)
    t.join(5)
    assert entered.is_set()


def test_report_from_a_committed_bundle_needs_no_store(tmp_path, capsys):
    from pathlib import Path

    bundles = sorted(ROOT.joinpath("traces").rglob("*.bundle.json"))
    if not bundles:
        pytest.skip("no committed bundles")
    out = tmp_path / "r.md"
    assert main(["--store", str(tmp_path / "none.sqlite"), "report", str(bundles[0]), "-o", str(out)]) == 0
    assert "**Verdict:**" in out.read_text()
    assert not (tmp_path / "none.sqlite").exists()


def test_preset_option_and_its_validation(store, capsys):
    code, out = _run_json(capsys, "--store", str(store.path), "run", "calibration", "--preset", "smoke", "--json")
    assert code == 0 and json.loads(out.out)["params"]["repeat"] == 5
    code, out = _run_json(capsys, "--store", str(store.path), "run", "calibration", "--preset", "nope")
    assert code == 2 and "unknown preset" in out.err


# --- a CLI that speaks terminal (issue 44 item 6) ---------------------------------------------------

@pytest.mark.parametrize("argv, said", [
    (["run", "calibraton"], "unknown study 'calibraton' (did you mean 'calibration'?)"),
    (["knobs", "cpu-reduktion"], "(did you mean 'cpu-reduction'?)"),
    (["run", "calibration", "--set", "thread=2"], "unknown parameter (did you mean 'threads'?)"),
    (["run", "calibration", "--preset", "quik"], "unknown preset 'quik' (did you mean 'quick'?)"),
    (["report", "20261124-041556-cpu-reduction-663d3e"], "(did you mean '20261124-041556-cpu-reduction-663d3f'?)"),
], ids=["study", "knobs-study", "knob", "preset", "run-id"])
def test_a_typo_gets_one_line_with_the_closest_name(store, capsys, argv, said):
    code, out = _run_json(capsys, "--store", str(store.path), *argv)
    assert code == 2 and said in out.err and out.err.count("\n") == 1 and out.out == ""
    assert store.runs() == []


def test_knobs_lists_ranges_defaults_units_and_presets(capsys):
    code, out = _run_json(capsys, "knobs", "cpu-reduction")
    assert code == 0
    text = out.out
    for words in ("knob", "default", "allowed", "unit", "n ", "1000000", "1024..67108864", "elements",
                  "any of torch, torch-out", "presets (--preset NAME):", "smoke:", "quick:"):
        assert words in text, words
    code, out = _run_json(capsys, "knobs", "calibration", "--json")
    doc = json.loads(out.out)
    assert {k["knob"] for k in doc["knobs"]} == {"repeat", "threads", "torch"} and "smoke" in doc["presets"]


def test_help_lists_every_command(capsys):
    """``--help`` (argparse formats each command's help with %: the 95% of compare's help once
    ended it in a traceback)."""
    from workbench.cli import COMMANDS

    code, out = _run_json(capsys, "--help")
    assert code == 0 and "95% CI" in out.out
    assert all(f"    {c.name} " in out.out for c in COMMANDS), out.out


def test_run_study_help_lists_its_knobs(capsys):
    code, out = _run_json(capsys, "run", "calibration", "--help")
    assert code == 0 and "calibration's knobs (--set NAME=VALUE):" in out.out and "threads" in out.out
    assert "presets (--preset NAME):" in out.out


def test_an_error_line_comes_before_the_heavy_imports():
    """A mistyped study or run id is answered without pandas, the studies or the statistics
    (what made such a line take 9-12 s on a loaded 2-core machine; benchmarks/cli.py times it)."""
    probe = ("import sys\nfrom workbench.cli import main\n"
             "codes = [main(['run', 'calibraton']), main(['report', 'no-such-run'])]\n"
             "heavy = sorted(m for m in ('pandas', 'scipy', 'altair', 'torch', 'streamlit', 'studies.cpu_reduction') "
             "if m in sys.modules)\nprint(codes, heavy)")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.stdout.strip() == "[2, 2] []", out.stdout + out.stderr


def test_list_names_seeds_by_their_title_not_their_file(capsys):
    code, out = _run_json(capsys, "list")
    assert code == 0 and "IREE issue #24011" in out.out and ".txt" not in out.out
