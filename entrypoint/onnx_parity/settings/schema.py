"""The validated configuration: frozen values, built once, passed to every later stage.

Every configuration key is declared once, as a field of `ModelSpec` made by `setting(...)`:
its TOML name, its type and meaning as the docs show them, its check, its default, whether
only a `[[model]]` may set it, and whether it changes what a worker measures. The loader, the
lists of valid keys, the cache's fingerprint, the generated reference page
(docs/reference/configuration.md) and the property tests all read those declarations, so a
new key is one declaration here (its check beside the others in settings/keys/checks.py or
settings/keys/model_keys.py).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from onnx_parity.settings.declaration import DECLARED, Key, choices, plain, setting
from onnx_parity.settings.keys.axis_keys import batch_axis_value
from onnx_parity.settings.keys.call_keys import Constant, forward_kwargs_value
from onnx_parity.settings.keys.checks import (
    CALIBRATIONS,
    DEFAULT_ATOL,
    DEFAULT_BATCH_SIZES,
    DEFAULT_DRIFT_WARNING_RATIO,
    DEFAULT_LOCALISE_MAX_VALUES,
    DEFAULT_OPSET,
    DEFAULT_OPTIMIZATION,
    DEFAULT_REPRO_MAX_MB,
    DEFAULT_RTOL,
    DEFAULT_TIMEOUT_SECONDS,
    DTYPES,
    EXPORTERS,
    OPTIMIZATION_LEVELS,
    VARIANTS,
    agreement_value,
    batch_sizes_value,
    calibration_value,
    drift_ratio_value,
    dtype_defaults,
    dtype_value,
    exporters_value,
    localise_limit_value,
    memory_limit_value,
    opset_value,
    optimization_value,
    python_path_value,
    repro_size_value,
    sqnr_value,
    timeout_value,
    tolerance_value,
    variants_value,
)
from onnx_parity.settings.keys.environment import env_value
from onnx_parity.settings.keys.generation_keys import GENERATE_KEY, Generation
from onnx_parity.settings.keys.model_keys import (
    ALLOW_WARNING_KEYS,
    AllowWarning,
    allow_warnings_value,
    axis_sizes_value,
    compare_mask_value,
    dynamic_axes_value,
    factory_value,
    inputs_value,
    model_name_value,
    outputs_value,
    weights_value,
)
from onnx_parity.settings.keys.model_sources import export_command_value, transformers_value
from onnx_parity.settings.keys.variant_keys import (
    DEFAULT_MAX_PERPLEXITY_RATIO,
    EVAL_TOKENS_KEY,
    INT4_KEY,
    PERPLEXITY_KEY,
    Int4,
)
from onnx_parity.settings.source_folders import SourceFolders

__all__ = [
    "DEFAULT_TIMEOUT_SECONDS", "EXPORTERS", "OPTIMIZATION_LEVELS", "VARIANTS", "AllowWarning",
    "Key", "ModelSpec", "Settings", "declared_keys",
]

_OVERRIDES = "Set at the top level for every model, or in a `[[model]]` for that model only."


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """One `[[model]]` entry with the top-level defaults applied and paths resolved.

    The fields are in the order the valid-keys message lists them.
    """

    name: str = setting(
        "name", kind="string", check=plain(model_name_value), model_only=True,
        example='name = "my-model"',
        doc="Unique among the models; it becomes the file name `<name>.onnx`, so it may use "
            "only ASCII letters, digits, `.`, `_` and `-`, is 1-128 characters long and starts "
            "with a letter, digit or `_`.")
    factory: str | None = setting(
        "factory", kind='string `"module:callable"`', check=plain(factory_value), default=None,
        shown="required unless `transformers` is set", model_only=True,
        example='factory = "models.net:build_model"',
        doc="A dotted module path, a colon, then a dotted attribute (`\"pkg.zoo:Models.resnet\"` "
            "works too). It is imported from the source folders (`python-path`), then the "
            "repository root; calling it with no arguments returns the `nn.Module`.")
    transformers: Path | None = setting(
        "transformers", kind="folder path", check=transformers_value, default=None,
        shown="none", model_only=True, example='transformers = "checkpoints/tiny-llama"',
        doc="In place of `factory`: a `save_pretrained` folder (`config.json`, `*.safetensors`), "
            "built offline with the class its config names (else `AutoModel`).")
    # Absolute paths, each checked to lie inside the repository.
    weights: Path | None = setting(
        "weights", kind="path", check=weights_value, default=None, shown="none",
        model_only=True, example='weights = "weights/cnn.pt"',
        doc="A `state_dict` file (`.pt` or `.pth`, read without running pickled code, or "
            "`.safetensors`, read with safetensors), loaded into the module the factory returns.")
    # Either input name -> sample file, or one bundle (.npz/.pt file or Model Zoo folder).
    inputs: dict[str, Path] | Path = setting(
        "inputs", kind="table of input name -> path, or one path", check=inputs_value,
        model_only=True, example='inputs = { input = "samples/input.npy" }',
        doc="**Table:** input name -> sample file (`.npy`, `.npz` holding one array, `.pt`, or "
            "`.pb` ONNX TensorProto). **Path:** one bundle holding all inputs, an `.npz`/`.pt` "
            "file or a Model Zoo folder (`test_data_set_N` with `input_K.pb`). Axis 0 of each "
            "sample is the samples axis that batches are cut from.")
    forward_kwargs: dict[str, Constant] = setting(
        "forward-kwargs", kind="table of keyword -> boolean, number or string",
        check=forward_kwargs_value, default={}, shown="none", model_only=True,
        example="forward-kwargs = { return_dict = false, use_cache = true }",
        doc="Constant keyword arguments of forward: passed to it in PyTorch and bound into "
            "the exported graph as constants, never graph inputs. A name may not be in `inputs`.")
    outputs: tuple[str, ...] = setting(
        "outputs", kind="array of distinct strings", check=plain(outputs_value), default=(),
        shown="the model's own names", model_only=True, example='outputs = ["logits"]',
        doc="Names for the exported outputs, in the order forward returns them.")
    dynamic_axes: dict[str, dict[int, str]] = setting(
        "dynamic-axes", kind="table of name -> { axis -> dimension name }",
        check=dynamic_axes_value, default={}, shown="none (every axis fixed)", model_only=True,
        example='dynamic-axes = { input = { 0 = "batch" }, logits = { 0 = "batch" } }',
        doc="Axes of inputs and outputs that must stay variable in the exported model; axis "
            "keys are indices 0-999. The names are checked against `inputs` and `outputs` when "
            "both are declared by name. Axes that share a dimension name vary together. A "
            "dimension may be a linear expression of one other, written with spaced operators "
            '(`"past + 1"`, `"total - 1"`, `"2 * frames"`, `"2 * frames + 1"`): it is exported '
            "derived from that root (which an input must declare by name), swept with it at the "
            "length the expression gives, and samples must agree with it.")
    # name -> the axis of the deployed tensor that holds the batch (None: it has none).
    batch_axis: dict[str, int | None] = setting(
        "batch-axis", kind='table of input or output name -> axis index or `"none"`',
        check=batch_axis_value, default={}, shown="axis 0 of every input and output",
        model_only=True, example='batch-axis = { orig_im_size = "none", x = 1 }',
        doc="The axis of each deployed tensor that holds the batch, or `\"none\"` for one the "
            "deployed graph takes without a batch (one value for the whole batch). Axis "
            "indices everywhere (`dynamic-axes`, `axis-sizes`, findings) are the deployed "
            "tensor's. Sample files keep axis 0 as the samples axis for every input: a "
            "`\"none\"` input's file holds one value of the deployed shape per sample and each "
            "batch is fed its first sample's; an input whose batch axis is not 0 gets the "
            "batch stacked there.")
    allow_warnings: tuple[AllowWarning, ...] = setting(
        "allow-warnings", kind="array of tables `[[model.allow-warnings]]`",
        check=allow_warnings_value, default=(), shown="none", model_only=True,
        example='allow-warnings = [{ match = "Converting a tensor", reason = "constant here" }]',
        doc=f"Export warnings accepted for this model, each with exactly the keys "
            f"{', '.join(f'`{key}`' for key in ALLOW_WARNING_KEYS)}: text found in the "
            "warning, and why it is harmless (kept in the report). A matched warning becomes "
            "a note.")
    opset: int = setting(
        "opset", kind="integer, 7-23", check=plain(opset_value), default=DEFAULT_OPSET,
        example="opset = 18",
        doc=f"The ONNX opset to export to; the opset the model really has is read back. "
            f"{_OVERRIDES}")
    exporters: tuple[str, ...] = setting(
        "exporter", kind='`"auto"`, `"dynamo"`, `"torchscript"`, or an array of the last two',
        check=plain(exporters_value), default=EXPORTERS, shown='"auto"',
        example='exporter = ["torchscript", "dynamo"]',
        doc="The exporters to try, in order; `\"auto\"` is `[\"dynamo\", \"torchscript\"]`. A "
            f"list keeps your order and names each exporter once. {_OVERRIDES}")
    export_command: str | None = setting(
        "export-command", kind="string", check=export_command_value, default=None,
        shown="none", model_only=True, example='export-command = "python export.py --out {onnx}"',
        doc="Your own export instead of `exporter`: run without a shell in the model's worker, "
            "in the repository root, `{onnx}` replaced by the path to write; that file is "
            "checked, and the report names the command as the exporter.")
    atol: float = setting(
        "atol", kind="number >= 0", check=plain(tolerance_value), default=DEFAULT_ATOL,
        shown=dtype_defaults(0), example="atol = 1e-4",
        doc="Absolute tolerance of the comparison of onnxruntime's outputs with PyTorch's: an "
            "element passes when `|onnx - torch| <= atol + rtol * |torch|`. Left out, the "
            f"default of the dtype the model computes in (`dtype`, else its own). {_OVERRIDES}")
    rtol: float = setting(
        "rtol", kind="number >= 0", check=plain(tolerance_value), default=DEFAULT_RTOL,
        shown=dtype_defaults(1), example="rtol = 1e-3",
        doc=f"Relative tolerance of the same comparison; left out, as for `atol`. {_OVERRIDES}")
    dtype: str | None = setting(
        "dtype", kind=f"one of {choices(DTYPES)}", check=plain(dtype_value), default=None,
        shown="the model's own", example='dtype = "float32"',
        doc="The dtype the factory's model and its float samples are cast to before export, e.g. "
            '`"float32"` to check a bfloat16 checkpoint on a CPU runner (whose onnxruntime has no '
            "bfloat16 kernel for most operators). `atol`/`rtol` left out take the dtype's "
            f"defaults; `variants` (built from a float32 check) refuse another. {_OVERRIDES}")
    compare_mask: dict[str, str] = setting(
        "compare-mask", kind="table of output name -> input name", check=compare_mask_value,
        default={}, shown="none (every element is compared)", model_only=True,
        example='compare-mask = { logits = "attention_mask" }',
        doc="Outputs compared only where an input (0/1 or boolean) is not 0 (a padded batch's "
            "padding left out; the report says how many), the mask's axes along the output's of "
            "the same `dynamic-axes` name: `attention_mask` (batch, sequence) masks `logits` "
            "(batch, sequence, vocab) and `present.0.key` (batch, heads, sequence, dim) alike.")
    explicit: tuple[str, ...] = ()  # not a key: the fields the configuration sets (dtypes.py)
    batch_sizes: tuple[int, ...] = setting(
        "batch-sizes", kind="non-empty array of distinct integers >= 1",
        check=plain(batch_sizes_value), default=DEFAULT_BATCH_SIZES, example="batch-sizes = [1, 8]",
        doc=f"The batch sizes each model is checked at, cut from the samples axis. {_OVERRIDES}")
    timeout_seconds: float = setting(
        "timeout-seconds", kind="number > 0", check=plain(timeout_value),
        default=DEFAULT_TIMEOUT_SECONDS, example="timeout-seconds = 900",
        doc=f"Time limit of each model's worker; past it the model gets `timeout`. {_OVERRIDES}")
    memory_limit_mb: int | None = setting(
        "memory-limit-mb", kind="integer > 0", check=plain(memory_limit_value), default=None,
        shown="no limit", example="memory-limit-mb = 4096",
        doc="Memory limit of each model's worker, in megabytes; past it the model gets "
            f"`out-of-memory`. Leave the key out for no limit. {_OVERRIDES}")
    runtime_optimization: str = setting(
        "runtime-optimization", kind=f"one of {choices(OPTIMIZATION_LEVELS)}",
        check=plain(optimization_value), default=DEFAULT_OPTIMIZATION,
        example='runtime-optimization = "basic"',
        doc="onnxruntime's graph optimization level for the session that runs the model "
            "(`ORT_DISABLE_ALL`, `ORT_ENABLE_BASIC`, `ORT_ENABLE_EXTENDED`, `ORT_ENABLE_ALL`). "
            '`"all"` is onnxruntime\'s own default, what a deployment gets unless it sets '
            "another: set the level you deploy with. A model that fails above `\"disabled\"` but "
            f"matches there gets `optimizer-drift`. {_OVERRIDES}")
    localise_max_values: int = setting(
        "localise-max-values", DEFAULT_LOCALISE_MAX_VALUES, kind="integer > 0",
        check=plain(localise_limit_value), example="localise-max-values = 20000",
        doc="A failing model whose graph computes more values than this is not localised by "
            "marking every value as an output at once (that holds them all in memory); it is "
            "reduced by bisection over the graph's order instead, a few values per run. "
            f"{_OVERRIDES}")
    repro_max_mb: float = setting(
        "repro-max-mb", DEFAULT_REPRO_MAX_MB, kind="number > 0", check=plain(repro_size_value),
        example="repro-max-mb = 16",
        doc="The most a failing model's `<name>.repro/` folder may hold, in megabytes: past it "
            "the inputs are cut to one sample, then the folder says the subgraph or its inputs "
            "were too large to include (a generating model's failing step likewise: cut to its "
            f"failing row, then left out). {_OVERRIDES}")
    # Deployment variants built from the verified fp32 model (variants/).
    variants: tuple[str, ...] = setting(
        "variants", kind=f"array of distinct {choices(VARIANTS)}",
        check=plain(variants_value), default=(), shown="none",
        example='variants = ["int8-dynamic", "fp16"]',
        doc="Deployment variants built from the verified fp32 model with onnxruntime's own "
            f"tools and checked against PyTorch's fp32 outputs. {_OVERRIDES}")
    calibration: str = setting(
        "calibration", kind=f"one of {choices(CALIBRATIONS)}",
        check=plain(calibration_value), default="minmax", example='calibration = "entropy"',
        doc="How `int8-static` turns the activations seen on the committed samples into int8 "
            f"ranges (onnxruntime's `CalibrationMethod`). {_OVERRIDES}")
    int4: Int4 = setting("int4", Int4(), **INT4_KEY)  # settings/keys/variant_keys.py
    min_sqnr_db: float | None = setting(
        "min-sqnr-db", kind="finite number", check=plain(sqnr_value), default=None,
        shown="no threshold", example="min-sqnr-db = 25",
        doc="Below it a variant fails the model (`variant-degraded`): the worst SQNR, in dB, "
            f"over every output and batch. {_OVERRIDES}")
    min_top1_agreement: float | None = setting(
        "min-top1-agreement", kind="number in 0-1", check=plain(agreement_value), default=None,
        shown="no threshold", example="min-top1-agreement = 0.99",
        doc="Below it a variant fails the model (`variant-degraded`): the share of rows whose "
            "argmax over the last axis agrees with PyTorch's, for float outputs of rank >= 2. "
            f"{_OVERRIDES}")
    max_perplexity_ratio: float = setting("max-perplexity-ratio", DEFAULT_MAX_PERPLEXITY_RATIO,
                                          **PERPLEXITY_KEY)
    # Absolute folders inside the repository; found from the build files when the key is unset.
    python_path: SourceFolders = setting(
        "python-path", SourceFolders(), kind="array of folder paths",
        check=python_path_value, shown="found from the build configuration",
        example='python-path = ["lib"]',
        doc="Folders, relative to the repository root, searched before the root for the "
            "factory's modules (and put on `sys.path` in the worker). Left out, they are read "
            "from the build configuration: setuptools' `packages.find.where` or `package-dir`, "
            "hatch's wheel `packages` or `sources`, pdm's `package-dir`, poetry's `packages` "
            "`from` (pyproject.toml), setup.cfg's `[options]`; else `src/` when it holds the "
            f"factory's top-level package. {_OVERRIDES}")
    drift_warning_ratio: float = setting(
        "drift-warning-ratio", kind="number >= 1", check=plain(drift_ratio_value),
        default=DEFAULT_DRIFT_WARNING_RATIO, measured=False, example="drift-warning-ratio = 20",
        doc="With a baseline (`--baseline`, `baseline-report`): a model that still passes but "
            "whose max abs diff grew more than this many times over the base's, and above "
            f"`atol / 10`, gets a `drift-regression` warning. {_OVERRIDES}")
    # input -> axis -> the sizes to run that axis at.
    axis_sizes: dict[str, dict[int, tuple[int, ...]]] = setting(
        "axis-sizes", kind="table of input -> { axis -> array of sizes >= 1 }",
        check=axis_sizes_value, default={},
        shown="the committed length L, max(2, L // 2), an odd length near 3L/4, one near 5L/4",
        model_only=True, example="axis-sizes = { input_ids = { 1 = [8, 16] } }",
        doc="The lengths a declared dynamic axis other than the batch runs at (after the "
            "committed one), built by repeating the committed samples along the axis, at the "
            "smallest and the largest batch size. Every axis named must be declared in "
            "`dynamic-axes` with a dimension name (an axis derived from it follows its "
            "lengths); the batch axis (`batch-axis`, axis 0 by default) is `batch-sizes`' job.")
    # Last: its check sees `inputs`, `outputs`, `dynamic-axes` and `axis-sizes` read before it.
    generate: Generation | None = setting("generate", None, **GENERATE_KEY)
    # After `generate`, which its check requires.
    eval_tokens: Path | None = setting("eval-tokens", None, **EVAL_TOKENS_KEY)


def declared_keys() -> tuple[Key, ...]:
    """Every key, in declaration order (the valid-keys message's): ModelSpec's, then Settings'."""
    owners = ((ModelSpec, False), (Settings, True))  # Settings' keys: the top level only
    return tuple(Key(field=f.name, top_only=top, **f.metadata[DECLARED]) for owner, top in owners
                 for f in dataclasses.fields(owner) if DECLARED in f.metadata)


@dataclass(frozen=True)
class Settings:
    repo: Path
    config_path: Path
    models: tuple[ModelSpec, ...]
    env: dict[str, str] = setting(  # top level only: one zygote serves every model
        "env", {}, kind="table of name -> string", check=env_value, shown="none",
        example='env = { YOLO_OFFLINE = "1", MPLCONFIGDIR = ".cache/matplotlib" }',
        doc="Environment variables for the model's code, set before anything is imported; a "
            "value starting with `.` is a path from the repository root.")

    def relative(self, path: Path) -> str:
        """A path as the user wrote it: relative to the repository, with forward slashes."""
        try:
            return path.resolve().relative_to(self.repo.resolve()).as_posix()
        except ValueError:
            return path.as_posix()
