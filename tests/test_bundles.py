"""The deployment bundles of a generating model and onnxruntime-genai's own loop (issue 28, 3):
`generate = { steps, bundle = ["onnxruntime-genai", "optimum"], runtime = "onnxruntime-genai" }`.

One CLI run over a repository of three tiny seeded decoders (Llama, Qwen2, and GPT-2, which
onnxruntime-genai runs as its generic "decoder"; Qwen2's and GPT-2's end-of-sequence token set
within their vocabulary of 64, as a real model's is) is shared by the tests: each bundle folder is
loaded in its own runtime as a user deploys it and its greedy tokens are compared with
transformers' `generate` on every unpadded prompt; onnxruntime-genai in this venv, optimum-onnx
0.1.0 (which needs transformers < 4.58) in a venv of its own (tests/optimum_venv.py).
"""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fixture_repo.harness import CliRun, left_padded_prompts, run_cli, write_model_repo
from optimum_venv import optimum_python

STEPS = 6
NAMES = ("llama", "qwen2", "gpt2")
MODELS = '''
import torch


def llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)).eval()


def qwen2():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    return Qwen2ForCausalLM(Qwen2Config(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        bos_token_id=1, eos_token_id=2)).eval()


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(vocab_size=64, n_positions=64, n_embd=32, n_layer=2,
                                      n_head=4, bos_token_id=1, eos_token_id=2)).eval()
'''
DEPLOY = (f'generate = {{ steps = {STEPS}, bundle = ["onnxruntime-genai", "optimum"], '
          'runtime = "onnxruntime-genai" }')


def prompts() -> dict[str, np.ndarray]:
    return left_padded_prompts(6)


def unpadded() -> list[list[int]]:
    given = prompts()
    return [row[mask == 1].tolist()
            for row, mask in zip(given["input_ids"], given["attention_mask"], strict=True)]


# The Llama's int4 variant gets its bundles too (`llama.int4.genai/`); a tiny random model's
# int4 tokens are not the point here, so its token agreement is not gated.
INT4 = 'variants = ["int4"]\n'


def config(models: tuple[str, ...]) -> str:
    entries = "".join(
        f'[[model]]\nname = "{name}"\nfactory = "models.library:{name}"\ninputs = {{ input_ids '
        '= "samples/input_ids.npy", attention_mask = "samples/attention_mask.npy" }\n'
        f"{DEPLOY}\n{INT4 if name == 'llama' else ''}" for name in models)
    return "batch-sizes = [1, 4]\n" + entries


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory) -> CliRun:
    root = tmp_path_factory.mktemp("bundles")
    repo = write_model_repo(root, ("library", MODELS), prompts(), config(NAMES))
    run = run_cli("check", "--cache", str(root / "cache"), cwd=repo, out=root / "out",
                  timeout=1200)
    assert run.code == 0, run.stdout + run.stderr
    return run


def transformers_tokens(name: str) -> list[list[int]]:
    """transformers' own greedy `generate`, one unpadded prompt at a time."""
    import torch

    namespace: dict[str, Any] = {}
    exec(textwrap.dedent(MODELS), namespace)
    model = namespace[name]()
    tokens = []
    for prompt in unpadded():
        ids = torch.tensor([prompt])
        with torch.no_grad():
            out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                 max_new_tokens=STEPS)
        tokens.append(out[0, len(prompt):].tolist())
    return tokens


def genai_tokens(folder: Path) -> list[list[int]]:
    """The bundle as onnxruntime-genai's users run it: the folder, greedy, to max_length."""
    import onnxruntime_genai as og

    model = og.Model(str(folder))
    tokens = []
    for prompt in unpadded():
        params = og.GeneratorParams(model)
        params.set_search_options(do_sample=False, max_length=len(prompt) + STEPS)
        generator = og.Generator(model, params)
        generator.append_tokens(np.array([prompt], dtype=np.int32))
        while not generator.is_done() and len(generator.get_sequence(0)) < len(prompt) + STEPS:
            generator.generate_next_token()
        tokens.append([int(token) for token in generator.get_sequence(0)[len(prompt):]])
    return tokens


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_each_bundle_holds_the_decoder_and_the_documents_its_runtime_reads(
        deployed: CliRun, name: str) -> None:
    import onnx

    out = deployed.folder
    genai, optimum = out / f"{name}.genai", out / f"{name}.optimum"
    assert sorted(path.name for path in genai.iterdir()) == ["genai_config.json", "model.onnx"]
    assert sorted(path.name for path in optimum.iterdir()) == [
        "config.json", "generation_config.json", "model.onnx"]
    assert (genai / "model.onnx").read_bytes() == (out / f"{name}.onnx").read_bytes()
    graph = onnx.load(str(genai / "model.onnx"), load_external_data=False).graph
    document = json.loads((genai / "genai_config.json").read_text(encoding="utf-8"))["model"]
    inputs = document["decoder"]["inputs"]
    named = {value for key, value in inputs.items() if not key.endswith("_names")}
    assert named == {value.name for value in graph.input} - {
        value.name for value in graph.input if value.name.startswith("past_key_values.")}
    assert document["type"] == {"gpt2": "decoder"}.get(name, name)
    assert document["decoder"]["num_hidden_layers"] == 2
    saved = json.loads((optimum / "config.json").read_text(encoding="utf-8"))
    assert saved["model_type"] == name
    assert saved["architectures"]


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_onnxruntime_genai_generates_transformers_tokens_from_the_bundle(
        deployed: CliRun, name: str) -> None:
    assert genai_tokens(deployed.folder / f"{name}.genai") == transformers_tokens(name)


