"""Models as libraries call them: constant keyword arguments (`forward-kwargs`), dotted inputs
bound into a dict or a transformers cache, and outputs of any structure, named (issue 21).

Each end-to-end test writes a fresh repository (a tiny diffusers UNet, a tiny transformers
Llama, a hand-written model taking a dict; seeded random weights, offline) and runs the real CLI.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np
import pytest

from fixture_repo.harness import run_cli, write_model_repo

MODELS = '''
import torch


def unet():
    from diffusers import UNet2DConditionModel

    torch.manual_seed(0)
    return UNet2DConditionModel(
        sample_size=8, in_channels=4, out_channels=4, layers_per_block=1,
        block_out_channels=(32, 64), down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), cross_attention_dim=32,
        attention_head_dim=8, norm_num_groups=8).eval()


def llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=64)
    return LlamaForCausalLM(config).eval()


class Conditioned(torch.nn.Module):
    """Takes its conditioning as a dict, as SDXL's UNet takes `added_cond_kwargs`."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.proj = torch.nn.Linear(6, 6)
        self.text = torch.nn.Linear(4, 6)

    def forward(self, x, added_cond_kwargs, scale=1.0):
        bias = self.text(added_cond_kwargs["text_embeds"]) * added_cond_kwargs["time_ids"]
        return {"sample": self.proj(x) * scale + bias, "bias": bias}
