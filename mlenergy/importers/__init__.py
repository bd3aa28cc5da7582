"""Importers: results of the tools people already use, turned into mlenergy records.

One module per format, each reading its whole input before anything is written:

* :mod:`~mlenergy.importers.mlenergy_benchmark`: run folders of ML.ENERGY's benchmark harness
  (``mlenergy.benchmark`` v3): ``results.json`` + ``prometheus.json`` -> ``measured:zeus-nvml``;
  :mod:`~mlenergy.importers.harness_layout` finds a run's files and reads the harness configs.
* :mod:`~mlenergy.importers.lmeval_results`: lm-evaluation-harness 0.4.x results JSON ->
  :class:`~mlenergy.records.QualityResult` per task x metric.
* :mod:`~mlenergy.importers.optimum_benchmark`: optimum-benchmark ``benchmark.json`` ->
  ``measured:codecarbon`` (kWh -> J).
* :mod:`~mlenergy.importers.zeus_log`: the CSV of ``ZeusMonitor(log_file=...)``.

:mod:`~mlenergy.importers.deliver` prints what was read and made, and appends the new records
to the store or queues them through the submission review (``--submit``); re-importing the
same input adds nothing. :mod:`~mlenergy.importers.common` holds the shared readers.
"""

from __future__ import annotations
