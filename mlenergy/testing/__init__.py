"""Test support shared by the tests and the benchmarks (never imported by product code).

Modules:
    synthetic: synthetic run records with emulated energy, for fixtures.
    server: serve the real ``mlenergy leaderboard`` on a free local port; Chromium flags.
    estimate_requests: random tables of estimate requests, for the estimator's agreement check.
    estimate_features: one configuration's physics inputs, as an estimate computes them.
"""
