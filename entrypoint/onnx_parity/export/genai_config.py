"""`genai_config.json` for an exported decoder: what onnxruntime-genai's model builder writes for
the model's architecture through its `config_only` route (no weights read), with the decoder
file's own input and output names in place of the builder's.

The builder reads a checkpoint folder: config.json (with `architectures`), generation_config.json
and a tokenizer, which it needs even for `config_only` (it resolves special tokens with it and
saves it). A save_pretrained folder's own tokenizer files are used; a factory's model has none,
so a word-level tokenizer of the model's vocabulary with no special tokens stands in (it cannot
add an end-of-sequence token the config does not name) and is not shipped. The builder runs in
a process of its own (`python -m onnxruntime_genai.models.builder`: it is written as a script,
its modules import each other by top-level name).
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from onnx_parity.errors import ModelProblem
from onnx_parity.models import STATE_KINDS

# onnxruntime-genai 0.18's decoder-only model types (its model_type list); the builder's generic
# route names an architecture it does not know after its class (`gpt2lmheadmodel`), which the
# runtime refuses: such a model runs as the generic "decoder".
GENAI_TYPES = frozenset((
    "chatglm", "decoder", "ernie4_5", "gemma", "gemma2", "gemma3_text", "gemma4_text", "gptoss",
    "granite", "granitemoehybrid", "hunyuandensev1", "internlm2", "lfm2", "lfm2_moe", "llama",
    "mistral", "mistral3_text", "nemotron", "olmo", "phi", "phimoe", "phi3", "phi3small",
    "qwen2", "qwen3", "smollm3"))
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                   "vocab.json", "merges.txt", "tokenizer.model", "added_tokens.json")
BUILDER = "onnxruntime_genai.models.builder"
# The hybrid types whose loop feeds conv and recurrent states (the builder's LFM2 and Qwen3.5).
STATE_TYPES = ("lfm2", "lfm2_moe", "qwen3_5_text", "qwen3_5_moe_text")
# The decoder inputs genai_config.json names (a VLM's decoder takes inputs_embeds).
FED = ("input_ids", "inputs_embeds", "attention_mask", "position_ids")
BUILDER_SECONDS = 600


class BundleError(ModelProblem):
    """A bundle's documents could not be made; the text says why (bundles.py's finding)."""


def genai_config(module: Any, checkpoint: Path | None, names: tuple[tuple[str, ...], ...],
                 scratch: Path, embeds: bool = False) -> dict[str, Any]:
    """The builder's genai_config.json for `module`'s config; `names`: the decoder file's
    inputs and outputs; `checkpoint`: the save_pretrained folder the model came from;
    `embeds`: the decoder takes inputs_embeds (a vision-language model's, `exclude_embeds`)."""
    shutil.rmtree(scratch, ignore_errors=True)
    source, out = scratch / "checkpoint", scratch / "out"
    tokenizer = _write_checkpoint(module, checkpoint, source)
    _run_builder(source, out, scratch / "cache", embeds)
    document: dict[str, Any] = json.loads((out / "genai_config.json").read_text("utf-8"))
    if not tokenizer:  # the stand-in's class may add tokens: the model's own ids decide
        document["model"].update(special_tokens(module))
    return with_layout(document, *names)


def special_tokens(module: Any) -> dict[str, Any]:
    """bos, eos and pad as the model generates with them (its generation_config, else its
    config), as the builder writes them when a tokenizer adds nothing: bos 1 and pad the first
    end-of-sequence token when unset."""
    config, generation = module.config, getattr(module, "generation_config", None)

    def given(name: str) -> Any:  # a VLM's config may hold its tokens in its text config
        found = (getattr(source, name, None) for source in (generation, config,
                                                               config.get_text_config()))
        return next((value for value in found if value is not None), None)

    eos = given("eos_token_id")
    first = eos[0] if isinstance(eos, list) and eos else eos
    pad, bos = given("pad_token_id"), given("bos_token_id")
    return {"eos_token_id": eos, "pad_token_id": first if pad is None else pad,
            "bos_token_id": 1 if bos is None else bos}


def _write_checkpoint(module: Any, checkpoint: Path | None, folder: Path) -> bool:
    """The builder's input folder; whether it holds the checkpoint's own tokenizer."""
    folder.mkdir(parents=True)
    config = copy.deepcopy(module.config)
    config.architectures = config.architectures or [type(module).__name__]
    _generic_names(config)
    config.save_pretrained(folder)
    generation = getattr(module, "generation_config", None)
    if generation is not None:
        generation.save_pretrained(folder)
    given = [checkpoint / name for name in TOKENIZER_FILES
             if checkpoint is not None and (checkpoint / name).is_file()]
    for file in given:
        shutil.copyfile(file, folder / file.name)
    if not given:
        _stand_in_tokenizer(int(config.get_text_config().vocab_size), folder)
    return bool(given)


def _generic_names(config: Any) -> None:
    """The names the builder's generic route reads (it sizes the config from them, no weights),
    from GPT-2's own: `n_inner` (None: 4 x the width), `activation_function`. A config with a
    text config of its own (a VLM's) is read from that one."""
    if config.get_text_config() is not config:
        return
    if getattr(config, "intermediate_size", None) is None:
        config.intermediate_size = getattr(config, "n_inner", None) or 4 * int(config.hidden_size)
    if getattr(config, "hidden_act", None) is None:
        config.hidden_act = getattr(config, "activation_function", None) or "gelu"


def _stand_in_tokenizer(vocabulary: int, folder: Path) -> None:
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    words = models.WordLevel({f"t{index}": index for index in range(vocabulary)}, unk_token="t0")
    fast: Any = PreTrainedTokenizerFast  # transformers' tokenizer classes are untyped
    fast(tokenizer_object=Tokenizer(words)).save_pretrained(folder)


def _run_builder(source: Path, out: Path, cache: Path, embeds: bool) -> None:
    options = ["config_only=true", *(["exclude_embeds=true"] if embeds else [])]
    command = [sys.executable, "-m", BUILDER, "-i", str(source), "-o", str(out), "-p", "fp32",
               "-e", "cpu", "-c", str(cache), "--extra_options", *options]
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False,
                              timeout=BUILDER_SECONDS, cwd=source.parent,
                              env={**os.environ, "HF_HUB_OFFLINE": "1"})
    except subprocess.TimeoutExpired:
        raise BundleError(f"onnxruntime-genai's model builder did not finish within "
                          f"{BUILDER_SECONDS} s") from None
    if done.returncode != 0 or not (out / "genai_config.json").is_file():
        said = (done.stderr.strip() or done.stdout.strip()).splitlines()[-3:]
        raise BundleError(f"onnxruntime-genai's model builder (config_only) failed with exit "
                          f"{done.returncode}: {' / '.join(said) or 'no output'}")


