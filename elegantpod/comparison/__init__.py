"""Comparing training methods over seeds, with the statistics a reviewer accepts.

``elegantpod.compare({"tournament": [store, ...], "sweep": [...]}, target=...)`` reads
each method's runs (tournament stores, single pods' output folders, or curves given as
data), computes per method the solved fraction (Wilson interval) and the interquartile
means of the time-to-target and of the final score (stratified bootstrap intervals),
and for the first method against each other the IQM differences and the probability of
improvement, and returns a :class:`Comparison`: DataFrames, a self-contained HTML report
and a notebook view. ``elegantpod compare`` does the same on the command line.

The map:

- :mod:`~elegantpod.comparison.statistics`: Wilson intervals, IQM, stratified bootstrap,
  probability of improvement, performance profiles (pure NumPy, seeded).
- :mod:`~elegantpod.comparison.runs`: one run read from a store, a pod's output folder or
  data, checked as untrusted input (:class:`RunCurve`).
- :mod:`~elegantpod.comparison.comparison`: :func:`compare` and :class:`Comparison`, the
  figures per method and per pair.
- :mod:`~elegantpod.comparison.report`: the HTML report, the notebook view and Markdown.
"""

from elegantpod.comparison.comparison import Comparison, MethodFigures, Versus, compare
from elegantpod.comparison.runs import RunCurve, RunError, read_run

__all__ = ["Comparison", "MethodFigures", "RunCurve", "RunError", "Versus", "compare", "read_run"]
