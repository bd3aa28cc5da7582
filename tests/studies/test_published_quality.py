"""The published-quality reader: validation naming the row, mode parsing, matching rules."""

from __future__ import annotations

import pytest
from measured_fixture import QUALITY_HEADER, QUALITY_ROWS, write_quality

from mlenergy.errors import UserError
from mlenergy.quality.published import (
    COLUMNS,
    match_score,
    read_published_quality,
    run_mode,
    setting_mode,
    unmatched_model_ids,
)
from mlenergy.reference import reference_dir


def test_reads_rows_with_labels_and_modes(quality_file):
    scores = read_published_quality(quality_file)
    assert len(scores) == len(QUALITY_ROWS)
    first = scores[0]
    assert first.label == "published:GPQA-Diamond"
    assert first.is_accuracy and first.mode == "thinking" and first.line == 2
    arena = scores[2]
    assert not arena.is_accuracy and arena.mode is None


@pytest.mark.parametrize(
    "setting,mode",
    [
        ("thinking mode; T=0.6", "thinking"),
        ("non-thinking mode; T=0.7", "non-thinking"),
        ("baseline in Qwen's non-reasoning table", "non-thinking"),
        ("Thinking-2507 = thinking only; baselines (non-thinking 62.9, thinking 71.1)", "thinking"),
        ("Instruct-2507 = non-thinking only; baselines (thinking 71.1)", "non-thinking"),
        ("Reasoning-On; card row 'GPQA'", "thinking"),
        ("IT model, 0-shot CoT", None),
    ],
)
def test_setting_mode(setting, mode):
    assert setting_mode(setting) == mode


def test_run_mode_from_output_length():
    assert run_mode(6000) == "thinking"
    assert run_mode(600) == "non-thinking"
    assert run_mode(None) is None


def test_match_prefers_mode_then_unstated_then_other(tmp_path):
    rows = [
        ["m/x", "GPQA-Diamond", "40", "% accuracy", "", "unstated source", "d"],
        ["m/x", "GPQA-Diamond", "60", "% accuracy", "thinking mode", "t source", "d"],
        ["m/t", "GPQA-Diamond", "80", "% accuracy", "thinking only", "s", "d"],
        ["m/y", "GPQA-Diamond", "30", "% accuracy", "", "s", "d"],
    ]
    scores = read_published_quality(write_quality(tmp_path / "q.csv", rows))
    assert match_score(scores, "m/x", "gpqa-diamond", mean_output_tokens=7000).score.score == 60
    assert match_score(scores, "m/x", "GPQA-Diamond", mean_output_tokens=500).score.score == 40
    only = match_score(scores, "m/t", "GPQA-Diamond", mean_output_tokens=500)
    assert only.score.score == 80 and "only thinking scores" in only.how
    given = match_score(scores, "m/x", "GPQA-Diamond", mode="thinking")
    assert given.score.score == 60 and "given" in given.how
    with pytest.raises(ValueError, match="mode must be"):
        match_score(scores, "m/x", "GPQA-Diamond", mode="fast")
    assert match_score(scores, "m/y-FP8", "GPQA-Diamond").via_base_model
    assert match_score(scores, "m/none", "GPQA-Diamond") is None
    assert unmatched_model_ids(scores, ["m/x", "m/y-FP8"]) == ["m/t"]


@pytest.mark.parametrize(
    "row,needle",
    [
        (["m", "B", "abc", "% accuracy", "", "", ""], "line 2 (m, B): score 'abc' is not a number"),
        (["m", "B", "-1", "% accuracy", "", "", ""], "line 2 (m, B): score -1 is outside"),
        (["m", "B", "5000", "Elo", "", "", ""], "score 5000 is outside the range of unit 'Elo'"),
        (["m", "B", "5", "stars", "", "", ""], "unit 'stars' is not known"),
        (["", "B", "5", "%", "", "", ""], "line 2: column 'model_id' is empty"),
    ],
)
def test_bad_rows_name_their_line(tmp_path, row, needle):
    with pytest.raises(UserError) as info:
        read_published_quality(write_quality(tmp_path / "q.csv", [row]))
    assert needle in str(info.value)


def test_missing_column_and_missing_file(tmp_path):
    header = [c for c in QUALITY_HEADER if c != "unit"]
    path = write_quality(tmp_path / "q.csv", [["m", "B", "5", "", "", ""]], header)
    with pytest.raises(UserError, match="missing column"):
        read_published_quality(path)
    with pytest.raises(UserError, match="not found"):
        read_published_quality(tmp_path / "absent.csv")
    assert "score" in COLUMNS


def test_the_shared_reference_file_validates():
    from mlenergy.quality.published import default_published_quality_path

    assert default_published_quality_path() is not None
    scores = read_published_quality(reference_dir() / "published-quality.csv")
    assert len(scores) > 100
    qwen = match_score(scores, "Qwen/Qwen3-32B", "GPQA-Diamond", mean_output_tokens=7000)
    assert qwen.score.mode == "thinking"
    assert match_score(
        scores, "Qwen/Qwen3-32B", "GPQA-Diamond", mean_output_tokens=600
    ).score.mode == ("non-thinking")


def test_default_reasoning_level_chosen_among_levels(tmp_path):
    """Rows of several reasoning levels (gpt-oss): the default level wins, the others named."""
    from mlenergy.quality.published import reasoning_level

    rows = [
        ["org/oss", "GPQA-Diamond", "80.1", "% accuracy", "reasoning level high", "a", ""],
        ["org/oss", "GPQA-Diamond", "67.1", "% accuracy", "no tools, reasoning level low", "b", ""],
        ["org/oss", "GPQA-Diamond", "73.1", "% accuracy", "reasoning level medium", "b", ""],
        ["org/one", "GPQA-Diamond", "60.0", "% accuracy", "reasoning level high", "c", ""],
    ]
    scores = read_published_quality(write_quality(tmp_path / "q.csv", rows))
    assert reasoning_level("no tools, reasoning level high (x)") == "high"
    assert reasoning_level("reasoning effort not stated") is None
    for tokens in (1800.0, 9000.0):
        match = match_score(scores, "org/oss", "GPQA-Diamond", mean_output_tokens=tokens)
        assert match.score.score == 73.1
        assert "reasoning level medium chosen" in match.how
        assert "high 80.1" in match.how and "low 67.1" in match.how
    # One level only: nothing to choose between, the row is used as before.
    only = match_score(scores, "org/one", "GPQA-Diamond", mean_output_tokens=9000.0)
    assert only.score.score == 60.0 and "reasoning level" not in only.how
