"""Bad configurations, models, samples and outputs, through the real `onnx-parity check`.

Configuration mistakes end the command before any worker starts (exit 2, one paragraph naming
the file, the key and the fix): one fast CLI run each. Model, sample and output mistakes are
model-level: they all sit in tests/fixture_repo/configs/bad-inputs.toml next to a good model and go
through ONE CLI run (one zygote warm-up); each then gets its own test against that run's report.

Tests marked `PRODUCT BUG` fail today on purpose: they state what the product should do.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from fixture_repo.harness import (
    FIXTURE_REPO,
    CliRun,
    Payload,
    copy_repo,
    line_of,
    run_cli,
    write_bad_files,
)

CONFIG = "onnx-parity.toml"
MODEL = """
[[model]]
name = "m"
factory = "models.good:Linear"
inputs = { x = "samples/x.npy" }
"""


# ---------------------------------------------------------------------------------------------
# Configuration and command line: exit 2, no worker, one paragraph with file, key and fix


@dataclass(frozen=True)
class ConfigCase:
    toml: str | bytes | None  # written as onnx-parity.toml (None: the repository has none)
    says: tuple[str, ...]  # fragments the message must hold: what, where, fix
    args: tuple[str, ...] = ()
    setup: Callable[[Path, Path], None] | None = None  # (repo, a folder outside it)
    env: tuple[tuple[str, str], ...] = ()  # set in the command's environment
    bug: str | None = None  # PRODUCT BUG: why this fails today


def _link_outside(repo: Path, outside: Path) -> None:
    (outside / "x.npy").write_bytes(b"outside the repository")
    (repo / "samples").mkdir()
    (repo / "samples" / "elsewhere").symlink_to(outside, target_is_directory=True)


def _model(**keys: str) -> str:
    """The one-model configuration with `keys` (TOML values) added to its [[model]] table."""
    return MODEL + "".join(f"{key} = {value}\n" for key, value in keys.items())


WHERE_M = f'{CONFIG}: model "m": key'
CONFIG_CASES: dict[str, ConfigCase] = {
    "not-toml": ConfigCase(
        "[[model]\nname = 'm'\n",
        (CONFIG, "line 1", "not valid TOML", "Fix the syntax")),
    "inline-table-over-lines": ConfigCase(
        '[[model]]\nname = "m"\nfactory = "models.good:Linear"\ninputs = { x = "samples/x.npy",\n'
        '           y = "samples/y.npy" }\n',
        (f"{CONFIG}: line 4", "the inline table of `inputs` spans lines 4-5",
         "on one line only", '[model.inputs]\nx = "samples/x.npy"\ny = "samples/y.npy"')),
    "not-utf8": ConfigCase(
        b"atol = 1e-5 # \xff\n" + MODEL.encode(),
        (CONFIG, "not UTF-8", "Save the file as UTF-8")),
    "unknown-key-atoll": ConfigCase(
        _model(atoll="1e-5"),
        (f'{WHERE_M} "atoll"', "unknown key", 'did you mean "atol"?', "Valid keys here")),
    "unknown-top-key": ConfigCase(
        "batch_size = [1]\n" + MODEL,
        (f'{CONFIG}: key "batch_size"', 'did you mean "batch-sizes"?')),
    "model-key-at-top": ConfigCase(
        'factory = "models.good:Linear"\n' + MODEL,
        (f'{CONFIG}: key "factory"', "belongs inside a [[model]]", "Move it")),
    "wrong-type-opset": ConfigCase(
        _model(opset='"18"'),
        (f'{WHERE_M} "opset"', "expected an integer opset", "opset = 18", 'got a string "18"')),
    "wrong-type-bool-as-int": ConfigCase(
        "memory-limit-mb = true\n" + MODEL,
        (f'{CONFIG}: key "memory-limit-mb"', "positive whole number of megabytes",
         "got a boolean true")),
    "empty-model-list": ConfigCase(
        "model = []\n",
        (f'{CONFIG}: key "model"', "non-empty list of [[model]] entries",
         "Declare each model in its own [[model]] section")),
    "no-models": ConfigCase(
        "atol = 1e-5\n",
        (CONFIG, "no models are declared", "Add at least one [[model]]")),
    "duplicate-names": ConfigCase(
        MODEL + MODEL,
        (f'{CONFIG}: model[1]: key "name"', '"m" is already used', "must be unique")),
    "missing-factory": ConfigCase(
        '[[model]]\nname = "m"\ninputs = { x = "samples/x.npy" }\n',
        (f'{WHERE_M} "factory"', "missing", 'factory = "models.net:build_model"')),
    "factory-not-module-colon-callable": ConfigCase(
        MODEL.replace("models.good:Linear", "models/good.py"),
        (f'{WHERE_M} "factory"', 'not of the form "module:callable"', '"models.cnn:SmallCNN"')),
    "batch-sizes-empty": ConfigCase(
        "batch-sizes = []\n" + MODEL,
        (f'{CONFIG}: key "batch-sizes"', "non-empty list of positive integers",
         "batch-sizes = [1, 4]")),
    "batch-sizes-zero": ConfigCase(
        _model(**{"batch-sizes": "[0, 4]"}),
        (f'{WHERE_M} "batch-sizes"', "[0, 4] contains a size below 1", "batch-sizes = [1, 4]")),
    "batch-sizes-negative": ConfigCase(
        "batch-sizes = [-2]\n" + MODEL,
        (f'{CONFIG}: key "batch-sizes"', "contains a size below 1", "positive integers")),
    "atol-negative": ConfigCase(
        _model(atol="-1e-5"),
        (f'{WHERE_M} "atol"', "is negative", "Use a tolerance >= 0")),
    "rtol-not-a-number": ConfigCase(
        'rtol = "small"\n' + MODEL,
        (f'{CONFIG}: key "rtol"', "expected a number", 'got a string "small"')),
    "atol-nan": ConfigCase(
        _model(atol="nan"),
        (f'{WHERE_M} "atol"', "not a finite number", "atol = 1e-5")),
    "unknown-exporter": ConfigCase(
        _model(exporter='"onnxscript"'),
        (f'{WHERE_M} "exporter"', 'unknown exporter "onnxscript"', ('"auto", "dynamo", '
         '"torchscript"'))),
    "non-ascii-value-on-an-ascii-console": ConfigCase(
        _model(exporter='"dÿnamo"'),
        (f'{WHERE_M} "exporter"', 'unknown exporter "d\\xffnamo"', 'did you mean "dynamo"?'),
        env=(("PYTHONIOENCODING", "ascii"),)),
    "opset-too-high": ConfigCase(
        _model(opset="99"),
        (f'{WHERE_M} "opset"', "opset 99 is outside the supported range", "from 7 to 23")),
    "opset-too-low": ConfigCase(
        "opset = 3\n" + MODEL,
        (f'{CONFIG}: key "opset"', "opset 3 is outside", "from 7 to 23")),
    "dynamic-axes-unknown-name": ConfigCase(
        _model(outputs='["y"]', **{"dynamic-axes": '{ z = { 0 = "batch" } }'}),
        (f'{WHERE_M} "dynamic-axes"', '"z" is neither an input nor an output', ('Name one of "x", '
         '"y"'))),
    "dynamic-axes-not-an-axis": ConfigCase(
        _model(**{"dynamic-axes": '{ x = { first = "batch" } }'}),
        (f'{WHERE_M} "dynamic-axes.x"', 'axis "first" is not an axis index', '{ 0 = "batch" }')),
    "timeout-zero": ConfigCase(
        _model(**{"timeout-seconds": "0"}),
        (f'{WHERE_M} "timeout-seconds"', "not a positive number of seconds", "Use a value > 0")),
    "path-dot-dot": ConfigCase(
        MODEL.replace("samples/x.npy", "samples/../../x.npy"),
        (f'{WHERE_M} "inputs.x"', 'path "samples/../../x.npy" leads outside the repository',
         "commit the file inside the repository")),
    "path-absolute": ConfigCase(
        MODEL.replace("samples/x.npy", "/etc/x.npy"),
        (f'{WHERE_M} "inputs.x"', 'path "/etc/x.npy" is absolute', ("relative to the repository "
         "root"))),
    "weights-path-home": ConfigCase(
        _model(weights='"~/weights.pt"'),
        (f'{WHERE_M} "weights"', 'path "~/weights.pt" is absolute', "relative to the repository")),
    "symlink-outside": ConfigCase(
        MODEL.replace("samples/x.npy", "samples/elsewhere/x.npy"),
        (f'{WHERE_M} "inputs.x"', "goes through a symlink that points outside the repository",
         "commit the file inside the repository"),
        setup=_link_outside),
    "sample-suffix-unknown": ConfigCase(
        MODEL.replace("samples/x.npy", "samples/x.csv"),
        (f'{WHERE_M} "inputs.x"', "not a sample file we can read", "numpy.save")),
    "model-name-path": ConfigCase(
        MODEL.replace('name = "m"', 'name = "../evil"'),
        (f'{CONFIG}: model[0]: key "name"', "cannot be used as a file name", "e.g. \"small-cnn\"")),
    "model-name-leading-dash": ConfigCase(
        MODEL.replace('name = "m"', 'name = "-m"'),
        (f'{CONFIG}: model[0]: key "name"', "cannot be used as a file name")),
    "unknown-model-option": ConfigCase(
        MODEL,
        ("--model nope", "no model of that name in onnx-parity.toml", "models: m",
         "Fix: use one of those names"),
        args=("--model", "nope")),
    "repo-missing": ConfigCase(
        None,
        ("--repo does-not-exist", "no such folder", "Fix: pass the repository root"),
        args=("--repo", "does-not-exist")),
    "config-option-missing": ConfigCase(
        None,
        ("--config nowhere.toml", "does not exist", "Pass the path of an existing"),
        args=("--config", "nowhere.toml")),
    "no-config-at-all": ConfigCase(
        None,
        ("No onnx-parity configuration", "looked for onnx-parity.toml",
         "Create onnx-parity.toml at the repository root")),
    "jobs-zero": ConfigCase(
        MODEL,
        ("--jobs 0", "must be at least 1"),
        args=("--jobs", "0")),
}


def _config_params() -> list[object]:
    return [pytest.param(case, id=name, marks=[pytest.mark.xfail(
                reason=f"PRODUCT BUG: {case.bug}", strict=True)] if case.bug else [])
            for name, case in CONFIG_CASES.items()]


@pytest.mark.parametrize("case", _config_params())
def test_configuration_mistake_exits_2_naming_file_key_and_fix(case: ConfigCase,
                                                               tmp_path: Path) -> None:
    repo, outside = tmp_path / "repo", tmp_path / "outside"
    repo.mkdir()
    outside.mkdir()
    if case.toml is not None:
        raw = case.toml if isinstance(case.toml, bytes) else case.toml.encode("utf-8")
        (repo / CONFIG).write_bytes(raw)
    if case.setup:
        case.setup(repo, outside)
    done = run_cli("check", *case.args, cwd=repo, out=tmp_path / "out", env=dict(case.env))
    assert done.code == 2, done
    assert "Traceback" not in done.stderr
    message = done.stderr.strip()
    assert message.startswith("onnx-parity: "), message
    for fragment in case.says:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    assert done.stdout == ""  # no worker started, so no progress was printed
    assert not (tmp_path / "out").exists()  # nothing half-written


# ---------------------------------------------------------------------------------------------
# Models, samples and outputs: one CLI run over configs/bad-inputs.toml


@dataclass(frozen=True)
class BadRun:
    repo: Path
    markers: Path
    done: CliRun
    models: dict[str, dict]


@pytest.fixture(scope="module")
def bad_run(tmp_path_factory: pytest.TempPathFactory) -> BadRun:
    root = tmp_path_factory.mktemp("bad-inputs")
    repo, markers = copy_repo(root / "repo"), root / "markers"
    markers.mkdir()
    write_bad_files(repo, markers)
    done = run_cli("check", "--config", "configs/bad-inputs.toml", "--jobs", "2", cwd=repo,
                   out=root / "out")
    print(f"\nbad-inputs run: {len(done.models())} models in {done.seconds:.1f} s; "
          f"{len(CONFIG_CASES)} configuration mistakes")
    return BadRun(repo, markers, done, done.models())


def _declared_models() -> list[str]:
    import tomllib

    config = tomllib.loads((FIXTURE_REPO / "configs" / "bad-inputs.toml").read_text("utf-8"))
    return [model["name"] for model in config["model"]]


@pytest.mark.slow
def test_the_run_fails_cleanly_and_the_good_model_still_passes(bad_run: BadRun) -> None:
    assert bad_run.done.code == 1, bad_run.done.stderr
    assert "Traceback" not in bad_run.done.stderr
    good = bad_run.models["good"]
    assert good["passed"]
    assert good["findings"] == []
    assert good["max_abs_diff"] < 1e-5
    assert {c["batch_size"] for c in good["comparisons"]} == {1, 3}


@pytest.mark.slow
def test_every_declared_model_is_in_every_output(bad_run: BadRun) -> None:
    names = _declared_models()
    out = bad_run.done.out
    assert out is not None
    assert list(bad_run.models) == names
    markdown = (out / "report.md").read_text(encoding="utf-8")
    table = [line for line in markdown.splitlines() if line.startswith("| ") and "`" in line]
    assert [line.split("`")[1] for line in table] == names
    for name in names:
        assert (out / f"{name}.log").is_file(), name
        assert (out / f"{name}.parity.json").is_file(), name
        assert f"FAIL  {name} " in bad_run.done.stdout or f"PASS  {name} " in bad_run.done.stdout


@dataclass(frozen=True)
class ModelCase:
    """What one bad model must produce: a finding with this code whose text says it all."""

    code: str
    says: tuple[str, ...]  # fragments of the message (what, where)
    fix: tuple[str, ...] = ()  # fragments of the finding's one fix
    source: tuple[str, str] | None = None  # (file, text on the line) the finding points at
    evidence: tuple[str, ...] = ()
    bug: str | None = None  # PRODUCT BUG: why this fails today


BROKEN = "models/broken.py"
MODEL_CASES: dict[str, ModelCase] = {
    "module-missing": ModelCase(
        "load-error", ('factory "models.nope:Net"', 'module "models.nope" was not found'),
        fix=("Check the module path",)),
    "attribute-missing": ModelCase(
        "load-error", ('factory "models.good:Linaer"', '"Linaer" is not defined in models.good',
                       'Did you mean "Linear"?')),
    "factory-raises": ModelCase(
        "load-error", ('factory "models.broken:raises" raised', ("ValueError: factory broke on "
                       "purpose")), fix=("Make the factory run on its own",),
        source=(BROKEN, 'raise ValueError("factory broke on purpose")')),
    "import-raises": ModelCase(
        "load-error", ('importing "models.import_fails" failed', "ImportError"),
        fix=("Make the factory run on its own",),
        source=("models/import_fails.py", "raise ImportError")),
    "not-a-module": ModelCase(
        "load-error", (('factory "models.broken:not_a_module" returned str, not a '
                       "torch.nn.Module"),),
        fix=("Make the factory return the model instance",)),
    "factory-exits": ModelCase(
        "load-error", ("SystemExit", "raised"), source=(BROKEN, "sys.exit(3)")),
    "weights-mismatch": ModelCase(
        "load-error", ('weights "weights/linear.pt" do not match the model',
                       "missing keys `head.bias`, `head.weight`",
                       "unexpected keys `fc.bias`, `fc.weight`"),
        fix=("Save the state_dict of the same architecture",)),
    "weights-missing": ModelCase(
        "load-error", ('weights "weights/never-committed.pt" does not exist',),
        fix=("Commit the file or correct `weights`",)),
    "weights-malicious": ModelCase(
        "load-error", ('weights "weights/evil.pt" were refused', "posix.system",
                       "never runs code from a pickle"), fix=("Save a plain state_dict",)),
    "forward-raises": ModelCase(
        "runtime-error", ("RuntimeError: forward broke on purpose",),
        source=(BROKEN, 'raise RuntimeError("forward broke on purpose")')),
    "forward-exits": ModelCase(
        "crash", ("left no result", "os._exit in model code?")),
    "sample-missing": ModelCase(
        "load-error", ("Sample file samples/missing.npy", "config key `inputs.x`",
                       "does not exist"), fix=("Commit the file, or correct the path",)),
    "sample-truncated": ModelCase(
        "load-error", ("Sample file samples/truncated.npy", "`inputs.x`",
                       "could not be read as a .npy array"),
        fix=("probably truncated", "save it again")),
    "sample-objects": ModelCase(
        "load-error", ("Sample file samples/objects.npy", "`inputs.x`",
                       "holds pickled Python objects", "would execute code"),
        fix=("Save a numeric array",)),
    "sample-malicious-pt": ModelCase(
        "load-error", ("Sample file samples/evil.pt", "`inputs.x`", "would execute code",
                       "GLOBAL posix.system"), fix=("Save plain tensors only",)),
    "sample-empty": ModelCase(
        "load-error", ("Sample file samples/empty.npy", "`inputs.x`", "is empty (0 bytes)"),
        fix=("Commit the real file",)),
    "sample-wrong-shape": ModelCase(
        "runtime-error", ("mat1 and mat2 shapes cannot be multiplied",)),
    "sample-wrong-dtype": ModelCase(
        "runtime-error", ("must have the same dtype",)),
    "input-not-taken": ModelCase(
        "load-error", ('`inputs` names "extra"', 'its parameters: "x"'),
        fix=("Name each input after a parameter of forward",)),
    "input-not-given": ModelCase(
        "load-error", ('forward needs input(s) "mask"',),
        fix=("Add a sample file for each to `inputs`",)),
    "axis-beyond-rank": ModelCase(
        "load-error", ('`dynamic-axes` declares axis 5 of input "x"', "rank 2", "shape [4, 12]"),
        fix=("Number axes from 0 up to 1",)),
}


def _model_params() -> list[object]:
    return [pytest.param(name, case, id=name, marks=[pytest.mark.xfail(
                reason=f"PRODUCT BUG: {case.bug}", strict=True)] if case.bug else [])
            for name, case in MODEL_CASES.items()]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "case"), _model_params())
def test_bad_model_or_sample_gets_a_finding_saying_what_where_and_fix(
        bad_run: BadRun, name: str, case: ModelCase) -> None:
    model = bad_run.models[name]
    assert not model["passed"]
    assert "frozen-dimension" not in [f["code"] for f in model["findings"]], \
        "a model whose samples or code fail must not be blamed on a frozen batch"
    found = [f for f in model["findings"] if f["code"] == case.code]
    assert found, [(f["code"], f["message"]) for f in model["findings"]]
    finding = found[0]
    for fragment in case.says:
        assert fragment in finding["message"], f"{fragment!r} not in {finding['message']!r}"
    assert "Fix:" not in finding["message"]
    for fragment in case.fix:
        assert fragment in finding["fix"], f"{fragment!r} not in {finding['fix']!r}"
    for fragment in case.evidence:
        assert fragment in finding.get("evidence", ""), finding
    assert finding["fix"]
    if case.source:
        file, text = case.source
        assert (finding.get("file"), finding.get("line")) == (file, line_of(FIXTURE_REPO / file, text))
        assert text in finding["details"]["source"]  # the comment shows the offending line


@pytest.mark.slow
def test_an_inputs_table_is_matched_to_forward_by_name_not_by_order(bad_run: BadRun) -> None:
    model = bad_run.models["inputs-reordered"]  # inputs = { scale = ..., x = ... }
    assert model["passed"], [(f["code"], f["message"]) for f in model["findings"]]


@pytest.mark.slow
def test_no_pickle_payload_ever_ran(bad_run: BadRun, tmp_path: Path) -> None:
    import numpy as np
    import torch

    assert sorted(os.listdir(bad_run.markers)) == []
    for name in ("weights-malicious", "sample-malicious-pt", "sample-objects"):
        assert not bad_run.models[name]["passed"]
    # The payloads are live: loading them the unsafe way creates the files.
    live = tmp_path / "live"
    torch.save(Payload(live.with_suffix(".pt-ran")), live.with_suffix(".pt"))
    torch.load(live.with_suffix(".pt"), weights_only=False)
    objects = np.load(bad_run.repo / "samples" / "objects.npy", allow_pickle=True)
    assert live.with_suffix(".pt-ran").exists()
    assert (bad_run.markers / "objects-npy-ran").exists()
    assert objects.dtype == object


@pytest.mark.slow
def test_nan_and_inf_in_samples_are_a_note_and_the_model_is_still_compared(
        bad_run: BadRun) -> None:
    model = bad_run.models["sample-nan-inf"]
    assert [(f["code"], f["severity"]) for f in model["findings"]] == [("nan-or-inf", "note")]
    assert "samples/nan-inf.npy holds 1 NaN and 1 Inf values" in model["findings"][0]["message"]
    assert {c["batch_size"] for c in model["comparisons"]} == {1, 3}
    assert model["passed"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["out-nested-tuple", "out-dict", "out-list", "out-with-none",
                                  "out-mixed"])
def test_structured_outputs_pass_leaf_by_leaf(bad_run: BadRun, name: str) -> None:
    model = bad_run.models[name]
    assert model["passed"], model["findings"]
    leaves = {"out-nested-tuple": 3, "out-dict": 2, "out-list": 2, "out-with-none": 2,
              "out-mixed": 3}[name]
    assert len({c["output"] for c in model["comparisons"]}) == leaves
    assert model["max_abs_diff"] < 1e-5
