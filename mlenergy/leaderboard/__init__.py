"""The leaderboard: its data layer (query, columns, views, plots, HTML) and its Gradio UI.

Modules:
    query: filter, best configuration per model x hardware, sort and page (no Gradio).
    columns, arch, views, plots, html: what the table shows, derived views, figures, rendering.
    reference_layer: the shipped ML.ENERGY reference, read once per process, shown beside
    the store.
    data: the cached snapshot (reference and store) the app serves, answers memoised.
    footprint_view (over mlenergy.footprint): carbon and cost columns derived at view time.
    client_errors: one log line and a path-free message for a refused request.
    context, answers: the app's shared state and the answers both the UI and the API give.
    filters, table_tab, plots_tab, detail_tab, compare_tab, estimate_tab, submit_tab,
    about_tab: one builder per part of the page.
    api: the functions programs call, as named Gradio endpoints (``gradio_client``);
    api_args: their argument checks and guard.
    json_api: the same functions as a plain JSON API (``GET /api/v1/...``), answers cached.
    catalog: the models on the board, the shipped reference, the store snapshot.
    export: the JSON API's answers for the default views as static files.
    call_guard: malformed Gradio calls refused in one log line; log lines capped.
    gradio_costs: Gradio's fixed per-event costs paid once.
    page_cache: the page itself served from memory after the first request.
    app: ``build_app``, ``launch`` and the Space entry point ``main``.
"""
