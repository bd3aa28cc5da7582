"""Serving benchmark: an OpenAI-compatible engine under load, measured as ML.ENERGY does.

Modules, each with one job:
    arrivals: when each request is sent (all at once, or Poisson/gamma at a rate).
    timing: one request's timestamps and token times (what the window and the split read).
    steady_state: the steady-state window (pure; live tracker and after-the-fact function).
    energy_split: each request's energy from the power timeline (pure).
    stats: percentiles.
    prompts: synthetic, file or dataset prompts as text.
    client: one streamed chat or completion request over HTTP (httpx).
    loadgen: the asynchronous load generator.
    engine: what engine a server is; launching and stopping a server process group.
    power: the energy scope of a serving run (Zeus devices or the server's modelled CPU).
    runner: one concurrency level to a :class:`~mlenergy.records.RunRecord`; the bench loop.
"""
