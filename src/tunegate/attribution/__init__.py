"""Which change did what: the on/off control experiment behind a tuning result.

:mod:`.changes` (the differences between the baseline and the kept config, each a gauge, engine
or environment change), :mod:`.design` (the configs to measure and their interleaved order),
:mod:`.repeats` (how many times each), :mod:`.estimate` (effects as contrasts of log means,
with intervals), :mod:`.analysis` (the verdicts, a pure function of the measured values,
replayed by ``tunegate replay``).
"""

from tunegate.attribution.analysis import analyse
from tunegate.attribution.changes import Change, changes_between
from tunegate.attribution.design import Cell, Design, plan_design
from tunegate.attribution.repeats import plan_repeats

__all__ = ["Cell", "Change", "Design", "analyse", "changes_between", "plan_design",
           "plan_repeats"]
