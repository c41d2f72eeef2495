"""Where the numbers diverge: the first node outside the tolerance whose inputs are inside,
named at the user's line; tiny real models through real torch and onnxruntime, and the rule
itself on hand-made graphs."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixture_repo.harness import line_of
from onnx_parity.verification.localisation.divergence import Verdict, feeders, first_divergence
from onnx_parity.verification.onnx_values import Graph, GraphNode, module_and_op, scope_module

DRIFT = Path(__file__).parent / "fixture_repo" / "models" / "drift.py"


def config(name: str, factory: str, inputs: str, extra: str = "") -> str:
    return (f'batch-sizes = [1, 3]\n[[model]]\nname = "{name}"\nfactory = "models.drift:{factory}"\n'
            f'inputs = {inputs}\ndynamic-axes = {{ x = {{ 0 = "batch" }} }}\n{extra}')


def parity(result):
    found = [f for f in result.findings if f.code == "parity-mismatch"]
    assert len(found) == 1, [(f.code, f.message) for f in result.findings]
    return found[0]


@pytest.mark.slow
def test_fft_drift_is_localised_to_the_rfft_line_not_the_linear_after_it(check_model):
    result = check_model(config("spectral", "SpectralHead", '{ x = "samples/series.npy" }',
                                "atol = 5e-7\nrtol = 0.0\n"))
    finding = parity(result)
    first = finding.details["first_divergence"]
    rfft = line_of(DRIFT, "torch.fft.rfft(features).abs()")
    assert (first["file"], first["line"], first["op"]) == ("models/drift.py", rfft,
                                                          "aten._fft_r2c.default")
    assert (finding.file, finding.line) == ("models/drift.py", rfft)  # the annotation lands here
    assert first["source"] == "spectrum = torch.fft.rfft(features).abs()"
    assert first["max_abs_diff"] > 5e-7
    assert first["inputs_max_abs_diff"] <= 5e-7
    nodes = {node.op: node for node in result.divergence.nodes}
    conv, linear = nodes["aten.conv1d.default"], nodes["aten.linear.default"]
    assert conv.inside
    assert conv.max_abs_diff < 5e-7 < first["max_abs_diff"]
    assert conv.module == "conv"
    assert conv.library_frame.startswith("site-packages/torch/nn/")
    assert not linear.inside
    assert not linear.first
    assert linear.module == "head"
    assert [node.first for node in result.divergence.nodes].count(True) == 1
    assert result.divergence.optimization == "disabled"
    assert f"Diverges first at `models/drift.py:{rfft}` (`aten._fft_r2c`)" in finding.message
    assert "where its inputs differ by at most" in finding.message
    assert f"models/drift.py:{rfft}" in finding.suggested_fix
    assert [s.step for s in result.steps][-1] == "localise"


def test_drift_introduced_in_the_third_block_is_localised_there(check_model):
    result = check_model(config("third", "ThirdBlockDrift", '{ x = "samples/x.npy" }',
                                "atol = 0.0\nrtol = 0.0\n"))
    first = parity(result).details["first_divergence"]
    assert first["module"] == "blocks.2"
    assert first["op"] == "aten.silu.default"
    assert first["line"] == line_of(DRIFT, "torch.nn.functional.silu(x) * 1000.0")
    modules = [node.module for node in result.divergence.nodes]
    assert modules.index("blocks.0") < modules.index("blocks.2") < modules.index("blocks.3")
    before = [n for n in result.divergence.nodes if n.module in ("blocks.0", "blocks.1")]
    assert before
    assert all(n.inside and n.max_abs_diff == 0 for n in before)


def test_a_torchscript_model_is_localised_to_its_module(check_model):
    result = check_model(config("third-ts", "ThirdBlockDrift", '{ x = "samples/x.npy" }',
                                'atol = 0.0\nrtol = 0.0\nexporter = "torchscript"\n'))
    assert result.exporter == "torchscript"
    finding = parity(result)
    first = finding.details["first_divergence"]
    assert (first["module"], first["op"]) == ("blocks.2", "Smooth")
    assert (finding.file, finding.line) == ("models/drift.py", line_of(DRIFT, "class Smooth") + 1)
    assert "in `blocks.2`" in finding.message


def test_torchscript_without_module_scopes_says_why_it_is_not_localised(check_model):
    result = check_model(config("bare-ts", "FunctionalDrift", '{ x = "samples/x.npy" }',
                                'atol = 0.0\nrtol = 0.0\nexporter = "torchscript"\n'))
    finding = parity(result)
    assert "first_divergence" not in finding.details
    assert finding.file is None
    assert "Not localised" in finding.message
    # dynamo records each node's line, but it was not tried for this model: not recommended.
    assert "the dynamo exporter records them, but `exporter` did not list it" in finding.message
    assert "needs the dynamo exporter" not in finding.message


def test_a_passing_model_pays_nothing(check_model):
    result = check_model(config("fine", "ThirdBlockDrift", '{ x = "samples/x.npy" }'))
    assert result.passed
    assert result.divergence is None
    assert "localise" not in [s.step for s in result.steps]


def _graph(*nodes: tuple[str, tuple[str, ...], str]) -> Graph:
    return Graph(tuple(GraphNode(out, "Op", inputs, (out,), None, None) for out, inputs, _ in nodes),
                 inputs=("x",), outputs=(nodes[-1][0],), constants=frozenset({"w"}))


def test_the_first_outside_value_with_inside_inputs_introduces_the_drift() -> None:
    # x -> a -> (folded) -> c -> d, with b an uncompared value between a and c
    graph = _graph(("a", ("x", "w"), ""), ("b", ("a",), ""), ("c", ("b",), ""), ("d", ("c", "a"), ""))
    compared = ["a", "c", "d"]
    sources = feeders(graph, compared)
    assert sources == {"a": frozenset(), "c": frozenset({"a"}), "d": frozenset({"c", "a"})}
    verdicts = {"a": Verdict(True, 1e-9), "c": Verdict(False, 1e-3), "d": Verdict(False, 2e-3)}
    found = first_divergence(compared, verdicts, sources)
    assert found is not None
    assert (found.value, found.inputs_max_abs_diff) == ("c", 1e-9)
    # the drift starts at the very first value: its inputs are the graph's, exact
    verdicts["a"] = Verdict(False, 1e-3)
    again = first_divergence(compared, verdicts, sources)
    assert again is not None
    assert again.value == "a"
    # everything inside: nothing to name
    assert first_divergence(compared, {k: Verdict(True, 0.0) for k in compared}, sources) is None


def test_where_a_node_comes_from() -> None:
    assert module_and_op(": m.Net/blocks.0: m.Block/blocks.0.lin: torch.nn.Linear/linear: "
                         "aten.linear.default") == ("blocks.0.lin", "aten.linear.default")
    assert module_and_op(": m.Net/_fft_r2c: aten._fft_r2c.default") == (None, "aten._fft_r2c.default")
    # inside the tool's own wrapper of a structured call: the user's module path, as in its model
    wrapped = (": onnx_parity.models.flat_call._flat_call_class.<locals>.FlatCall/model: t.LlamaForCausalLM/"
               "model.model: t.LlamaModel/model.model.layers.0: t.LlamaDecoderLayer/model.model.layers.0.mlp: "
               "t.LlamaMLP/mul_3: aten.mul.Tensor")
    assert module_and_op(wrapped) == ("model.layers.0.mlp", "aten.mul.Tensor")
    assert module_and_op(wrapped.split("/model.model:")[0] + "/add: aten.add.Tensor") == (None, "aten.add.Tensor")
    assert scope_module("/enc/layers.0/attn/q/Gemm") == "enc.layers.0.attn.q"
    assert scope_module("/out/out.0/Gemm") == "out.0"
    assert scope_module("/blocks/blocks.0/blocks.0.1/Mul") == "blocks.0.1"
    assert scope_module("/Mul") is None
    assert scope_module("Identity_0") is None


def test_one_rule_names_a_node_at_the_users_innermost_line_that_leads_to_it(tmp_path: Path) -> None:
    import torch

    from onnx_parity.verification.node_sources import dynamo_origin, module_origin

    user = (str(tmp_path / "models" / "net.py"), 7)  # `hidden = self.blocks(x)`
    container = (torch.nn.modules.container.__file__, 250)  # nn.Sequential.forward
    tool = (str(Path(__file__)), 1)  # outside the repository: never the user's
    linear = torch.nn.Linear(2, 2)
    # TorchScript: a child of nn.Sequential, whose forward is torch's, at the line calling it.
    placed = module_origin("blocks.1", linear, [tool, user, container], tmp_path)
    assert (placed.op, placed.module, placed.file, placed.line) == ("Linear", "blocks.1",
                                                                   "models/net.py", 7)
    assert (placed.library_frame or "").startswith("site-packages/torch/nn/modules/linear.py:")
    # No frame of the repository leads to it: the module path alone, the library frame kept.
    alone = module_origin("1", linear, [tool, container], tmp_path)
    assert (alone.module, alone.file, alone.line) == ("1", None, None)
    assert (alone.library_frame or "").startswith("site-packages/torch/nn/modules/linear.py:")
    # dynamo, the same rule over the frames its graph recorded.
    stack = "\n".join(f'File "{path}", line {line}, in forward' for path, line in
                      (user, container, (torch.nn.modules.linear.__file__, 134)))
    node = GraphNode("linear_1", "Gemm", (), ("linear_1",),
                     ": m.Net/blocks.1: torch.nn.Linear/linear_1: aten.linear.default", stack)
    named = dynamo_origin(node, tmp_path)
    assert (named.module, named.file, named.line) == ("blocks.1", "models/net.py", 7)
    assert (named.library_frame or "").endswith("site-packages/torch/nn/modules/linear.py:134")
    torch_only = dynamo_origin(GraphNode("linear_1", "Gemm", (), ("linear_1",), node.namespace,
                                         stack.split("\n", 1)[1]), tmp_path)
    assert (torch_only.module, torch_only.file, torch_only.line) == ("blocks.1", None, None)


def test_localisation_never_spends_the_time_the_models_timeout_needs(check_model):
    # In this process nothing kills the model; the localisation itself sees its deadline gone
    # (timeout-seconds less the reserve for returning the result) and says so.
    result = check_model(config("late", "ThirdBlockDrift", '{ x = "samples/x.npy" }',
                                "atol = 0.0\nrtol = 0.0\ntimeout-seconds = 1\n"))
    finding = parity(result)
    assert "Not localised: stopped to stay within timeout-seconds" in finding.message
    assert result.divergence is not None
    assert result.divergence.nodes == ()
