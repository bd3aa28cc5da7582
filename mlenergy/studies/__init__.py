"""Studies that answer a question end to end, built on the runners, the store and the analysis.

Modules:
    families: the dense and Mixture-of-Experts model families of the dense-vs-MoE study.
    dense_vs_moe: the toy-scale study (train, evaluate, benchmark inference, store, report).
    report: the toy study's HTML report, PNG figures and Markdown summary table.
    measured_study: the measured study (real GPU runs against published quality), end to end.
    measured: its rows (best configuration within a deadline, quality, energy per correct).
    measured_analysis: its comparisons (frontier, matched pairs, parameter fits, sparse claim).
    measured_conclusion, measured_report, measured_figures: its conclusion and report files.
"""
