"""Serving benchmark: an OpenAI-compatible engine under load, measured as ML.ENERGY does.

Modules, each with one job:
    arrivals: when each request is sent (all at once, or Poisson/gamma at a rate).
    timing: one request's timestamps and token times (what the window and the split read).
    steady_state: the steady-state window (pure; live tracker and after-the-fact function).
    energy_split: each request's energy from the power timeline (pure).
    stats: percentiles.
    prompts: synthetic, file or dataset prompts as text.
    chunks: the schema of a streamed chunk, checked before the client reads it.
    untrusted: a server's names and versions made safe to store and show.
    client: one streamed chat or completion request over HTTP (aiohttp), bounded in size and time.
    client_procs: worker processes that stream when one core would limit the client.
    loadgen: the asynchronous load generator.
    server_info: what a server says about itself (models, engine, metrics), read with size caps.
    served_model: the model behind the served name (an alias's root) for the record.
    engine: launching and stopping a server process group (and its watchdog).
    signals: SIGTERM and SIGHUP handled as Ctrl-C.
    power: the energy scope of a serving run (Zeus devices or the server's modelled CPU).
    runner: one concurrency level to a :class:`~mlenergy.records.RunRecord`; the bench loop.
"""
