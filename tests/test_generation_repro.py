"""A generating model's failing step in its repro folder (issue 23 §3-4).

An encoder-decoder generator's failing step localised, with its repro folder: a tiny BART
(seeded random weights, built from a config, offline) through the real CLI with a tolerance
below float32's noise, so step 0 (the decoder's start token: one token, past 0) fails. The
folder's texts for a step kept, cut or left out, from the bundled example's report.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from onnx_parity.generation_results import StepRepro
from onnx_parity.report.repro.repro_text import repro_report, repro_script, repro_section
from onnx_parity.report.repro_json import repro_from_json, repro_to_json
from onnx_parity.report.serialization import run_from_json
from onnx_parity.results import ModelResult
from test_generation import check_step_folder, errors
from test_generation_encoder_decoder import checked

EXPECTED = Path(__file__).resolve().parent / "expected"


@pytest.mark.slow
def test_a_failing_bart_step_localises_and_its_folder_holds_the_encoder_output(
        tmp_path: Path) -> None:
    ids = np.random.default_rng(0).integers(3, 64, (3, 7)).astype(np.int64)
    mask = np.ones_like(ids)
    mask[1, -2:] = 0  # BART pads on the right
    ids[mask == 0] = 1
    result, out = checked(tmp_path, "bart", {"input_ids": ids, "attention_mask": mask}, 2,
                          "atol = 1e-9\nrtol = 0\n")
    parity = [m for code, m in errors(result) if code == "parity-mismatch"]
    assert parity
    assert all(m.startswith("generation step 0 (past length 0)") for m in parity)
    # localised as any failing cut: the one-token step runs dynamo's graph past its guards
    [first] = [node for node in result["divergence"]["nodes"] if node["first"]]
    # named as in the user's BartForConditionalGeneration, without the tool's wrappers
    assert first["module"].startswith("model.decoder.layers.")
    assert result["divergence"]["input_shapes"]["input_ids"] == [3, 1]
    assert any("Diverges first at node" in m for m in parity)
    repro = result["repro"]
    assert (repro["found_by"], repro["value"], repro["reproduces"]) == (
        "localisation", first["node"], True)
    record = check_step_folder(result, out, 0, 0)
    assert record["inputs"][:3] == ["input_ids", "encoder_hidden_states",
                                    "encoder_attention_mask"]
    with np.load(out / "m.repro" / "step_inputs.npz") as feed:
        assert feed["encoder_hidden_states"].shape == (3, 7, 32)  # the encoder file's output
        assert (feed["encoder_attention_mask"] == mask).all()
        assert (feed["input_ids"] == 2).all()  # the decoder start token
    assert sorted(path.name for path in (out / "m.repro").iterdir()) == [
        "REPORT.md", "expected.npz", "inputs.npz", "repro.py", "step_expected.npz",
        "step_inputs.npz", "subgraph.onnx"]


def fixture_model() -> ModelResult:
    """The bundled example's localised model (its repro folder holds a subgraph)."""
    data = json.loads((EXPECTED / "seed-failures.report.json").read_text(encoding="utf-8"))
    return next(model for model in run_from_json(data).models if model.repro is not None)


STEP = StepRepro(step=2, past_length=7, model="spectral-head.onnx", optimization="all",
                 batch_size=4, rows=(4, 5, 6, 7), inputs=("input_ids", "attention_mask"),
                 outputs=("logits",), max_abs_diff=3e-4, reproduces=True, size_bytes=1000)


def test_repro_py_runs_the_subgraph_and_the_step_or_the_step_alone() -> None:
    model = fixture_model()
    assert model.repro is not None
    both = dataclasses.replace(model.repro, step=STEP)
    script = repro_script(model, both)
    compile(script, "repro.py", "exec")  # a script Python reads
    assert script.index('"subgraph.onnx"') < script.index('"step_inputs.npz"')
    assert 'HERE.parent / "spectral-head.onnx"' in script
    alone = dataclasses.replace(both, found_by="generation-step", omitted="none was named")
    script = repro_script(model, alone)
    compile(script, "repro.py", "exec")
    assert "subgraph.onnx" not in script
    assert "generation step 2 (past length 7)" in script.splitlines()[0]
    report = repro_report(model, alone, {})
    assert report.startswith("# onnxruntime differs from PyTorch at generation step 2 (past "
                             "length 7) of `spectral-head.onnx`: max abs diff")
    assert "This folder holds no subgraph: none was named." in report
    assert "for prompt rows 4, 5, 6, 7, the failing batch" in report


def test_a_step_left_out_is_said_in_the_comment_and_reads_back_from_report_json() -> None:
    model = fixture_model()
    assert model.repro is not None
    step = dataclasses.replace(STEP, rows=(5,), size_bytes=0, omitted="too large to include")
    left = dataclasses.replace(model.repro, step=step, found_by="generation-step",
                               omitted="none was named")
    [_, section] = repro_section(dataclasses.replace(model, repro=left))
    assert section.startswith("**Repro:** `spectral-head.repro/` holds only `REPORT.md`: none "
                              "was named.")
    assert section.endswith("The failing generation step 2 (past length 7) is not included: "
                            "too large to include.")
    written = repro_to_json(dataclasses.replace(model, repro=left))
    assert written is not None
    assert repro_from_json(written) == dataclasses.replace(left, folder=None)
    kept = dataclasses.replace(model.repro, step=dataclasses.replace(STEP, rows=(5,)))
    [_, section] = repro_section(dataclasses.replace(model, repro=kept))
    assert "(prompt row 5, the failing row of its batch of 4 (cut to fit the folder))" in section
