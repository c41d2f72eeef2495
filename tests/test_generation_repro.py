"""An encoder-decoder generator's failing step localised, with its repro folder (issue 23 §3-4):
a tiny BART (seeded random weights, built from a config, offline) through the real CLI with a
tolerance below float32's noise, so step 0 (the decoder's start token: one token, past 0) fails.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from test_generation import check_step_folder, errors
from test_generation_encoder_decoder import checked


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
    assert first["module"].startswith("model.model.model.decoder.")
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
