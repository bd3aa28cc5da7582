"""Analysis shared by the notebooks, the study report and the leaderboard.

Modules are imported directly (``from mlenergy.analysis.frontier import pareto_frontier``);
this package re-exports nothing so that areas can add modules without editing this file.
"""
