"""Compile every IREE program a cpu-reduction run needs, for a machine that only has the runtime.

    python -m studies.cpu_reduction.precompile --preset many-core --set target_cpu=x86-64-v4 [--cache DIR]

takes the study's parameters as ``workbench run`` does (``--preset``, ``--set name=value``;
``workers`` may exceed this machine's cores: the programs do not depend on it) and fills the
compile cache (``.workbench/cache/iree/`` or ``--cache``); copy it to the other machine's
checkout, where runs with the same parameters and ``target_cpu`` find their modules there.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    from kernels.iree.sum_programs import program
    from studies import cpu_reduction as study
    from studies.cpu_reduction import iree_tools
    from workbench.seam.study import ParamError, ParamSpace

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    ap.add_argument("--cache", type=Path, default=None)
    args = ap.parse_args(argv)
    try:
        params = study.SPACE.resolve(ParamSpace.parse_sets(args.set), preset=args.preset)
        flags = iree_tools.seed_flags(params["target_cpu"])
    except (ParamError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for n, c, split in study.programs_needed(params):
        mod = iree_tools.compile_program(program(n, c, split or "aligned"), flags, args.cache)
        print(f"{'cached ' if mod.info['cached'] else 'compiled'} {mod.vmfb.name}: N={n} c={c} "
              f"{mod.info.get('label', '')} {' '.join(flags)} -> {mod.info['dispatch_names']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
