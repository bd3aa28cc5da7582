"""Calibration: fit the estimator's coefficients on measurements and report its accuracy.

The estimator (:mod:`mlenergy.estimate`) answers a request at run time; this package is the
other job, done when the coefficients are refitted or checked: read the measurements, fit,
cross-validate and report. It sits one layer above the estimator whose physics it fits, beside
``analysis`` and ``optimize``, which read its measurement table too.

Modules, by job:

* ``calibration``: the fit (bounded least squares over the physics' features);
* ``reference``: the one reader of the ML.ENERGY reference measurements, as run records;
* ``measurements``: run records (reference and a store's) as the fit's tidy columns;
* ``crossval``: grouped cross-validation (no model in both fit and test) and the targets;
* ``refit``: refit and write the shipped coefficients with their prediction interval;
* ``compare``: measured runs of a store beside their estimates;
* ``accuracy_markdown``: the accuracy report of ``mlenergy estimate validate --markdown``.

The fitted numbers (``coefficients``) and the calibration report the estimator applies at run
time stay in :mod:`mlenergy.estimate`.
"""
