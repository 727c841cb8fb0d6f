"""The runner: every argument checked once, per-point storage, interrupted and failed sweeps,
and the record it returns being the one it stored."""

import pytest

from workbench.running import runner
from workbench.data.record import VariantResult
from workbench.seam.study import ParamError, RunContext, validate

from tests.support.fake_studies import InterruptedSweep as _Sweep


def test_interrupted_sweep_keeps_finished_points(store):
    with pytest.raises(KeyboardInterrupt):
        runner.execute(_Sweep, {}, store)
    (row,) = store.runs()
    assert row["status"] == "interrupted"
    rec = store.load(row["run_id"])
    assert [v.variant for v in rec.variants] == ["p0", "p1"]


def test_failing_study_is_stored_as_failed_with_error(store):
    class Broken(_Sweep):
        @staticmethod
        def run(params, ctx):
            ctx.record(VariantResult("p0", {}, [1.0, 2.0, 3.0], True, "ok"))
            raise RuntimeError("compiler exploded")

    with pytest.raises(RuntimeError):
        runner.execute(Broken, {}, store)
    rec = store.load("latest")
    assert rec.status == "failed" and "compiler exploded" in rec.error
    assert len(rec.variants) == 1


def test_invalid_params_store_nothing(store):
    from workbench.seam.study import ParamError

    with pytest.raises(ParamError):
        runner.execute(_Sweep, {"points": 0}, store)
    assert store.runs() == []


def test_execute_keep_partial_returns_the_failed_run_with_its_points(store):
    class Broken(_Sweep):
        @staticmethod
        def run(params, ctx):
            ctx.record(VariantResult("p0", {}, [1.0, 2.0, 3.0], True, "ok"))
            raise RuntimeError("NCCL timeout")

    rec, error = runner.execute_keep_partial(Broken, {}, store)
    assert "NCCL timeout" in error and rec.status == "failed" and [v.variant for v in rec.variants] == ["p0"]


class _Repeats(_Sweep):
    """A fake study that records a point, updates it with a repeat, attaches a trace and returns
    outputs the store keeps as JSON (a tuple, a float key)."""

    @staticmethod
    def run(params, ctx: RunContext):
        ctx.record(VariantResult("p0", {"i": 0}, [1.0, 2.0, 3.0], True, "ok", extra={"shape": (2, 3)}))
        ctx.record(VariantResult("p1", {"i": 1}, [4.0, 5.0, 6.0], True, "ok"))
        ctx.update(VariantResult("p0", {"i": 0}, [1.0, 2.0, 3.0, 1.5], True, "ok", blocks=[0, 0, 1, 1]))
        ctx.attach("z.json", "trace/chrome-json", b'{"traceEvents": []}')
        ctx.attach("a.log", "text/plain", b"log")
        return {"pair": (1, 2), "ratio": {0.5: "half"}}


def test_the_run_returns_what_it_stored(store):
    rec = runner.execute(_Repeats, {"points": 2}, store)
    back = store.load(rec.run_id)
    assert rec.to_json() == back.to_json()
    assert rec.attachments == back.attachments and [n for n, _, _ in rec.attachments] == ["a.log", "z.json"]
    assert [v.variant for v in rec.variants] == ["p0", "p1"] and rec.variants[0].blocks == [0, 0, 1, 1]
    assert rec.status == "complete" and rec.finished_utc and rec.outputs["pair"] == [1, 2]


def test_a_run_validates_its_parameters_once(store, monkeypatch):
    calls = []

    def counted(*args, **kw):
        calls.append(args)
        return validate(*args, **kw)

    monkeypatch.setattr(runner, "validate", counted)
    runner.execute(_Repeats, {"points": 2}, store)
    assert len(calls) == 1


def test_the_cli_checks_the_store_once(store, monkeypatch, capsys):
    from workbench.cli import main
    from workbench.results.store import Store

    checks = []
    real = Store.check_writable
    monkeypatch.setattr(Store, "check_writable", lambda self: checks.append(self.path) or real(self))
    assert main(["--store", str(store.path), "run", "calibration", "--preset", "smoke", "--json"]) == 0
    assert len(checks) == 1


def test_a_plan_refuses_a_bad_precision_before_anything_is_made(store):
    with pytest.raises(ParamError, match="precision"):
        runner.plan(_Sweep, {}, precision="60%")
    assert store.runs() == []
