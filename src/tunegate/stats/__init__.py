"""The statistical decision protocol: is the candidate really better, and is the baseline still
the baseline?

One concept per module, all usable with plain numbers (per-repeat metric values, relative
effects):

- :mod:`.noise` sigma_baseline (relative), with its chi-square interval, refreshed during a run.
- :mod:`.threshold` t = max(2 sigma, 3%), both constants configurable.
- :mod:`.power` repeats before measuring (z and t), minimum detectable effect, the gate's power.
- :mod:`.compare` Welch, Mann-Whitney, bootstrap percentile intervals for quantiles.
- :mod:`.sequential` always-valid confidence sequences (Howard et al. 2021, normal mixture).
- :mod:`.fdr` Benjamini-Hochberg across metrics judged together.
- :mod:`.decision` ACCEPT / REJECT / INCONCLUSIVE rule, directions, objectives vs guardrails.
- :mod:`.gate_record` the record every gate mode writes; :mod:`.gate` the fixed-n gate and
  ``replay`` of any mode; :mod:`.gate_sequential` paired runs that may stop after any pair;
  :mod:`.gate_reference` a candidate judged after every repeat against the kept config's
  already measured repeats.
- :mod:`.drift` CUSUM, Page-Hinkley, ADWIN, BOCPD: *when* did the baseline change.
"""

from __future__ import annotations

from tunegate.stats.compare import Comparison, bootstrap_quantile, mann_whitney, welch
from tunegate.stats.decision import Decision, MetricSpec
from tunegate.stats.drift import ADWIN, BOCPD, CUSUM, DETECTORS, DriftDetector, PageHinkley
from tunegate.stats.fdr import FDRResult, benjamini_hochberg
from tunegate.stats.gate import GateConfig, GateRecord, MetricEvidence, evaluate, replay
from tunegate.stats.gate_reference import evaluate_against_reference
from tunegate.stats.gate_sequential import SequentialGate
from tunegate.stats.noise import NoiseEstimate, estimate_noise
from tunegate.stats.power import (
    RepeatPlan,
    gate_power,
    gate_sample_size,
    minimum_detectable_effect,
    plan_repeats,
    power_t,
    power_z,
    sample_size_t,
    sample_size_z,
)
from tunegate.stats.sequential import ConfidenceSequence, best_rho, normal_mixture_boundary
from tunegate.stats.threshold import Threshold, ThresholdPolicy

__all__ = [
    "ADWIN", "BOCPD", "CUSUM", "DETECTORS", "Comparison", "ConfidenceSequence", "Decision",
    "DriftDetector", "FDRResult", "GateConfig", "GateRecord", "MetricEvidence", "MetricSpec",
    "NoiseEstimate", "PageHinkley", "RepeatPlan", "SequentialGate", "Threshold",
    "ThresholdPolicy", "benjamini_hochberg", "best_rho", "bootstrap_quantile", "estimate_noise",
    "evaluate", "evaluate_against_reference", "gate_power", "gate_sample_size", "mann_whitney",
    "minimum_detectable_effect", "normal_mixture_boundary", "plan_repeats", "power_t", "power_z",
    "replay", "sample_size_t", "sample_size_z", "welch",
]
