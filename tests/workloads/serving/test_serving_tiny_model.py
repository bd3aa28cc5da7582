"""``mlenergy models save-tiny``: a servable folder in one command, and the next steps it prints.

The serving docs open with these steps; their commands are checked against what the command
prints and against ``bench``'s options.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
from pathlib import Path

import pytest

from mlenergy.cli import load_command, main
from mlenergy.workloads.serving.tiny_model import serving_extra_missing

ROOT = Path(__file__).resolve().parents[3]
SERVE_DOC = ROOT / "docs" / "serve-benchmark.md"


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny") / "tiny-llama"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["models", "save-tiny", str(folder)]) == 0
    return folder, out.getvalue().splitlines()


def _bench_options() -> set[str]:
    bench = load_command("bench")
    return {opt for p in bench.params for opt in (*p.opts, *p.secondary_opts)}


def test_the_folder_holds_weights_tokenizer_and_chat_template(saved):
    folder, lines = saved
    for name in ("config.json", "model.safetensors", "tokenizer.json", "chat_template.jinja"):
        assert (folder / name).is_file(), name
    assert json.loads((folder / "config.json").read_text())["architectures"] == ["LlamaForCausalLM"]
    assert lines[0].startswith(f"wrote {folder}: a tiny LlamaForCausalLM (dense")


def test_the_printed_bench_command_takes_only_bench_options(saved):
    folder, lines = saved
    (line,) = [x for x in lines if x.startswith("measure it served:")]
    words = shlex.split(line.split(":", 1)[1])
    assert words[:2] == ["mlenergy", "bench"]
    assert words[words.index("--model") + 1] == str(folder)
    assert "{model}" in words[words.index("--launch") + 1]
    assert {w for w in words if w.startswith("--")} <= _bench_options()


def test_this_environment_can_serve_so_no_install_note(saved):
    from transformers.utils.import_utils import is_serve_available

    _, lines = saved
    assert serving_extra_missing() == [] and is_serve_available()
    assert not any(x.startswith("note:") for x in lines)


@pytest.mark.parametrize(
    "args,needle", [(["--kind", "sparse"], "unknown tiny model kind 'sparse'"), ([], "is a file")]
)
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, capsys, args, needle):
    target = tmp_path / ("afile" if not args else "never")
    if not args:
        target.write_text("x")
    assert main(["models", "save-tiny", str(target), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and needle in err and "\n" not in err
    assert target.is_file() if not args else not target.exists()


def test_the_serving_docs_open_with_the_quickstart_the_command_prints(saved):
    folder, lines = saved
    text = SERVE_DOC.read_text(encoding="utf-8")
    quick = text[: text.index("## What is measured")]
    assert "pip install 'mlenergy-lab[serve]'" in quick
    block = re.search(r"```bash\n(.*?)```", quick, re.S).group(1).replace("\\\n", " ")
    commands = [" ".join(c.split("#")[0].split()) for c in block.splitlines() if c.strip()]
    assert commands[0] == "mlenergy models save-tiny tiny-llama"
    printed = next(x for x in lines if x.startswith("measure it served:")).split(":", 1)[1]
    printed = " ".join(printed.split()).replace(str(folder), "tiny-llama")
    printed = re.sub(r'--launch "\S*transformers ', '--launch "transformers ', printed)
    assert printed in commands
