"""`dtype` and `compare-mask` as the configuration reads them (messages naming the key and the
fix), the tolerance defaults each dtype brings, and the mask laid along an output's axes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from onnx_parity.settings import at_dtype
from onnx_parity.settings.keys import checks
from onnx_parity.settings.loading import load_settings
from onnx_parity.settings.values import ConfigError
from onnx_parity.verification.compare import compare_masked
from onnx_parity.verification.outputs import output_masks

MODEL = """
[[model]]
name = "llama"
factory = "models.llama:build"
inputs = { input_ids = "samples/ids.npy", attention_mask = "samples/mask.npy" }
"""
AXES = ('dynamic-axes = { input_ids = { 0 = "batch", 1 = "sequence" }, '
        'attention_mask = { 0 = "batch", 1 = "sequence" }, '
        'logits = { 0 = "batch", 1 = "sequence" }, '
        '"present.0.key" = { 0 = "batch", 2 = "sequence" } }')


def load(repo: Path, top: str = "", *lines: str):
    (repo / "onnx-parity.toml").write_text(top + MODEL + "\n".join(lines) + "\n",
                                           encoding="utf-8")
    return load_settings(repo).models[0]


def failure(repo: Path, top: str = "", *lines: str) -> str:
    with pytest.raises(ConfigError) as raised:
        load(repo, top, *lines)
    return str(raised.value)


def test_dtype_is_read_at_the_top_level_and_per_model(tmp_path: Path) -> None:
    assert load(tmp_path).dtype is None
    assert load(tmp_path, 'dtype = "bfloat16"\n').dtype == "bfloat16"
    assert load(tmp_path, 'dtype = "bfloat16"\n', 'dtype = "float32"').dtype == "float32"


def test_an_unknown_dtype_names_the_key_and_the_choices(tmp_path: Path) -> None:
    message = failure(tmp_path, "", 'dtype = "bf16"')
    assert 'model "llama": key "dtype": unknown dtype "bf16"' in message
    assert '"float32", "float16", "bfloat16"' in message


@pytest.mark.parametrize(("top", "model"), [
    ('dtype = "float16"\n', 'variants = ["fp16"]'),
    ('variants = ["int8-dynamic"]\n', 'dtype = "bfloat16"'),
])
def test_variants_with_another_dtype_name_both_keys(tmp_path: Path, top: str,
                                                    model: str) -> None:
    message = failure(tmp_path, top, model)
    assert 'model "llama": keys "dtype" and "variants"' in message
    assert 'Set dtype = "float32"' in message


def test_variants_with_a_float32_dtype_are_fine(tmp_path: Path) -> None:
    spec = load(tmp_path, 'variants = ["fp16"]\n', 'dtype = "float32"')
    assert (spec.dtype, spec.variants) == ("float32", ("fp16",))


def test_tolerances_left_out_follow_the_dtype_and_set_ones_stay(tmp_path: Path) -> None:
    plain = load(tmp_path)
    assert (at_dtype(plain, "bfloat16").atol, at_dtype(plain, "bfloat16").rtol) == \
        checks.DTYPE_TOLERANCES["bfloat16"]
    assert (at_dtype(plain, "float16").atol, at_dtype(plain, "float16").rtol) == \
        checks.DTYPE_TOLERANCES["float16"]
    assert at_dtype(plain, "float32") == plain
    top_atol = load(tmp_path, "atol = 1e-4\n")
    assert (at_dtype(top_atol, "float16").atol, at_dtype(top_atol, "float16").rtol) == \
        (1e-4, checks.DTYPE_TOLERANCES["float16"][1])
    model_rtol = load(tmp_path, "", "rtol = 0.5")
    assert at_dtype(model_rtol, "bfloat16").rtol == 0.5


def test_compare_mask_is_read_when_both_name_the_masks_axes(tmp_path: Path) -> None:
    spec = load(tmp_path, "", AXES, 'compare-mask = { logits = "attention_mask", '
                '"present.0.key" = "attention_mask" }')
    assert spec.compare_mask == {"logits": "attention_mask", "present.0.key": "attention_mask"}


@pytest.mark.parametrize(("lines", "expected"), [
    (('compare-mask = "attention_mask"',),
     'key "compare-mask": expected a table of output name -> mask input name'),
    ((AXES, 'compare-mask = { logits = "attention_msk" }'),
     'key "compare-mask.logits": "attention_msk" is not an input of this model; did you mean '
     '"attention_mask"?'),
    (('outputs = ["logits", "present.0.key"]', AXES,
      'compare-mask = { logit = "attention_mask" }'),
     '"logit" is not an output of this model; did you mean "logits"?'),
    (('compare-mask = { logits = "attention_mask" }',),
     'the mask "attention_mask" has no axes in `dynamic-axes`'),
    (('dynamic-axes = { attention_mask = { 0 = "batch", 1 = "sequence" }, '
      'logits = { 0 = "batch", 1 = "seq" } }', 'compare-mask = { logits = "attention_mask" }'),
     'the output "logits" has no axis named "sequence" in `dynamic-axes` (it names "batch", '
     '"seq")'),
    (('dynamic-axes = { attention_mask = { 0 = "batch", 1 = "sequence" }, '
      'logits = { 0 = "batch", 1 = "sequence", 2 = "sequence" } }',
      'compare-mask = { logits = "attention_mask" }'),
     '"sequence" names more than one axis'),
])
def test_compare_mask_errors_name_the_key_and_the_fix(tmp_path: Path, lines: tuple[str, ...],
                                                      expected: str) -> None:
    message = failure(tmp_path, "", *lines)
    assert expected in message
    assert message.startswith("onnx-parity.toml: model \"llama\": key \"compare-mask")


def test_a_mask_lies_along_the_axes_of_the_same_name(tmp_path: Path) -> None:
    spec = load(tmp_path, "", AXES, 'compare-mask = { logits = "attention_mask", '
                '"present.0.key" = "attention_mask" }')
    mask = np.array([[0, 1, 1], [1, 1, 1]])
    masks = output_masks(spec, {"attention_mask": mask, "input_ids": mask})
    logits = np.zeros((2, 3, 5), np.float32)
    wrong = logits.copy()
    wrong[0, 0] = 9.0  # a padded position
    row = compare_masked("logits", 2, (logits, wrong), (1e-5, 1e-4), masks["logits"])
    assert (row.passed, row.left_out, row.left_out_by, row.total) == (True, 5, "attention_mask",
                                                                       25)
    assert row.torch_shape == (2, 3, 5)
    key = np.zeros((2, 4, 3, 8), np.float32)  # (batch, heads, sequence, dim)
    bad = key.copy()
    bad[1, :, 0] = 1.0  # a position the mask keeps
    row = compare_masked("present.0.key", 2, (key, bad), (1e-5, 1e-4), masks["present.0.key"])
    assert (row.passed, row.left_out, row.mismatched) == (False, 4 * 8, 4 * 8)


def test_a_mask_that_does_not_fit_the_output_masks_nothing(tmp_path: Path) -> None:
    spec = load(tmp_path, "", AXES, 'compare-mask = { logits = "attention_mask" }')
    [mask] = output_masks(spec, {"attention_mask": np.ones((2, 4), bool)}).values()
    values = np.zeros((2, 3, 5))
    row = compare_masked("logits", 2, (values, values), (0.0, 0.0), mask)
    assert (row.left_out, row.left_out_by, row.total) == (0, None, 30)


def test_dtype_casts_float_samples_and_keeps_the_others() -> None:
    from onnx_parity.models.dtypes import BFLOAT16
    from onnx_parity.models.samples.loading import SampleSet, cast_samples

    x = np.array([[-2, -1, -0.5], [0.5, 1, 2]], np.float32)
    ids = np.arange(6).reshape(2, 3)
    samples = SampleSet({"x": x, "ids": ids}, (x, ids), (), {}, ())
    assert cast_samples(samples, None) is samples
    cast = cast_samples(samples, "bfloat16")
    assert (cast.named["x"].dtype, cast.named["ids"].dtype) == (BFLOAT16, ids.dtype)
    assert [array.dtype for array in cast.positional] == [BFLOAT16, ids.dtype]
    assert np.array_equal(cast.named["x"].astype(np.float32), x)  # these values fit in 8 bits
    assert cast_samples(samples, "float16").named["x"].dtype == np.float16