@pytest.mark.slow
def test_the_check_ran_each_prompt_in_onnxruntime_genais_own_loop(deployed: CliRun) -> None:
    for name, model in deployed.models().items():
        runtime = model["generation"]["runtime"]
        assert runtime == {"runtime": "onnxruntime-genai", "steps": STEPS,
                           "tokens_agree": [STEPS] * 4, "compared": [STEPS] * 4,
                           "first_token_difference": None}, name
        assert model["passed"], (name, model["findings"])
        own = [f for f in model["findings"] if "variant" not in f.get("details", {})]
        assert not own, (name, model["findings"])
        assert [bundle["suffix"] for bundle in model["generation"]["bundles"]] == [
            "genai", "optimum"]
    assert deployed.stdout.count(
        f"onnxruntime-genai's own loop: tokens agree {4 * STEPS}/{4 * STEPS} (4 prompts, "
        "unpadded); bundles: onnxruntime-genai, optimum") == len(NAMES)


@pytest.mark.slow
def test_an_int4_variant_gets_its_own_bundles_and_onnxruntime_genai_runs_them(
        deployed: CliRun) -> None:
    """`<name>.int4.genai/` packs the int4 file (MatMulNBits), and genai generates from it."""
    import onnx

    out = deployed.folder
    genai, optimum = out / "llama.int4.genai", out / "llama.int4.optimum"
    assert (genai / "model.onnx").read_bytes() == (out / "llama.int4.onnx").read_bytes()
    assert (optimum / "model.onnx").read_bytes() == (out / "llama.int4.onnx").read_bytes()
    graph = onnx.load(str(genai / "model.onnx"), load_external_data=False).graph
    assert any(node.op_type == "MatMulNBits" for node in graph.node)
    assert (genai / "genai_config.json").read_bytes() == \
        (out / "llama.genai" / "genai_config.json").read_bytes()
    tokens = genai_tokens(genai)
    assert [len(row) for row in tokens] == [STEPS] * 4
    assert all(0 <= token < 64 for row in tokens for token in row)
    assert not (out / "qwen2.int4.genai").exists()  # only a model with the variant


@pytest.mark.slow
def test_a_cached_model_writes_the_same_bundles_without_a_worker(deployed: CliRun) -> None:
    """The bundles' documents come back with the cached result (report.json's record)."""
    out = deployed.folder
    again = run_cli("check", "--cache", str(out.parent / "cache"), cwd=out.parent / "repo",
                    out=out.parent / "again")
    assert again.code == 0, again.stdout + again.stderr
    assert all(model["cached_from"] for model in again.models().values())
    for name in NAMES:
        for suffix in ("genai", "optimum"):
            folder = f"{name}.{suffix}"
            assert {path.name: path.read_bytes() for path in (again.folder / folder).iterdir()} \
                == {path.name: path.read_bytes() for path in (out / folder).iterdir()}


