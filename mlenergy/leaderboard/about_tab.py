"""The About tab: what the leaderboard shows, its units, where each figure comes from."""

from __future__ import annotations

import gradio as gr


def build_about_tab() -> None:
    """Lay out the About tab."""
    with gr.Tab("About", id="tab-about"):
        gr.Markdown(ABOUT_MARKDOWN)


ABOUT_MARKDOWN = """
## What this leaderboard shows

**One row per model x hardware x task**: the configuration (GPU count, parallelism, batch size or
`max_num_seqs`, precision) with the **lowest energy per output token** among those meeting the
*latency deadline* (median inter-token latency) and *energy budget* you set. Untick
"Best configuration" to see every configuration.

### Units
| Figure | Unit | Meaning |
|---|---|---|
| Energy/token | J | energy of the measured scope per generated (output) token, whole request |
| ITL p50 | ms | median time between two generated tokens of one request |
| Throughput | tokens/s | output tokens per second of the whole configuration |
| Power | W | average power of the measured scope |
| Tokens/J | tokens/J | output tokens per joule = tokens per second per watt |
| Params | billions | total and active (per token) parameters, counted from the model config |

### Where each figure comes from
Every row names its **energy source**, and the *Energy source* filter keeps them apart:

- `measured:zeus-nvml` / `measured:zeus-rapl`: read from hardware energy counters through Zeus.
- `modelled:cpu-tdp`: no counter existed; energy computed from a documented CPU power model.
- `estimated:mlenergy-<version>`: predicted by mlenergy's analytical estimator, not measured.
- `emulated:*`: test data, never accepted as a submission.

The **ML.ENERGY reference rows** (submitter *ML.ENERGY Leaderboard v3/v2*) were measured by
ML.ENERGY with Zeus on NVML counters while vLLM served the model (v3: vLLM 0.11.1, H100 and
B200; v2: vLLM 0.5.4, H100), GPU energy summed over all GPUs, steady-state window only. Prompt
lengths are not published, so those rows have no input length.

**Quality** comes from quality results of the same model: linked to the very run when the
submitter measured both together (`same run`), otherwise matched by model id and config
fingerprint. For runs without a quality result of their own (ML.ENERGY's rows, most
submissions), the *Quality figure* menu also offers the scores that model makers and public
leaderboards **published** (`published:<benchmark>`: GPQA Diamond, MMLU-Pro, LMArena...), the
score of the run's mode (thinking or not, told by its mean output length). They were not
measured in the same run: the *Quality source* column says `published:<benchmark>`, and the
source (report, table, date) and how the score was matched show on hover and in *Model detail*.
**Energy per correct answer** (J) = energy per response / (accuracy % / 100), shown where the
quality is an accuracy in % and the run answered that benchmark's questions (the `gpqa` task
with a GPQA score); a chat response's energy over a GPQA accuracy is not one. The *Model
detail* tab shows how each figure was linked, the full provenance of each run (hardware,
software versions, serving engine, scope) and its power timeline when recorded.

### How to submit
1. Measure with `mlenergy bench ... --json > results.jsonl` (JSON lines of run records), or
   write records matching the JSON Schema in `data/schema/`.
2. Upload the file in the *Submit* tab with your name, or run
   `mlenergy submit results.jsonl --submitter "Your Lab"`. A `Submission` JSON (your name,
   optional contact and description, the runs and quality results) needs no extra name.
3. Every problem is reported at once. A valid bundle waits in `data/submissions/pending/` until
   a maintainer runs `mlenergy submissions approve ID`; approved runs appear here with your
   name as submitter (press *Reload from store*).
"""
