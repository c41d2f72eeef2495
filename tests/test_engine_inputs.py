"""Inputs as users give them: integer ids and masks, several inputs, bundles, any file order."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

TWO_INPUTS = """batch-sizes = [1, 3]
[[model]]
name = "tokens"
factory = "models.tiny:TwoInputs"
inputs = {inputs}
dynamic-axes = {{ ids = {{ 0 = "batch", 1 = "sequence" }}, mask = {{ 0 = "batch", 1 = "sequence" }} }}
"""


def test_integer_ids_and_mask_matched_by_name_in_any_order(check_model):
    result = check_model(TWO_INPUTS.format(
        inputs='{ mask = "samples/mask.npy", ids = "samples/ids.npy" }'))
    assert result.passed, result.findings
    assert {c.batch_size for c in result.comparisons} == {1, 3}
    assert result.max_abs_diff < 1e-5


def test_npz_bundle_holds_every_input_by_name(check_model, model_repo):
    samples = model_repo / "samples"
    np.savez(samples / "tokens.npz", ids=np.load(samples / "ids.npy"),
             mask=np.load(samples / "mask.npy"))
    result = check_model(TWO_INPUTS.format(inputs='"samples/tokens.npz"'))
    assert result.passed, result.findings
    assert set(result.sample_sha256) == {"samples/tokens.npz"}


def test_pt_bundle_of_tensors_loads_with_weights_only(check_model, model_repo):
    samples = model_repo / "samples"
    torch.save({"ids": torch.from_numpy(np.load(samples / "ids.npy")),
                "mask": torch.from_numpy(np.load(samples / "mask.npy"))}, samples / "tokens.pt")
    result = check_model(TWO_INPUTS.format(inputs='"samples/tokens.pt"'))
    assert result.passed, result.findings


def test_nested_outputs_with_none_are_flattened_in_exporter_order(check_model):
    config = ('batch-sizes = [1, 3]\n[[model]]\nname = "nested"\nfactory = "models.tiny:Nested"\n'
              'inputs = { x = "samples/x.npy" }\ndynamic-axes = { x = { 0 = "batch" } }\n')
    result = check_model(config)
    assert result.passed, result.findings
    # named by their place in the returned dict; the None is dropped by both exporters
    assert [c.output for c in result.comparisons if c.batch_size == 1] == [
        "double", "rest.0", "rest.2.0"]


@pytest.mark.slow
def test_ascii_console_does_not_break_the_exporter(tmp_path):
    example = Path(__file__).resolve().parent.parent / "examples" / "seed-failures"
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    done = subprocess.run(
        [sys.executable, "-m", "onnx_parity", "check", "--repo", str(example), "--out",
         str(tmp_path / "out"), "--model", "spectrum", "--jobs", "1"],
        env=env, capture_output=True, text=True, encoding="ascii", errors="replace", timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "UnicodeEncodeError" not in done.stdout + done.stderr
    assert "PASS  spectrum" in done.stdout
    log = (tmp_path / "out" / "spectrum.log").read_text(encoding="utf-8")
    assert "export with dynamo: succeeded" in log
    assert "\x1b[" not in log


def test_attention_model_with_dynamic_batch_and_sequence_passes(check_model):
    config = ('batch-sizes = [1, 3]\n[[model]]\nname = "encoder"\n'
              'factory = "models.tiny:TinyEncoder"\ninputs = { ids = "samples/ids.npy" }\n'
              'dynamic-axes = { ids = { 0 = "batch", 1 = "sequence" } }\n')
    result = check_model(config)
    assert result.passed, [f.message for f in result.findings]
    assert result.exporter == "dynamo"
    assert {c.batch_size for c in result.comparisons} == {1, 3}
    assert result.max_abs_diff < 1e-5
