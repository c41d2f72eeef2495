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
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from onnx_parity.errors import ModelProblem

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
BUILDER_SECONDS = 600


class BundleError(ModelProblem):
    """A bundle's documents could not be made; the text says why (bundles.py's finding)."""


def genai_config(module: Any, checkpoint: Path | None, names: tuple[tuple[str, ...], ...],
                 scratch: Path) -> dict[str, Any]:
    """The builder's genai_config.json for `module`'s config; `names`: the decoder file's
    inputs and outputs; `checkpoint`: the save_pretrained folder the model came from."""
    shutil.rmtree(scratch, ignore_errors=True)
    source, out = scratch / "checkpoint", scratch / "out"
    _write_checkpoint(module, checkpoint, source)
    _run_builder(source, out, scratch / "cache")
    document: dict[str, Any] = json.loads((out / "genai_config.json").read_text("utf-8"))
    return with_layout(document, *names)


def _write_checkpoint(module: Any, checkpoint: Path | None, folder: Path) -> None:
    folder.mkdir(parents=True)
    config = copy.deepcopy(module.config)
    config.architectures = config.architectures or [type(module).__name__]
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


def _stand_in_tokenizer(vocabulary: int, folder: Path) -> None:
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    words = models.WordLevel({f"t{index}": index for index in range(vocabulary)}, unk_token="t0")
    fast: Any = PreTrainedTokenizerFast  # transformers' tokenizer classes are untyped
    fast(tokenizer_object=Tokenizer(words)).save_pretrained(folder)


def _run_builder(source: Path, out: Path, cache: Path) -> None:
    command = [sys.executable, "-m", BUILDER, "-i", str(source), "-o", str(out), "-p", "fp32",
               "-e", "cpu", "-c", str(cache), "--extra_options", "config_only=true"]
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
    names: dict[str, str] = {name: name for name in ("input_ids", "attention_mask", "position_ids")
                             if name in inputs}
    decoder["inputs"] = {**names, "past_key_names": "past_key_values.%d.key",
                         "past_value_names": "past_key_values.%d.value"}
    decoder["outputs"] = {"logits": "logits", "present_key_names": "present.%d.key",
                          "present_value_names": "present.%d.value"}
    decoder["filename"] = "model.onnx"
    if model.get("type") not in GENAI_TYPES:
        model["type"] = "decoder"
    missing = [name for name in ("input_ids", "attention_mask") if name not in inputs]
    if missing or "logits" not in outputs:
        raise BundleError(f"the decoder file lacks {', '.join(missing) or 'logits'}, which "
                          "onnxruntime-genai feeds or reads")
    document["search"]["past_present_share_buffer"] = False  # the file's present grows
    return document
