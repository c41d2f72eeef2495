"""Mixture-of-experts decoders (issue 34 §1) through the real CLI, in one shared run.

One repository holds tiny seeded MoE decoders of transformers 5.23 built from configs (hidden
32, 2 layers, 8 experts, top-2; nothing downloaded) at transformers' default experts
implementation (`grouped_mm`), the same Qwen3-MoE at `eager`, a flat-cache decoder of the
user's own whose experts are dispatched by a loop over the experts hit, and a Qwen3-MoE whose
router sends every token to the same two experts. `generate = { steps = 8 }`, 4 left-padded
prompts, batch sizes 1 and 4.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fixture_repo.harness import left_padded_prompts, line_of, run_cli, write_model_repo

MODELS = '''
import torch

COMMON = dict(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=64)


def qwen3_moe():
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    torch.manual_seed(0)
    return Qwen3MoeForCausalLM(Qwen3MoeConfig(
        **COMMON, intermediate_size=64, moe_intermediate_size=16, num_experts=8,
        num_experts_per_tok=2, head_dim=8)).eval()


def mixtral():
    from transformers import MixtralConfig, MixtralForCausalLM

    torch.manual_seed(0)
    return MixtralForCausalLM(MixtralConfig(
        **COMMON, intermediate_size=16, num_local_experts=8, num_experts_per_tok=2,
        sliding_window=None)).eval()


def gpt_oss():
    from transformers import GptOssConfig, GptOssForCausalLM

    torch.manual_seed(0)
    return GptOssForCausalLM(GptOssConfig(
        **COMMON, intermediate_size=16, num_local_experts=8, num_experts_per_tok=2,
        head_dim=8, sliding_window=4, layer_types=["sliding_attention", "full_attention"])).eval()


def olmoe():
    from transformers import OlmoeConfig, OlmoeForCausalLM

    torch.manual_seed(0)
    return OlmoeForCausalLM(OlmoeConfig(
        **COMMON, intermediate_size=16, num_experts=8, num_experts_per_tok=2,
        eos_token_id=1)).eval()


def qwen3_moe_eager():
    model = qwen3_moe()
    model.set_experts_implementation("eager")
    return model


def qwen3_moe_two_experts():
    """The experts' input normed to zero: every token's router scores tie, so every token of
    a layer goes to the same two experts and 6 of 8 get none."""
    model = qwen3_moe()
    with torch.no_grad():
        for layer in model.model.layers:
            layer.post_attention_layernorm.weight.zero_()
    return model


class LoopMoe(torch.nn.Module):
    """The user's own 4 experts, top-2, dispatched by a loop over the experts hit."""

    def __init__(self):
        super().__init__()
        self.router = torch.nn.Linear(16, 4)
        self.experts = torch.nn.ModuleList(torch.nn.Linear(16, 16) for _ in range(4))

    def forward(self, h):
        flat = h.reshape(-1, h.shape[-1])
        weights, chosen = self.router(flat).softmax(-1).topk(2, dim=-1)
        out = torch.zeros_like(flat)
        expert_hit = torch.unique(chosen)
        for i in expert_hit:
            rows, slot = torch.where(chosen == i)
            out = out.index_add(0, rows, self.experts[i](flat[rows]) * weights[rows, slot, None])
        return out.reshape(h.shape)


