"""Interleaved A/B sessions: two parameter sets of one study measured in alternating rounds.

Two runs measured minutes apart differ by more than their samples say (thread placement,
frequency, other tenants); a session interleaves them so that drift falls on both sides
alike and the run-to-run variation is measured, not assumed away. Each round is one whole
run of the study (``study.run``) for one side; rounds alternate A B, B A, A B, ... (each pair
of rounds reverses the order, as opencl-events rotates its conditions, so a linear drift
cancels), all under one hold of the machine lock.

Stored as **two linked runs**, not one: each side is an ordinary run of the study with its
own parameters (its page, report, claims and notebook work unchanged), whose variants hold
every round's samples in order, with ``extra["side"]``, ``extra["ab_round_sizes"]``
(samples per round, 0 where the variant was absent) and ``extra["load"]`` (the most loaded
of its rounds' load samples, :mod:`workbench.base.machine_load`), and whose ``outputs["ab"]`` names the
other side (``pair``), its ``side``, ``rounds`` and the ``order``. :mod:`workbench.reading.comparison`
recognises the link and compares round by round. A variant that failed its check in any
round is stored as failed, with no samples. Finished rounds are stored as they land, so an
interrupted session keeps them. The same parameters on both sides make an A/A session: its
rounds are A/A pairs for judging separate runs of that configuration.
"""

from __future__ import annotations

import shlex
from types import ModuleType
from typing import Any, Callable

from ..base import env as envmod
from . import harness
from ..base import interrupt
from ..base import machine_load as load
from .runner import DEFAULT_PRECISION_CAP_S, _watchdog, check_precision, machine_lock, note_precision, end, precision_args, precision_run, set_args, stall_limit_s, tagged
from ..data.record import RunRecord, VariantResult, new_run_id, now_utc
from ..results.store import Store
from ..seam.study import Cancelled, ParamError, RunContext, StudyUnavailable, validate

SIDES = ("A", "B")
DEFAULT_ROUNDS = 8


def round_order(rounds: int) -> list[str]:
    """A B, B A, A B, ...: which side runs when."""
    return [side for r in range(rounds) for side in (SIDES if r % 2 == 0 else SIDES[::-1])]


def ab_command(study_id: str, params_a: dict, params_b: dict, rounds: int, precision: float | None = None,
               precision_cap_s: float = DEFAULT_PRECISION_CAP_S) -> str:
    """The exact CLI command that repeats a session: shared values as ``--set``, the rest per side."""
    common = {k: v for k, v in params_a.items() if params_b.get(k) == v}
    only = lambda p: {k: v for k, v in p.items() if k not in common}  # noqa: E731
    sides = [arg for flag, p in (("--a", only(params_a)), ("--b", only(params_b)))
             for pair in set_args(p)[1::2] for arg in (flag, pair)]
    return (shlex.join(["python", "-m", "workbench", "ab", study_id, *set_args(common), *sides,
                        "--rounds", str(rounds)]) + precision_args(precision, precision_cap_s))


def _merge(acc: dict[str, VariantResult], got: list[VariantResult], side: str, round_index: int) -> list[VariantResult]:
    """Fold one round's variants into the side's; returns the variants that changed."""
    changed = []
    for v in got:
        old = acc.get(v.variant)
        if old is None:
            old = acc[v.variant] = VariantResult(v.variant, v.params, [], True, v.check,
                                                 {**v.extra, "side": side, "ab_round_sizes": []},
                                                 [] if v.blocks is not None else None)
        sizes = old.extra["ab_round_sizes"]
        if old.correct and not v.correct:  # one failed round fails the variant: no samples kept
            old.correct, old.samples_ns, old.check = False, [], f"round {round_index + 1}: {v.check}"
            old.blocks = None
            sizes.clear()
        elif old.correct:
            sizes.extend([0] * (round_index - len(sizes)))  # rounds it was absent from
            sizes.append(len(v.samples_ns))
            old.samples_ns = old.samples_ns + list(v.samples_ns)
            if old.blocks is not None and v.blocks is not None:  # each round numbers its blocks from 0
                old.blocks = old.blocks + [b + (max(old.blocks) + 1 if old.blocks else 0) for b in v.blocks]
            else:
                old.blocks = None
        changed.append(old)
    return changed


def interrupted_text(exc: BaseException) -> str:
    """What an interrupt of :func:`execute_ab` kept (its ``run_ids``, when the session had started)."""
    ids = getattr(exc, "run_ids", None)
    if ids is None:
        return "interrupted before the session started; nothing was stored"
    return f"interrupted; the rounds that finished are kept in runs {ids[0]} (A) and {ids[1]} (B)"


