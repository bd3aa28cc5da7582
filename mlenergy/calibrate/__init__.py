"""Calibration: fit the estimator's coefficients on measurements and report its accuracy.

The estimator (:mod:`mlenergy.estimate`) answers a request at run time; this package is the
other job, done when the coefficients are refitted or checked: fit, cross-validate and
report. It sits one layer above the estimator whose physics it fits. The measurements it fits
are read by :mod:`mlenergy.reference.runs` (ML.ENERGY's tables as run records) and
:mod:`mlenergy.reference.measurements` (run records as the fit's tidy columns), which the
planners, the studies and the leaderboard read too.

Modules, by job:

* ``calibration``: the fit (bounded least squares over the physics' features);
* ``crossval``: grouped cross-validation (no model in both fit and test) and the targets;
* ``refit``: refit and write the shipped coefficients with their prediction interval;
* ``compare``: measured runs of a store beside their estimates;
* ``accuracy_markdown``: the accuracy report of ``mlenergy estimate validate --markdown``.

The fitted numbers (``coefficients``) and the calibration report the estimator applies at run
time stay in :mod:`mlenergy.estimate`.
"""
