"""Studies that answer a question end to end, built on the runners, the store and the analysis.

Modules:
    families: the dense and Mixture-of-Experts model families of the dense-vs-MoE study.
    dense_vs_moe: the study (train, evaluate, benchmark inference, store, report).
    report: the study's HTML report, PNG figures and Markdown summary table.
"""