def _checked(study: ModuleType, values: dict[str, dict[str, Any]], preset: str | None, precision: float | None,
             rounds: int) -> tuple[dict[str, dict[str, Any]], float]:
    """Each side's parameters and the watchdog's limit (:func:`stall_limit_s`), checked with the
    precision target and the rounds before anything is stored; raises :class:`ParamError` or
    :class:`StudyUnavailable`."""
    params = {side: validate(study, values[side], preset=preset) for side in SIDES}
    check_precision(study, precision)
    if rounds < 2:
        raise ParamError("rounds", f"{rounds} is too few: a session needs at least 2 rounds per side")
    for side in SIDES:
        reason = study.requires(params[side])
        if reason:
            raise StudyUnavailable(reason)
    return params, stall_limit_s()


def _store_round(store: Store, run_id: str, ctx: RunContext, acc: dict[str, VariantResult], side: str, r: int,
                 precision: float | None) -> None:
    """One round's variants merged into its side's and stored (the most loaded round's load
    sample speaks for a variant); the first round's attachments stored."""
    now = load.sample()
    for v in _merge(acc, ctx.variants, side, r):
        if load.loadavg(now) >= load.loadavg(v.extra.get("load")) or "load" not in v.extra:
            v.extra["load"] = now
        note_precision(v, precision)
        store.replace_variant(run_id, v)
    if r == 0:
        for name, kind, data in ctx.attachments:
            store.add_attachment(run_id, name, kind, data)


def execute_ab(
    study: ModuleType,
    values_a: dict[str, Any],
    values_b: dict[str, Any],
    store: Store,
    *,
    rounds: int = DEFAULT_ROUNDS,
    preset: str | None = None,
    progress: Callable[[float, str], None] | None = None,
    cancel=None,
    precision: float | None = None,
    precision_cap_s: float = DEFAULT_PRECISION_CAP_S,
    before_round: Callable[[str, int], None] | None = None,
) -> tuple[RunRecord, RunRecord]:
    """Run an interleaved session and return the two stored runs (A, B).

    Raises as :func:`workbench.running.runner.execute` does (bad parameters of either side store
    nothing). ``before_round(side, round_index)`` is called before each round (the false-call
    benchmark injects its known slowdown there). ``precision`` applies within each round.
    """
    params, stall_s = _checked(study, {"A": values_a, "B": values_b}, preset, precision, rounds)
    store.check_writable()
    ids = {side: new_run_id(study.ID) for side in SIDES}
    order = round_order(rounds)
    reproduce = ab_command(study.ID, params["A"], params["B"], rounds, precision, precision_cap_s)

    def link(side: str) -> dict[str, Any]:
        return {"side": side, "pair": ids["B" if side == "A" else "A"], "rounds": rounds, "order": "".join(order)}

    recs = {side: RunRecord(run_id=ids[side], study=study.ID, params=params[side], env={}, created_utc=now_utc(),
                            reproduce=reproduce, outputs={"ab": link(side)}) for side in SIDES}
    say = progress or (lambda f, m: None)
    acc: dict[str, dict[str, VariantResult]] = {side: {} for side in SIDES}
    outputs: dict[str, dict] = {}
    # Ctrl-C is recorded and raised at the rounds' checkpoints (workbench.base.interrupt)
    with tagged(store, ids["A"], ids["B"]), interrupt.deferred(), \
            machine_lock(on_wait=lambda m: say(0.0, m), study=study.ID, params=params["A"]):
        say(0.0, "measuring the harness floor")
        floor, env = harness.floor_ns(), envmod.capture()
        for rec in recs.values():
            rec.floor_ns, rec.env = floor, env
            store.begin(rec)
        before = load.sample()

        def ended() -> dict[str, dict[str, Any]]:
            after = {"load": {"before": before, "after": load.sample()}}
            return {ids[side]: {"ab": link(side), **after} for side in SIDES}

        try:
            with _watchdog(stall_s) as touch, precision_run(precision, precision_cap_s):
                for step, side in enumerate(order):
                    r = step // 2
                    if before_round:
                        before_round(side, r)
                    where = f"round {r + 1}/{rounds} {side}"

                    def round_progress(fraction: float, message: str, step=step, where=where) -> None:
                        touch()
                        say((step + fraction) / len(order), f"{where}: {message}")

                    ctx = RunContext(progress=round_progress, cancel=cancel)
                    with interrupt.stops_first():
                        out = study.run(params[side], ctx) or {}
                    outputs.setdefault(side, out)  # the first round's outputs stand for the side
                    _store_round(store, ids[side], ctx, acc[side], side, r, precision)
                    touch()
                interrupt.check()  # a stop recorded after the last round's last checkpoint
        except (KeyboardInterrupt, Cancelled) as exc:  # the ids go with it: what the caller reports as kept
            end(store, exc, ended(), "interrupted", "interrupted by the user; finished rounds were kept")
            raise
        except Exception as exc:
            end(store, exc, ended(), "failed", f"{type(exc).__name__}: {exc}")
            raise
        env = envmod.refresh(env)
        after = {"load": {"before": before, "after": load.sample()}}
        for side in SIDES:
            store.update_env(ids[side], env)
            store.finish(ids[side], "complete", outputs={**outputs.get(side, {}), "ab": link(side), **after})
    return store.load(ids["A"]), store.load(ids["B"])