def with_layout(document: dict[str, Any], inputs: tuple[str, ...],
                outputs: tuple[str, ...]) -> dict[str, Any]:
    """The builder's document with the decoder file's names: `position_ids` where the file
    takes it, the cache's name patterns, and a model type the runtime knows."""
    model = document["model"]
    decoder = model["decoder"]
    names: dict[str, str] = {name: name for name in FED if name in inputs}
    decoder["inputs"] = {**names, "past_key_names": "past_key_values.%d.key",
                         "past_value_names": "past_key_values.%d.value"}
    decoder["outputs"] = {"logits": "logits", "present_key_names": "present.%d.key",
                          "present_value_names": "present.%d.value"}
    decoder["filename"] = "model.onnx"
    if model.get("type") not in GENAI_TYPES:
        model["type"] = "decoder"
    _with_states(model, inputs)
    _check_tokens(model)
    missing = [name for name in ("attention_mask",) if name not in inputs]
    if not {"input_ids", "inputs_embeds"} & set(inputs):
        missing.insert(0, "input_ids")
    if missing or "logits" not in outputs:
        raise BundleError(f"the decoder file lacks {', '.join(missing) or 'logits'}, which "
                          "onnxruntime-genai feeds or reads")
    document["search"]["past_present_share_buffer"] = False  # the file's present grows
    return document


def _with_states(model: dict[str, Any], inputs: tuple[str, ...]) -> None:
    """A hybrid decoder's conv and recurrent states under genai's names (`past.%d.conv` ->
    `present.%d.conv`), for a model type whose loop carries them."""
    kinds = [kind for kind in STATE_KINDS if any(re.fullmatch(rf"past\.\d+\.{kind}", name)
                                                 for name in inputs)]
    if not kinds:
        return
    if model["type"] not in STATE_TYPES:
        raise BundleError(
            f"onnxruntime-genai 0.18 carries conv and recurrent states for its "
            f"{', '.join(STATE_TYPES)} model types only; the builder writes this model as "
            f"\"{model['type']}\", whose loop would not feed the file's "
            f"{', '.join(f'past.N.{kind}' for kind in kinds)}")
    for kind in kinds:
        model["decoder"]["inputs"][f"past_{kind}_names"] = f"past.%d.{kind}"
        model["decoder"]["outputs"][f"present_{kind}_names"] = f"present.%d.{kind}"


def _check_tokens(model: dict[str, Any]) -> None:
    """onnxruntime-genai refuses an end-of-sequence token outside the vocabulary (and needs
    one): say so here, naming the config's value, rather than when the bundle is loaded."""
    eos, vocabulary = model.get("eos_token_id"), int(model.get("vocab_size", 0))
    ids = eos if isinstance(eos, list) else [eos]
    if eos is None or not all(isinstance(item, int) and 0 <= item < vocabulary for item in ids):
        raise BundleError(
            f"onnxruntime-genai needs an end-of-sequence token within the vocabulary (0 to "
            f"{vocabulary - 1}); the model's eos_token_id is {eos}. Set eos_token_id in its "
            "config or generation_config to the token generation ends with")
