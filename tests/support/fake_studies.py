"""Fake studies the runner and job tests share."""

from workbench.data.record import VariantResult
from workbench.seam.study import Param, ParamSpace, RunContext


class InterruptedSweep:
    """A sweep of ``points`` whose run is interrupted (KeyboardInterrupt) as its third point
    starts, after two points were recorded and counted into the progress."""

    ID = "sweep"
    SPACE = ParamSpace(params=(Param("points", "int", 5, min=1),), presets={"smoke": {}, "quick": {}})

    @staticmethod
    def requires(params):
        return None

    @staticmethod
    def run(params, ctx: RunContext):
        steps = ctx.steps(params["points"])
        for i in range(params["points"]):
            if i == 2:
                raise KeyboardInterrupt
            ctx.record(VariantResult(f"p{i}", {"i": i}, [1.0 + i, 2.0 + i, 3.0 + i], True, "ok"))
            steps.tick(f"point {i}")
        return {}
