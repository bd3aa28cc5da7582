"""The wheel alone, in a fresh virtualenv, run from an empty folder with no environment.

Nothing beside the repository is visible: no ``../shared``, no ``$MLENERGY_REFERENCE_DIR``,
no repository files. The fresh virtualenv sees the test environment's third-party packages
through a path entry (not the editable install of mlenergy), so only the wheel provides
``mlenergy``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _run(cmd: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(cwd), "OMP_NUM_THREADS": "1"}
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path]:
    """(the fresh virtualenv's ``bin``, an empty working folder)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    shutil.copytree(
        ROOT / "mlenergy", src / "mlenergy", ignore=shutil.ignore_patterns("__pycache__")
    )
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    pip = [sys.executable, "-m", "pip"]
    out = subprocess.run(
        [
            *pip,
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp / "dist"),
            str(src),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    (wheel,) = (tmp / "dist").glob("mlenergy_lab-*.whl")
    venv = tmp / "venv"
    base = Path(sys.base_prefix) / "bin" / "python3"
    subprocess.run([str(base), "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    out = subprocess.run(
        [
            *pip,
            "--python",
            str(venv / "bin" / "python"),
            "install",
            "--no-deps",
            "--no-index",
            "-q",
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    empty = tmp / "empty"
    empty.mkdir()
    return venv / "bin", empty


def test_mlenergy_comes_from_the_wheel_not_the_checkout(installed):
    bin_dir, cwd = installed
    out = _run([str(bin_dir / "python"), "-c", "import mlenergy.cli as c; print(c.__file__)"], cwd)
    assert out.returncode == 0, out.stderr[-2000:]
    assert str(bin_dir.parent) in out.stdout and str(ROOT) not in out.stdout


def test_reference_lists_the_shipped_data(installed):
    bin_dir, cwd = installed
    out = _run([str(bin_dir / "mlenergy"), "reference"], cwd)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "v3_llm.csv" in out.stdout and "perseus-profiles/gpt3-175b_a40.csv" in out.stdout
    assert "missing here" not in out.stdout


def test_estimate_by_model_name(installed):
    bin_dir, cwd = installed
    cmd = [str(bin_dir / "mlenergy"), "estimate", "--model", "meta-llama/Llama-3.1-8B-Instruct"]
    cmd += ["--gpu", "H100-SXM5-80GB", "--batch-size", "64", "--input-tokens", "512"]
    out = _run([*cmd, "--output-tokens", "256"], cwd)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "energy per output token" in out.stdout and "estimated:mlenergy-" in out.stdout


def test_pipeline_plan_on_a_shipped_perseus_profile(installed):
    bin_dir, cwd = installed
    for name in ("perseus:gpt3-175b-a40", "perseus:bloom-176b-a40"):
        cmd = [str(bin_dir / "mlenergy"), "optimize", "pipeline", "--profile", name]
        out = _run([*cmd, "--microbatches", "2", "--time-unit", "0.01"], cwd)
        assert out.returncode == 0, out.stderr[-2000:]
        assert f"measured:perseus-{name.removeprefix('perseus:')}" in out.stdout


def test_measured_study_from_the_shipped_reference(installed):
    bin_dir, cwd = installed
    study = [str(bin_dir / "mlenergy"), "study", "dense-vs-moe", "--measured"]
    out = _run([*study, "--gpu", "B200"], cwd)  # one GPU's fits: half the work, same tables read
    assert out.returncode == 0, out.stderr[-2000:]
    assert (cwd / "reports" / "dense-vs-moe-measured" / "index.html").is_file()


def test_leaderboard_serves_the_reference_rows(installed):
    import time
    import urllib.request

    from gradio_client import Client

    from mlenergy.testing.server import free_port

    bin_dir, cwd = installed
    port = free_port()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(cwd), "OMP_NUM_THREADS": "1"}
    env["GRADIO_ANALYTICS_ENABLED"] = "False"
    log = (cwd / "leaderboard.log").open("w")
    proc = subprocess.Popen(
        [str(bin_dir / "mlenergy"), "leaderboard", "--port", str(port)],
        cwd=cwd,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None, (cwd / "leaderboard.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "the leaderboard did not answer in 180 s"
            try:
                with urllib.request.urlopen(url, timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                time.sleep(1)
        table = Client(url, verbose=False).predict(api_name="/leaderboard_table")
        assert table["total"] >= 10
        assert {r["hardware"] for r in table["rows"]} <= {"H100-SXM5-80GB", "B200"}
        assert all(r["energy_source"] == "measured:zeus-nvml" for r in table["rows"])
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
