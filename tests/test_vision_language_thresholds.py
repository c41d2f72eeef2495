"""A vision-language model's position thresholds crossed (issue 28 section 1, issue 29): the
thresholds of its text config, each crossed by decoding steps at past lengths T - 2, T - 1 and T
from a past built on the prompts' rows as text (image tokens removed), PyTorch's own forward
and cache against the embedding and decoder files.

One real CLI run on one repository of two tiny seeded models (tests/vl_family_models.py):
a Gemma 3 whose sliding layer has a window of 4, and a LLaVA whose Llama decoder has a
dynamic-NTK rope built for 48 positions and is deployed to 96 (`max-context`): dynamo refuses
the rope's branch, and the TorchScript file keeps the frequencies of the export's length, as
the decoder's case in tests/test_thresholds.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from fixture_repo.harness import run_cli, write_model_repo
from test_generation import errors
from vl_family_models import SAMPLES, SOURCE

MODELS = SOURCE + '''

def gemma3_window():
    return gemma3(sliding_window=4)


def llava_dynamic():
    return llava(max_position_embeddings=48, rope_scaling={"rope_type": "dynamic",
                                                           "factor": 4.0})
'''
ENTRIES = {"gemma3_window": ("gemma3", "{ steps = 4, max-context = 64 }"),
           "llava_dynamic": ("llava", "{ steps = 4, max-context = 96 }")}


def config() -> str:
    entries = ["batch-sizes = [3]\n"]
    for name, (family, generate) in ENTRIES.items():
        inputs = "\n".join(f'{key} = "samples/{family}_{key}.npy"' for key in SAMPLES[family]())
        entries.append(f'[[model]]\nname = "{name}"\nfactory = "models.vlm:{name}"\n'
                       f"generate = {generate}\n\n[model.inputs]\n{inputs}\n")
    return "\n".join(entries)


def samples() -> dict[str, np.ndarray]:
    return {f"{family}_{key}": value for family, _ in ENTRIES.values()
            for key, value in SAMPLES[family]().items()}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    root = tmp_path_factory.mktemp("vl_thresholds")
    repo = write_model_repo(root, ("vlm", MODELS), samples(), config())
    done = run_cli("check", "--jobs", "1", cwd=repo, out=root / "out")
    assert done.code == 1, done.stdout + done.stderr
    models = done.models()
    models["report.md"] = {"text": (root / "out" / "report.md").read_text(encoding="utf-8")}
    return models


def one(result: dict) -> dict:
    [threshold] = result["generation"]["thresholds"]
    return threshold


@pytest.mark.slow
def test_a_gemma3_vlm_agrees_across_its_sliding_window(run: dict[str, dict]) -> None:
    result = run["gemma3_window"]
    assert result["passed"], errors(result)
    threshold = one(result)
    assert (threshold["key"], threshold["value"], threshold["layers"], threshold["passed"]) == (
        "sliding_window", 4, [0], True)
    assert [step["past"] for step in threshold["steps"]] == [2, 3, 4]
    assert all(step["max_logit_diff"] <= result["atol"] and step["tokens_agree"] == 3
               and step["rows"] == 3 and not step["differing_rows"]
               for step in threshold["steps"])
    # gemma3_samples: 8 image tokens in row 1, 4 in row 0; the window is shorter than the rows
    assert threshold["built"].startswith(
        "from the prompts' first 3 rows as text (12 image tokens removed, left-padded again): ")
    assert "last 2 positions" in threshold["built"]


@pytest.mark.slow
def test_a_dynamic_rope_baked_in_a_vlm_decoder_fails_past_its_threshold(
        run: dict[str, dict]) -> None:
    result = run["llava_dynamic"]
    threshold = one(result)
    assert (threshold["key"], threshold["value"], threshold["passed"]) == (
        "max_position_embeddings", 48, False)
    below, at, past = threshold["steps"]
    assert [step["past"] for step in threshold["steps"]] == [46, 47, 48]
    for step in (below, at):
        assert step["max_logit_diff"] <= result["atol"]
        assert not step["differing_rows"]
    assert past["max_logit_diff"] > result["atol"]
    assert past["differing_rows"]
    assert "extended by 40 positions" in threshold["built"]  # 6 text tokens a row
    [finding] = [f for f in result["findings"] if f["code"] == "position-threshold"]
    assert finding["severity"] == "error"
    assert finding["message"].startswith("`max_position_embeddings` = 48")
    assert "past length 48 (49 positions, past it)" in finding["message"]
    assert finding["details"]["config_key"] == "max_position_embeddings"
    assert finding["details"]["max_abs_diff"] == past["max_logit_diff"]
    assert "max-context = 48" in finding["fix"]
    # the prompts' decoding through the three files agrees: only the threshold fails it
    # (beside the export's finding of the rope's branch TorchScript baked)
    assert {code for code, _ in errors(result)} == {"position-threshold",
                                                     "data-dependent-branch"}


@pytest.mark.slow
def test_the_report_lists_the_vlms_thresholds(run: dict[str, dict]) -> None:
    text = run["report.md"]["text"]
    assert "thresholds: sliding_window = 4 ✅" in text  # the Generation row
    assert "thresholds: max_position_embeddings = 48 ❌" in text
    assert "| ✅ | `sliding_window` | 4 | 0 | past 2: " in text  # each model's table
    assert "| ❌ | `max_position_embeddings` | 48 | all | past 46: " in text