class LoopMoeDecoder(torch.nn.Module):
    """One attention layer of 2 heads of 8 with a flat cache, then the experts."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.embed = torch.nn.Embedding(64, 16)
        self.position = torch.nn.Embedding(64, 16)
        self.qkv = torch.nn.Linear(16, 48)
        self.moe = LoopMoe()
        self.out = torch.nn.Linear(16, 64)

    def forward(self, input_ids, attention_mask, position_ids, key, value):
        b, s = input_ids.shape
        h = self.embed(input_ids) + self.position(position_ids)
        q, k, v = (t.reshape(b, s, 2, 8).transpose(1, 2) for t in self.qkv(h).chunk(3, -1))
        k, v = torch.cat([key, k], 2), torch.cat([value, v], 2)
        t = k.shape[2]
        allowed = torch.arange(t)[None, :] <= (torch.arange(s) + (t - s))[:, None]
        allowed = allowed[None, None] & (attention_mask[:, None, None, :] > 0)
        scores = (q @ k.transpose(2, 3) / 8 ** 0.5).masked_fill(~allowed, -1e4)
        h = h + (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, s, 16)
        return self.out(h + self.moe(h)), k, v


def loop_moe():
    return LoopMoeDecoder().eval()
'''

PASSING = ("qwen3_moe", "mixtral", "gpt_oss", "olmoe")
ENTRIES: dict[str, str] = {name: "generate = { steps = 8 }" for name in
           (*PASSING, "qwen3_moe_eager", "qwen3_moe_two_experts")}
ENTRIES["qwen3_moe"] = 'generate = { steps = 8 }\nvariants = ["int8-dynamic", "int4"]'
ENTRIES["loop_moe"] = 'generate = { steps = 8, cache = "flat", cache-shape = [1, 2, 8] }'
# the compared positions of the prompts: 19 prompt tokens (4 rows, two left-padded), then 7
# one-token steps on 4 rows, and the prompt pass again at batch size 1
COMPARED_TOKENS = 19 + 7 * 4 + 19


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, dict], Path, Path]:
    root = tmp_path_factory.mktemp("moe")
    config = "batch-sizes = [1, 4]\n" + "".join(
        f'[[model]]\nname = "{name}"\nfactory = "models.library:{name}"\ninputs = {{ input_ids '
        f'= "samples/input_ids.npy", attention_mask = "samples/attention_mask.npy" }}\n{entry}\n'
        for name, entry in ENTRIES.items())
    repo = write_model_repo(root, ("library", MODELS), left_padded_prompts(6), config)
    done = run_cli("check", cwd=repo, out=root / "out")
    assert done.code == 1, done.stdout + done.stderr
    return {model["name"]: model for model in done.report()["models"]}, root / "out", repo


def errors(model: dict) -> list[tuple[str, str]]:
    return [(f["code"], f["message"]) for f in model["findings"] if f["severity"] == "error"]


@pytest.mark.slow
@pytest.mark.parametrize("name", PASSING)
def test_a_moe_at_transformers_default_generates_exported_with_batched_mm(
        run: tuple[dict[str, dict], Path, Path], name: str) -> None:
    models, out, _ = run
    model = models[name]
    assert model["passed"], errors(model)
    generation = model["generation"]
    assert generation["tokens_agree"] == [8] * 4
    assert max(generation["max_logit_diff"]) <= model["atol"]
    assert generation["experts"] == {"pytorch": ["grouped_mm"], "exported": ["batched_mm"],
                                     "routed": 16, "total": 16}
    [first, second] = generation["routing"]
    assert first["layer"] == "model.layers.0.mlp.experts"
    assert first["experts"] == 8
    for layer in (first, second):  # every compared token once per each of its 2 experts
        assert sum(layer["tokens"]) == 2 * COMPARED_TOKENS
    assert not [f for f in model["findings"] if f["code"] == "expert-coverage"]
    report = (out / "report.md").read_text(encoding="utf-8")
    assert (f"`{name}` | greedy tokens agree 8/8 steps, 4 rows" in report)
    assert ("experts 16/16 routed (exported with batched_mm; PyTorch ran the user's grouped_mm)"
            in report)


@pytest.mark.slow
def test_transformers_eager_experts_fail_at_their_loop_with_batched_mm_as_the_fix(
        run: tuple[dict[str, dict], Path, Path]) -> None:
    import transformers.models.qwen3_moe.modeling_qwen3_moe as qwen3_moe

    models, _, _ = run
    model = models["qwen3_moe_eager"]
    assert not model["passed"]
    [loop] = [f for f in model["findings"] if f["code"] == "expert-dispatch-loop"]
    line = line_of(Path(qwen3_moe.__file__), "for expert_idx in expert_hit:")
    assert loop["severity"] == "error"
    assert (f"transformers/models/qwen3_moe/modeling_qwen3_moe.py:{line} (an installed package)"
            in loop["message"])
    assert "model.layers.0.mlp.experts (Qwen3MoeExperts)" in loop["message"]
    assert 'set_experts_implementation("batched_mm")' in loop["fix"]


@pytest.mark.slow
def test_a_users_own_loop_over_the_experts_hit_fails_at_their_line(
        run: tuple[dict[str, dict], Path, Path]) -> None:
    models, _, repo = run
    model = models["loop_moe"]
    assert not model["passed"]
    [loop] = [f for f in model["findings"] if f["code"] == "expert-dispatch-loop"]
    assert (loop["file"], loop["line"]) == (
        "models/library.py", line_of(repo / "models" / "library.py", "for i in expert_hit:"))
    assert "decoder.moe (LoopMoe)" in loop["message"]
    assert "batched_mm" in loop["fix"]


@pytest.mark.slow
def test_experts_no_compared_token_reached_are_an_expert_coverage_warning(
        run: tuple[dict[str, dict], Path, Path]) -> None:
    models, out, _ = run
    model = models["qwen3_moe_two_experts"]
    assert model["passed"], errors(model)
    routing = model["generation"]["routing"]
    for layer in routing:  # two experts took every compared token, the others none
        assert sorted(layer["tokens"]) == [0] * 6 + [COMPARED_TOKENS] * 2
    assert model["generation"]["experts"]["routed"] == 4
    [coverage] = [f for f in model["findings"] if f["code"] == "expert-coverage"]
    assert coverage["severity"] == "warning"
    assert coverage["message"].startswith("12 of 16 experts received no token")
    assert coverage["details"]["unrouted"] == {
        layer["layer"]: [index for index, count in enumerate(layer["tokens"]) if not count]
        for layer in routing}
    assert "model.layers.1.mlp.experts experts " in coverage["message"]
    assert "eval-tokens" in coverage["fix"]
    assert "experts 4/16 routed" in (out / "report.md").read_text(encoding="utf-8")


@pytest.mark.slow
def test_a_moe_variant_decodes_and_says_how_many_router_choices_changed(
        run: tuple[dict[str, dict], Path, Path]) -> None:
    import onnx

    models, out, _ = run
    variants = {variant["name"]: variant for variant in models["qwen3_moe"]["variants"]}
    assert set(variants) == {"int8-dynamic", "int4"}
    for name, variant in variants.items():
        assert variant["skipped"] is None
        routing = variant["routing"]
        # 19 prompt tokens, 2 routers
        assert (routing["choices"], routing["routers"]) == (38, 2)
        assert 0 <= routing["changed"] <= 38
        assert routing["share"] == routing["changed"] / 38
        graph = onnx.load(str(out / f"qwen3_moe.{name}.onnx")).graph
        stacked = [init for init in graph.initializer if tuple(init.dims[:2]) == (8, 32)]
        # the experts' stacked weights (gate_up, down per layer) are not quantized
        assert sorted(tuple(init.dims) for init in stacked) == [(8, 32, 16)] * 2 + [(8, 32, 32)] * 2
        assert {init.data_type for init in stacked} == {onnx.TensorProto.FLOAT}
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "| Latency vs fp32 | Router top-k changed |" in report
    changed = variants["int4"]["routing"]["changed"]
    assert f"| {changed} of 38 ({changed / 38:.1%}), 2 routers |" in report
    assert "router top-k set changed" not in report  # a column now, not a note