'''


def write_repo(root: Path, model: str, samples: dict[str, np.ndarray]) -> Path:
    """A repository holding models/library.py, the samples and `model` (a [[model]] body)."""
    inputs = ", ".join(f'"{name}" = "samples/{name}.npy"' for name in samples)
    return write_model_repo(
        root, ("library", MODELS), samples,
        f"batch-sizes = [1, 2]\n[[model]]\nname = \"m\"\ninputs = {{ {inputs} }}\n"
        f"{textwrap.dedent(model)}")


def checked(tmp_path: Path, model: str, samples: dict[str, np.ndarray]) -> tuple[dict, Path]:
    """The model checked through the CLI: its report.json entry and the exported ONNX file."""
    repo = write_repo(tmp_path, model, samples)
    run = run_cli("check", cwd=repo, out=tmp_path / "out")
    [result] = run.report()["models"]
    assert run.code in (0, 1), run.stdout + run.stderr
    return result, tmp_path / "out" / "m.onnx"


def failures(result: dict) -> list[tuple[str, str]]:
    return [(f["code"], f["message"]) for f in result["findings"] if f["severity"] == "error"]


def onnx_names(path: Path) -> tuple[list[str], list[str]]:
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    return [value.name for value in graph.input], [value.name for value in graph.output]


def rng() -> np.random.Generator:
    return np.random.default_rng(0)


def unet_samples() -> dict[str, np.ndarray]:
    r = rng()
    return {"sample": r.standard_normal((2, 4, 8, 8)).astype(np.float32),
            "timestep": np.array([10, 500], dtype=np.int64),
            "encoder_hidden_states": r.standard_normal((2, 5, 32)).astype(np.float32)}


UNET = '''factory = "models.library:unet"
dynamic-axes = { sample = { 0 = "batch" }, timestep = { 0 = "batch" }, encoder_hidden_states = { 0 = "batch" } }
'''


@pytest.mark.slow
def test_a_diffusers_unet_returning_its_output_object_passes_with_its_output_named_sample(
        tmp_path: Path) -> None:
    result, onnx_file = checked(tmp_path, UNET, unet_samples())
    assert result["passed"], failures(result)
    assert {c["output"] for c in result["comparisons"]} == {"sample"}
    assert onnx_names(onnx_file) == (["sample", "timestep", "encoder_hidden_states"], ["out_sample"])


@pytest.mark.slow
def test_a_diffusers_unet_called_with_return_dict_false_passes(tmp_path: Path) -> None:
    result, onnx_file = checked(tmp_path, UNET + "forward-kwargs = { return_dict = false }\n",
                                unet_samples())
    assert result["passed"], failures(result)
    # a tuple keeps today's names: the report's by place, the graph's the exporter's own
    assert {c["output"] for c in result["comparisons"]} == {"0"}
    inputs, _ = onnx_names(onnx_file)
    assert inputs == ["sample", "timestep", "encoder_hidden_states"]  # the constant is no input
    parity = json.loads((tmp_path / "out" / "m.parity.json").read_text(encoding="utf-8"))
    assert parity["forward_kwargs"] == {"return_dict": False}


LAYERS, KV_HEADS, HEAD_DIM = 2, 2, 8  # the tiny Llama's: 32 wide, 4 heads, 2 of them for keys
PRESENTS = [f"present.{layer}.{part}" for layer in range(LAYERS) for part in ("key", "value")]


@pytest.mark.slow
def test_a_causal_lm_with_use_cache_is_exported_with_its_cache_flat_and_named(
        tmp_path: Path) -> None:
    ids = rng().integers(0, 64, (4, 6)).astype(np.int64)
    model = '''factory = "models.library:llama"
    forward-kwargs = { use_cache = true }
    dynamic-axes = { input_ids = { 0 = "batch", 1 = "sequence" }, attention_mask = { 0 = "batch", 1 = "sequence" } }
    '''
    result, onnx_file = checked(tmp_path, model, {"input_ids": ids,
                                                  "attention_mask": np.ones_like(ids)})
    assert result["passed"], failures(result)
    assert onnx_names(onnx_file) == (["input_ids", "attention_mask"], ["logits", *PRESENTS])
    assert {c["output"] for c in result["comparisons"]} == {"logits", *PRESENTS}
    assert result["dimension_sizes"]["sequence"][0] == 6  # and the sweep's other lengths passed
    assert len(result["dimension_sizes"]["sequence"]) > 1


def decoding_step(past: int) -> dict[str, np.ndarray]:
    """One decoding step in optimum's layout: a new token, the mask over past + 1 positions,
    and each layer's past keys and values (batch, kv_heads, past, head_dim)."""
    r = rng()
    step = {"input_ids": r.integers(0, 64, (4, 1)).astype(np.int64),
            "attention_mask": np.ones((4, past + 1), dtype=np.int64)}
    for layer in range(LAYERS):
        for part in ("key", "value"):
            step[f"past_key_values.{layer}.{part}"] = \
                r.standard_normal((4, KV_HEADS, past, HEAD_DIM)).astype(np.float32)
    return step


def step_axes(mask: str) -> str:
    """dynamic-axes of the decoding step: the cache's length is `past`, the mask's `mask`."""
    pasts = ", ".join(f'"{name}" = {{ 0 = "batch", 2 = "past" }}' for name in PASTS)
    presents = ", ".join(f'"{name}" = {{ 0 = "batch", 2 = "past + 1" }}' for name in PRESENTS)
    return (f'dynamic-axes = {{ input_ids = {{ 0 = "batch" }}, attention_mask = {{ 0 = "batch", '
            f'1 = "{mask}" }}, {pasts}, logits = {{ 0 = "batch" }}, {presents} }}')


PASTS = [f"past_key_values.{layer}.{part}" for layer in range(LAYERS) for part in ("key", "value")]


@pytest.mark.slow
def test_a_llama_decoding_step_with_its_mask_at_past_plus_one_passes_at_every_past_length(
        tmp_path: Path) -> None:
    """The decoding step in optimum's layout (issue 21 §1): the mask is `past + 1` long, so the
    sweep runs the mask with the cache at every past length, as a deployment feeds them."""
    model = ('factory = "models.library:llama"\nforward-kwargs = { use_cache = true }\n'
             + step_axes("past + 1") + "\n")
    result, onnx_file = checked(tmp_path, model, decoding_step(past=6))
    assert result["passed"], failures(result)
    assert result["lengths"]["past"]["run"][:4] == [6, 3, 5, 8]
    assert result["lengths"]["past"]["skipped"] == {}
    assert onnx_names(onnx_file) == (["input_ids", "attention_mask", *PASTS],
                                     ["logits", *PRESENTS])
    ran = {(c["input_shapes"]["past_key_values.0.key"][2], c["input_shapes"]["attention_mask"][1])
           for c in result["comparisons"]}
    assert ran == {(past, past + 1) for past in result["lengths"]["past"]["run"]}
    rows = {c["output"]: c for c in result["comparisons"]
            if c["batch_size"] == 2 and c["dimensions"] == {"past": 3}}
    assert set(rows) == {"logits", *PRESENTS}
    assert rows["present.0.key"]["torch_shape"] == [2, KV_HEADS, 4, HEAD_DIM]  # past + 1
    assert rows["present.0.key"]["onnx_shape"] == [2, KV_HEADS, 4, HEAD_DIM]
    assert result["linked_axes"]["past"][0] == "attention_mask axis 1 = past + 1"
    # the guards of the wrapper's inputs are read in the configured names, not its parameters'
    said = " ".join(f["message"] for f in result["findings"])
    assert "past_key_values_0_key" not in said


@pytest.mark.slow
def test_the_same_step_with_the_mask_under_a_name_of_its_own_is_a_false_alarm(
        tmp_path: Path) -> None:
    """Two names vary one at a time: a cache longer than its mask, which PyTorch pads and the
    exported graph indexes out of range (GatherND): what `past + 1` is for."""
    model = ('factory = "models.library:llama"\nforward-kwargs = { use_cache = true }\n'
             + step_axes("total") + "\n")
    result, _ = checked(tmp_path, model, decoding_step(past=6))
    assert not result["passed"]
    errors = failures(result)
    assert {code for code, _ in errors} == {"shape-assumption"}, errors
    assert any("GatherND" in message for _, message in errors), errors


@pytest.mark.slow
def test_dotted_inputs_bind_into_a_dict_argument_and_a_dict_output_is_named(
        tmp_path: Path) -> None:
    r = rng()
    samples = {"x": r.standard_normal((4, 6)).astype(np.float32),
               "added_cond_kwargs.text_embeds": r.standard_normal((4, 4)).astype(np.float32),
               "added_cond_kwargs.time_ids": r.standard_normal((4, 6)).astype(np.float32)}
    model = '''factory = "models.library:Conditioned"
    forward-kwargs = { scale = 0.5 }
    exporter = ["torchscript"]
    dynamic-axes = { x = { 0 = "batch" }, "added_cond_kwargs.text_embeds" = { 0 = "batch" }, "added_cond_kwargs.time_ids" = { 0 = "batch" } }
    '''
    result, onnx_file = checked(tmp_path, model, samples)
    assert result["passed"], failures(result)
    assert result["exporter"] == "torchscript"  # the constant bound, not a graph input
    assert onnx_names(onnx_file) == (list(samples), ["sample", "bias"])
    assert result["forward_kwargs"] == {"scale": 0.5}


@pytest.mark.slow
def test_a_dotted_input_whose_first_part_forward_does_not_take_is_a_load_error(
        tmp_path: Path) -> None:
    r = rng()
    samples = {"x": r.standard_normal((4, 6)).astype(np.float32),
               "conditions.text_embeds": r.standard_normal((4, 4)).astype(np.float32)}
    result, _ = checked(tmp_path, 'factory = "models.library:Conditioned"\n', samples)
    [(code, message)] = failures(result)
    assert code == "load-error"
    assert '"conditions.text_embeds"' in message
    assert '"conditions" is none of its' in message


# ---- forward-kwargs in the configuration: exit 2 naming the key and the fix ----

CONFIG = '[[model]]\nname = "m"\nfactory = "models.library:llama"\n' \
         'inputs = { input_ids = "samples/ids.npy", "past_key_values.0.key" = "samples/k.npy" }\n'


def config_error(tmp_path: Path, line: str) -> str:
    from onnx_parity.settings.loading import load_settings
    from onnx_parity.settings.values import ConfigError

    (tmp_path / "onnx-parity.toml").write_text(CONFIG + line + "\n", encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        load_settings(tmp_path)
    return str(raised.value)


def test_forward_kwargs_are_read_as_typed_constants(tmp_path: Path) -> None:
    from onnx_parity.settings.loading import load_settings

    (tmp_path / "onnx-parity.toml").write_text(
        CONFIG + 'forward-kwargs = { use_cache = true, logits_to_keep = 1, attn = "eager", '
        "scale = 0.5 }\n", encoding="utf-8")
    [spec] = load_settings(tmp_path).models
    assert spec.forward_kwargs == {"use_cache": True, "logits_to_keep": 1, "attn": "eager",
                                   "scale": 0.5}


@pytest.mark.parametrize(("line", "said"), [
    ("forward-kwargs = { input_ids = 1 }", '"input_ids" is also in `inputs`'),
    ("forward-kwargs = { past_key_values = false }", '"past_key_values" is also in `inputs`'),
    ("forward-kwargs = { use_cache = [true] }", "expected a boolean, a number or a string"),
    ("forward-kwargs = { use_cache = { a = 1 } }", "expected a boolean, a number or a string"),
    ("forward-kwargs = { scale = nan }", "is not a finite number"),
    ('forward-kwargs = { "use-cache" = true }', "is not a Python identifier"),
    ("forward-kwargs = {}", "expected a table of forward's keyword"),
    ("forward-kwargs = true", "expected a table of forward's keyword"),
])
def test_a_bad_forward_kwargs_value_names_the_key_and_the_fix(tmp_path: Path, line: str,
                                                              said: str) -> None:
    message = config_error(tmp_path, line)
    assert "onnx-parity.toml" in message
    assert "forward-kwargs" in message
    assert said in message


def test_a_forward_kwarg_also_in_inputs_ends_the_cli_with_exit_2(tmp_path: Path) -> None:
    repo = write_repo(tmp_path, 'factory = "models.library:Conditioned"\n'
                      "forward-kwargs = { x = 1 }\n", {"x": np.zeros((2, 6), np.float32)})
    run = run_cli("check", cwd=repo, out=tmp_path / "out")
    assert run.code == 2, run.stdout + run.stderr
    assert '"x" is also in `inputs`' in run.stderr


# ---- one flattening of any output, and dotted names checked ----

def test_every_output_structure_flattens_to_named_leaves_without_a_crash() -> None:
    import collections
    import dataclasses

    import torch
    from diffusers.models.unets.unet_2d_condition import UNet2DConditionOutput
    from transformers import DynamicCache
    from transformers.modeling_outputs import CausalLMOutputWithPast

    from onnx_parity.models.output_tree import flatten

    t = torch.zeros(1)
    pair = collections.namedtuple("pair", "low high")

    @dataclasses.dataclass
    class Out:
        a: torch.Tensor
        rest: tuple

    c = torch.zeros(1, 1, 1, 1)  # (batch, heads, length, head dim)
    cache = DynamicCache(ddp_cache_data=[(c, c + 1), (c + 2, c + 3)])
    cases = {
        "tensor": (t, [None], False),
        "tuple": ((t, (t, None, 3)), ["0", "1.0", "1.2"], False),
        "dict": ({"x": t, "y": [t]}, ["x", "y.0"], True),
        "namedtuple": (pair(t, t), ["low", "high"], True),
        "dataclass": (Out(t, (t,)), ["a", "rest.0"], True),
        "BaseOutput": (UNet2DConditionOutput(sample=t), ["sample"], True),
        "ModelOutput": (CausalLMOutputWithPast(logits=t, past_key_values=cache),
                        ["logits", *PRESENTS], True),
        "tuple with a cache": ((t, cache), ["0", *PRESENTS], True),
        "unknown object": ((t, object()), ["0"], False),
    }
    for case, (value, names, named) in cases.items():
        flat = flatten(value)
        assert (list(flat.names()), flat.named) == (names, named), case
    assert [float(leaf) for leaf in flatten(cache).leaves] == [0, 1, 2, 3]  # layer order


@pytest.mark.parametrize(("names", "said"), [
    (["x", "cond..a"], 'input name(s) "cond..a" have an empty part'),
    (["x", "cond", "cond.a"], 'gives "cond" both whole and by dotted names'),
    (["cache.0.key", "cache.0.value", "cache.extra"], '"cache" mixes cache inputs'),
    (["cache.0.key", "cache.0.value", "cache.1.key"], 'lacks "cache.1.value"'),
    (["cache.1.key", "cache.1.value"], 'lacks "cache.0.key", "cache.0.value"'),
    (["cond.a", "cond.a.b"], '"cond.a" is a tensor and holds "cond.a.b" too'),
])
def test_malformed_dotted_inputs_are_load_errors_naming_them(names: list[str],
                                                             said: str) -> None:
    from onnx_parity.models import LoadError
    from onnx_parity.models.call_arguments import check_dotted

    with pytest.raises(LoadError) as raised:
        check_dotted(names, "m")
    assert said in str(raised.value)


def test_dotted_members_build_nested_dicts_and_a_dynamic_cache() -> None:
    import torch
    from transformers import DynamicCache

    from onnx_parity.models.call_arguments import build_argument
    from onnx_parity.models.output_tree import flatten

    t = torch.ones(1, 2, 3, 4)
    assert build_argument({"a": t, "b.c": t}) == {"a": t, "b": {"c": t}}
    cache = build_argument({"0.key": t, "0.value": t * 2, "1.key": t * 3, "1.value": t * 4})
    assert isinstance(cache, DynamicCache)
    assert cache.get_seq_length() == 3
    assert [float(leaf[0, 0, 0, 0]) for leaf in flatten(cache).leaves] == [1, 2, 3, 4]


@pytest.mark.slow
def test_a_failing_model_exported_through_the_wrapper_is_localised(tmp_path: Path) -> None:
    r = rng()
    samples = {"x": r.standard_normal((4, 6)).astype(np.float32),
               "added_cond_kwargs.text_embeds": r.standard_normal((4, 4)).astype(np.float32),
               "added_cond_kwargs.time_ids": r.standard_normal((4, 6)).astype(np.float32)}
    model = '''factory = "models.library:Conditioned"
    atol = 0.0
    rtol = 0.0
    dynamic-axes = { x = { 0 = "batch" }, "added_cond_kwargs.text_embeds" = { 0 = "batch" }, "added_cond_kwargs.time_ids" = { 0 = "batch" } }
    '''
    result, _ = checked(tmp_path, model, samples)
    assert "crash" not in [code for code, _ in failures(result)]
    found = [f for f in result["findings"] if f["code"] == "parity-mismatch"]
    assert found  # atol 0: float rounding differs somewhere
    localised = [f["details"]["first_divergence"] for f in found
                 if "first_divergence" in f["details"]]
    assert localised  # the wrapper's program ran with the flat call, at the user's line
    assert localised[0]["file"] == "models/library.py"


@pytest.mark.parametrize("text", [
    "Constant tensor lifted_tensor_0 is not in the constants dictionary",
    "Unsupported output type: <class 'transformers.cache_utils.DynamicCache'>",
])
def test_an_export_error_on_a_cache_object_says_how_to_flatten_it(tmp_path: Path,
                                                                    text: str) -> None:
    from torch._export.verifier import SpecViolationError

    from onnx_parity.export.failures import AttemptLog, classify
    from onnx_parity.export.review import failure_finding

    try:
        raise RuntimeError("Failed to convert the exported program") from \
            SpecViolationError(text)
    except RuntimeError as error:
        failure = classify("dynamo", error, AttemptLog())
    finding = failure_finding(failure, tmp_path, (), fallback_used=False)
    assert finding.code == "export-error"
    assert "past_key_values.N.key" in finding.suggested_fix
    assert "present.N.key" in finding.suggested_fix
    assert "other exporter" not in finding.suggested_fix


def test_an_encoder_decoder_cache_is_named_as_optimum_names_it() -> None:
    import torch
    from transformers import DynamicCache, EncoderDecoderCache

    from onnx_parity.models.output_tree import flatten

    c = torch.zeros(1, 1, 1, 1)
    cache = EncoderDecoderCache(DynamicCache(ddp_cache_data=[(c, c)]),
                                DynamicCache(ddp_cache_data=[(c, c)]))
    assert flatten(cache).names() == ("present.0.decoder.key", "present.0.decoder.value",
                                      "present.0.encoder.key", "present.0.encoder.value")


def test_the_wrappers_parameters_are_distinct_identifiers() -> None:
    from onnx_parity.models.flat_call import identifiers

    assert identifiers(("input_ids", "past_key_values.0.key", "past_key_values_0_key", "0",
                        "self", "in", "a-b")) == (
        "input_ids", "past_key_values_0_key", "past_key_values_0_key_2", "_0", "_self", "_in",
        "a_b")


def test_a_cache_with_other_layers_than_the_models_config_is_a_load_error(tmp_path: Path) -> None:
    import importlib.util

    from onnx_parity.models import LoadError, bind_inputs
    from onnx_parity.settings.loading import load_settings

    step = decoding_step(past=3)
    step.pop("past_key_values.1.key")
    step.pop("past_key_values.1.value")  # one layer given, the model has two
    repo = write_repo(tmp_path, 'factory = "models.library:llama"\n', step)
    [spec] = load_settings(repo).models
    found = importlib.util.spec_from_file_location("library", repo / "models" / "library.py")
    assert found is not None
    assert found.loader is not None
    library = importlib.util.module_from_spec(found)
    found.loader.exec_module(library)
    with pytest.raises(LoadError) as raised:
        bind_inputs(library.llama(), spec, dict(step), ())
    assert 'the cache "past_key_values" gives 1 layer(s)' in str(raised.value)
    assert "has 2 (num_hidden_layers)" in str(raised.value)