OPTIMUM_SCRIPT = '''
import json, sys
import torch
from optimum.onnxruntime import ORTModelForCausalLM

folder, prompts, steps = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
model = ORTModelForCausalLM.from_pretrained(folder)
tokens = []
for prompt in prompts:
    ids = torch.tensor([prompt])
    out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                         max_new_tokens=steps)
    tokens.append(out[0, len(prompt):].tolist())
print(json.dumps(tokens))
'''


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_optimum_loads_the_bundle_unchanged_and_generates_transformers_tokens(
        deployed: CliRun, name: str) -> None:
    import subprocess

    python = optimum_python()
    done = subprocess.run(
        [str(python), "-c", OPTIMUM_SCRIPT, str(deployed.folder / f"{name}.optimum"),
         json.dumps(unpadded()), str(STEPS)],
        capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == transformers_tokens(name)


# ---------------------------------------------------------------------------------------------
# The keys


def config_error(tmp_path: Path, line: str,
                 python: tuple[str, ...] = ("-m", "onnx_parity")) -> str:
    repo = write_model_repo(tmp_path, ("library", MODELS), prompts(), config(("llama",)).replace(
        DEPLOY, line))
    run = run_cli("check", cwd=repo, out=tmp_path / "out", python=python)
    assert run.code == 2, run.stdout + run.stderr
    assert "Traceback" not in run.stderr
    return run.stderr


@pytest.mark.parametrize(("line", "said"), [
    ('generate = { steps = 4, bundle = "optimum" }',
     'model "llama": key "generate.bundle": expected an array of runtimes, e.g. bundle = ["onnxruntime-genai", '
     '"optimum"]; got a string "optimum".'),
    ('generate = { steps = 4, bundle = ["tensorrt"] }',
     '"tensorrt" is not a runtime a bundle is written for'),
    ('generate = { steps = 4, bundle = ["optimum", "optimum"] }', "a runtime is named twice"),
    ('generate = { steps = 4, runtime = "optimum" }',
     '"optimum" is not a runtime this check can run. Write runtime = "onnxruntime-genai"'),
    ('generate = { steps = 4, cache = "flat", cache-shape = [2, 2, 8], bundle = ["optimum"] }',
     'applies to a transformers model, whose config the bundles\' config files are written '
     'from; cache = "flat" is your own decoder'),
])
def test_a_bad_bundle_or_runtime_names_the_key_and_the_fix(tmp_path: Path, line: str,
                                                           said: str) -> None:
    assert said in config_error(tmp_path, line)


HIDDEN = ("-c", "import sys; sys.modules['onnxruntime_genai'] = None; "
          "from onnx_parity.cli import main; sys.exit(main(sys.argv[1:]))")


@pytest.mark.parametrize("line", [
    'generate = { steps = 4, runtime = "onnxruntime-genai" }',
    'generate = { steps = 4, bundle = ["onnxruntime-genai"] }',
])
def test_without_the_genai_extra_the_key_is_exit_2_naming_the_extra(tmp_path: Path,
                                                                    line: str) -> None:
    """onnxruntime-genai made unimportable as Python itself marks a module so (None in
    sys.modules), the CLI's own main run in that interpreter."""
    said = config_error(tmp_path, line, HIDDEN)
    assert "needs onnxruntime-genai" in said
    assert "pip install 'onnx-parity[genai]'" in said



# ---------------------------------------------------------------------------------------------
# genai_config.json from the builder's document


def builder_document(model_type: str, eos: object = 2) -> dict[str, Any]:
    """The shape onnxruntime-genai 0.18's builder writes (config_only, Llama's inputs)."""
    return {"model": {"type": model_type, "eos_token_id": eos, "vocab_size": 64, "decoder": {
        "filename": "model.onnx", "inputs": {"input_ids": "input_ids",
                                             "attention_mask": "attention_mask",
                                             "past_key_names": "past_key_values.%d.key"},
        "outputs": {"logits": "logits"}}}, "search": {"past_present_share_buffer": True}}


LAYOUT = (("input_ids", "attention_mask", "position_ids", "past_key_values.0.key"),
          ("logits", "present.0.key"))


def test_the_builders_document_takes_the_decoder_files_names() -> None:
    from onnx_parity.export.genai_config import with_layout

    document = with_layout(builder_document("llama"), *LAYOUT)
    assert document["model"]["decoder"]["inputs"] == {
        "input_ids": "input_ids", "attention_mask": "attention_mask",
        "position_ids": "position_ids", "past_key_names": "past_key_values.%d.key",
        "past_value_names": "past_key_values.%d.value"}
    assert document["model"]["decoder"]["outputs"] == {
        "logits": "logits", "present_key_names": "present.%d.key",
        "present_value_names": "present.%d.value"}
    assert document["model"]["type"] == "llama"
    assert document["search"]["past_present_share_buffer"] is False


def test_an_architecture_the_runtime_does_not_know_runs_as_the_generic_decoder() -> None:
    from onnx_parity.export.genai_config import with_layout

    assert with_layout(builder_document("gpt2lmheadmodel"), *LAYOUT)["model"]["type"] == "decoder"


@pytest.mark.parametrize("eos", [None, 64, [2, 50256]])
def test_an_end_of_sequence_token_outside_the_vocabulary_is_a_bundle_error(eos: object) -> None:
    from onnx_parity.export.genai_config import BundleError, with_layout

    with pytest.raises(BundleError, match=r"within the vocabulary \(0 to 63\); the model's "
                                          rf"eos_token_id is {re.escape(str(eos))}\. Set"):
        with_layout(builder_document("llama", eos), *LAYOUT)
