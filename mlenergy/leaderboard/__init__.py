"""The leaderboard: its data layer (query, columns, views, plots, HTML) and its Gradio UI.

Modules:
    query: filter, best configuration per model x hardware, sort and page (no Gradio).
    columns, arch, views, plots, html: what the table shows, derived views, figures, rendering.
    data: the cached store snapshot the app serves.
    estimate_tab, submit_tab: the Estimator and Submit tabs' logic.
    app: the Gradio UI (``build_app``, ``launch``).
"""
