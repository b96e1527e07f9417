"""Comparing training methods over seeds, with the statistics a reviewer accepts.

``elegantpod.compare({"tournament": [store, ...], "sweep": [...]}, target=...)`` reads
each method's runs (tournament stores, single pods' output folders, or curves given as
data), computes per method the solved fraction (Wilson interval) beside the time to
target as censored data (Kaplan-Meier curve, restricted mean time to target at the
budget with a bootstrap interval) and the interquartile means of the time-to-target and
of the final score (stratified bootstrap intervals); for each comparison of a declared
family, the RMST difference, a log-rank test and a permutation test of the RMST
difference (paired by seed where the runs pair), Holm-adjusted at a declared level, with
the IQM differences and the probability of improvement; and returns a
:class:`Comparison`: DataFrames, a self-contained HTML report and a notebook view.
``elegantpod compare`` does the same on the command line.

The map:

- :mod:`~elegantpod.comparison.statistics`: Wilson intervals, IQM, stratified bootstrap,
  probability of improvement, performance profiles, Holm's adjustment (pure NumPy,
  seeded).
- :mod:`~elegantpod.comparison.survival`: time to target as censored data: Kaplan-Meier,
  RMST, the log-rank test, paired and unpaired permutation tests of the RMST difference.
- :mod:`~elegantpod.comparison.runs`: one run read from a store, a pod's output folder or
  data, checked as untrusted input (:class:`RunCurve`).
- :mod:`~elegantpod.comparison.comparison`: :func:`compare` and :class:`Comparison`, the
  figures per method and per pair.
- :mod:`~elegantpod.comparison.report`: the HTML report, the notebook view and Markdown.
"""

from elegantpod.comparison.comparison import Comparison, MethodFigures, Versus, compare
from elegantpod.comparison.runs import RunCurve, RunError, read_run

__all__ = ["Comparison", "MethodFigures", "RunCurve", "RunError", "Versus", "compare", "read_run"]
