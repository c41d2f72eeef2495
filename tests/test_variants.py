"""Deployment variants (int8-dynamic, int8-static, fp16) through real onnxruntime quantization.

Every model here is a tiny real model (tests/fixture_repo/models/variants.py) exported by the
real exporter, verified in fp32, then quantized with onnxruntime's own tools and compared with
PyTorch's fp32 outputs. The CLI test at the end checks report.json, the sidecars and the comment.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from fixture_repo.harness import FIXTURE_REPO, CliRun, copy_repo, line_of, run_cli, write_samples
from onnx_parity.findings import Severity
from onnx_parity.report.markdown import render_markdown
from onnx_parity.report.serialization import run_from_json

VARIANTS_PY = FIXTURE_REPO / "models" / "variants.py"


@pytest.fixture(scope="module")
def samples(model_repo: Path) -> Path:
    rng = np.random.default_rng(7)
    folder = model_repo / "samples"
    np.save(folder / "images16.npy", rng.standard_normal((16, 3, 16, 16)).astype(np.float32))
    np.save(folder / "images4.npy", rng.standard_normal((4, 3, 16, 16)).astype(np.float32))
    np.save(folder / "vectors16.npy", rng.standard_normal((16, 8)).astype(np.float32))
    return folder


def config(factory: str, inputs: str, variants: str, extra: str = "") -> str:
    return (f"batch-sizes = [1, 4]\n[[model]]\nname = \"v\"\nfactory = \"models.variants:{factory}\"\n"
            f"inputs = {inputs}\ndynamic-axes = {{ {inputs.split()[1]} = {{ 0 = \"batch\" }} }}\n"
            f"variants = {variants}\n{extra}")


def variant(result, name):
    return next(v for v in result.variants if v.name == name)


def codes(result, variant_name=None):
    return [f.code for f in result.findings
            if variant_name is None or f.details.get("variant") == variant_name]


@pytest.mark.usefixtures("samples")
def test_small_cnn_keeps_its_scores_in_every_variant(check_model):
    result = check_model(config("SmallCNN", '{ image = "samples/images16.npy" }',
                                '["int8-dynamic", "int8-static", "fp16"]',
                                "min-sqnr-db = 25\nmin-top1-agreement = 0.9\n"))
    assert result.passed, result.findings
    assert [v.name for v in result.variants] == ["int8-dynamic", "int8-static", "fp16"]
    for built in result.variants:
        assert built.skipped is None
        assert built.size_bytes
        assert built.sha256
        assert built.fp32_size_bytes > 0
        assert built.latency_ms
        assert built.fp32_latency_ms
        assert built.worst_sqnr_db is not None
        assert built.worst_sqnr_db > 25
        assert built.worst_top1_agreement is not None
        assert built.worst_top1_agreement >= 0.9
        assert {c.batch_size for c in built.comparisons} == {1, 4}  # every batch fp32 ran
        assert all(c.input_shapes["image"][0] == c.batch_size for c in built.comparisons)
        assert built.notes == ()  # 16 samples: no calibration note
    assert variant(result, "fp16").worst_sqnr_db > variant(result, "int8-static").worst_sqnr_db
    assert variant(result, "fp16").size_bytes < variant(result, "fp16").fp32_size_bytes
    assert variant(result, "int8-static").settings["calibration"] == "minmax"


@pytest.mark.usefixtures("samples")
def test_few_calibration_samples_get_a_note_and_no_threshold_means_no_verdict(check_model):
    result = check_model(config("SmallCNN", '{ image = "samples/images4.npy" }',
                                '["int8-static"]', 'calibration = "entropy"\n'))
    assert result.passed
    assert codes(result, "int8-static") == []
    note = variant(result, "int8-static").notes
    assert len(note) == 1
    assert "calibrated on 4 committed sample(s), fewer than 16" in note[0]
    assert variant(result, "int8-static").settings["calibration"] == "entropy"


@pytest.mark.usefixtures("samples")
def test_outlier_channel_fails_min_sqnr_at_that_layers_line(check_model):
    result = check_model(config("OutlierChannel", '{ image = "samples/images16.npy" }',
                                '["int8-static"]', "min-sqnr-db = 25\n"))
    static = variant(result, "int8-static")
    assert static.worst_sqnr_db is not None
    assert static.worst_sqnr_db < 25
    assert all(c.passed for c in result.comparisons)  # fp32 itself is fine
    (finding,) = [f for f in result.findings if f.code == "variant-degraded"]
    assert finding.severity == Severity.ERROR
    assert not result.passed
    assert (finding.file, finding.line) == (
        "models/variants.py", line_of(VARIANTS_PY, "x = torch.relu(self.mix(x))"))
    assert "int8-static" in finding.message
    assert "< `min-sqnr-db` 25 dB" in finding.message
    assert "The tensors that lose the most" in finding.message
    worst = finding.details["worst_tensors"]
    assert 1 <= len(worst) <= 3
    assert worst[0]["sqnr_db"] < 25
    assert finding.details["misses"][0]["figure"] == "sqnr_db"


@pytest.mark.usefixtures("samples")
def test_activation_beyond_float16_is_fp16_overflow_at_its_line(check_model):
    result = check_model(config("Amplified", '{ x = "samples/vectors16.npy" }', '["fp16"]'))
    (finding,) = [f for f in result.findings if f.code == "fp16-overflow"]
    assert finding.severity == Severity.ERROR
    assert not result.passed
    assert (finding.file, finding.line) == (
        "models/variants.py", line_of(VARIANTS_PY, "big = torch.relu(self.fc(x)) * 1e6"))
    assert finding.details["largest"] > 65504
    assert "65504" in finding.message
    assert finding.details["variant"] == "fp16"


@pytest.mark.usefixtures("samples")
def test_an_operator_int8_cannot_run_is_variant_error_and_fp32_stands(check_model):
    result = check_model(config("HalfLinear", '{ x = "samples/vectors16.npy" }',
                                '["int8-dynamic", "fp16"]', "atol = 1e-2\nrtol = 1e-2\n"))
    (finding,) = [f for f in result.findings if f.code == "variant-error"]
    assert finding.details["variant"] == "int8-dynamic"
    assert "DynamicQuantizeLinear" in finding.message
    assert "float16" in finding.message
    assert "fp32 model's verdict and figures are unaffected" in finding.message
    assert result.comparisons
    assert all(c.passed for c in result.comparisons)
    assert variant(result, "int8-dynamic").size_bytes is None
    assert variant(result, "fp16").size_bytes
    assert codes(result, "fp16") == []


@pytest.mark.usefixtures("samples")
def test_a_model_that_fails_parity_gets_no_variants(check_model):
    result = check_model(config("SmallCNN", '{ image = "samples/images16.npy" }',
                                '["int8-dynamic"]', "atol = 0.0\nrtol = 0.0\n"))
    assert "parity-mismatch" in codes(result)
    (skipped,) = result.variants
    assert skipped.size_bytes is None
    assert "did not pass" in (skipped.skipped or "")


# ---------------------------------------------------------------------------------------------
# Through the real CLI: report.json, the sidecars, the comment


CLI_CONFIG = """
batch-sizes = [1, 4]
variants = ["int8-dynamic", "int8-static", "fp16"]

[[model]]
name = "cnn"
factory = "models.variants:SmallCNN"
inputs = { image = "samples/images16.npy" }
dynamic-axes = { image = { 0 = "batch" } }
min-sqnr-db = 25

[[model]]
name = "outlier"
factory = "models.variants:OutlierChannel"
inputs = { image = "samples/images16.npy" }
dynamic-axes = { image = { 0 = "batch" } }
variants = ["int8-static"]
min-sqnr-db = 25
"""


# Two models and four quantised variants calibrated and checked through the CLI: 5 s of CPU,
# 8 to 20 s on a shared machine, so the tests reading this run are `slow`; CI runs them.
@pytest.fixture(scope="module")
def cli_run(tmp_path_factory: pytest.TempPathFactory) -> CliRun:
    root = tmp_path_factory.mktemp("variants")
    repo = copy_repo(root / "repo")
    write_samples(repo)
    rng = np.random.default_rng(7)
    np.save(repo / "samples" / "images16.npy",
            rng.standard_normal((16, 3, 16, 16)).astype(np.float32))
    (repo / "onnx-parity.toml").write_text(CLI_CONFIG, encoding="utf-8")
    return run_cli("check", "--repo", str(repo), cwd=root, out=root / "out")


@pytest.mark.slow
def test_cli_writes_each_variant_and_its_record(cli_run: CliRun) -> None:
    assert cli_run.code == 1, cli_run.stderr  # the outlier model fails on purpose
    models = cli_run.models()
    cnn = models["cnn"]
    assert [v["name"] for v in cnn["variants"]] == ["int8-dynamic", "int8-static", "fp16"]
    for entry in cnn["variants"]:
        assert entry["file"] == f"cnn.{entry['name']}.onnx"
        assert (cli_run.folder / entry["file"]).stat().st_size == entry["size_bytes"]
        record = json.loads((cli_run.folder / f"cnn.{entry['name']}.parity.json").read_text())
        assert record["made_from"] == {"onnx_file": "cnn.onnx",
                                       "onnx_sha256": cnn["onnx_sha256"],
                                       "onnx_files": cnn["onnx_files"]}
        assert record["sha256"] == entry["sha256"]
        # A small model is one file: no external data beside it or its variants.
        assert [f["file"] for f in entry["files"]] == [entry["file"]]
        assert entry["files"][0]["sha256"] == entry["sha256"]
        assert record["passed"] is True
        assert record["settings"]["min_sqnr_db"] == 25
        assert {c["batch_size"] for c in record["comparisons"]} == {1, 4}
        assert all(isinstance(c["sqnr_db"], float) and math.isfinite(c["sqnr_db"])
                   for c in record["comparisons"])
    outlier = models["outlier"]["variants"][0]
    assert [f["code"] for f in outlier["findings"]] == ["variant-degraded"]
    assert json.loads((cli_run.folder / "outlier.int8-static.parity.json").read_text())[
        "passed"] is False


@pytest.mark.slow
def test_the_comment_shows_the_deployment_variants_table(cli_run: CliRun) -> None:
    markdown = (cli_run.folder / "report.md").read_text(encoding="utf-8")
    table = markdown[markdown.index("#### Deployment variants"):]
    assert "| Model | Variant | Size vs fp32 | SQNR (worst) | Top-1 agreement" in table
    assert "| ✅ | `cnn` | int8-dynamic | " in table
    assert "| ❌ | `outlier` | int8-static | " in table
    section = markdown[markdown.index("<summary>❌ <b>outlier</b>"):]
    assert "`variant-degraded` at `models/variants.py:" in section
    assert "x = torch.relu(self.mix(x))" in section  # the source line, shown in the comment


@pytest.mark.slow
def test_report_json_round_trips_the_variants(cli_run: CliRun) -> None:
    run = run_from_json(cli_run.report())
    again = render_markdown(run)
    written = (cli_run.folder / "report.md").read_text(encoding="utf-8")
    assert again.splitlines() == written.splitlines()[:-2]  # the same, but for the footer


# ---------------------------------------------------------------------------------------------
# The keys: top level and per model, each mistake one paragraph naming the key and the fix


SETTINGS_MODEL = """
[[model]]
name = "m"
factory = "models.net:build"
inputs = { input = "samples/x.npy" }
"""


def settings_of(repo: Path, text: str):
    from onnx_parity.settings.loading import load_settings

    (repo / "onnx-parity.toml").write_text(text, encoding="utf-8")
    return load_settings(repo)


def test_variant_keys_default_to_none_and_are_overridden_per_model(tmp_path: Path) -> None:
    (plain,) = settings_of(tmp_path, SETTINGS_MODEL).models
    assert (plain.variants, plain.calibration) == ((), "minmax")
    assert (plain.min_sqnr_db, plain.min_top1_agreement) == (None, None)
    text = ('variants = ["fp16"]\nmin-sqnr-db = 30\n' + SETTINGS_MODEL
            + 'variants = ["int8-static", "int8-dynamic"]\ncalibration = "percentile"\n'
            "min-top1-agreement = 0.99\n")
    (model,) = settings_of(tmp_path, text).models
    assert model.variants == ("int8-static", "int8-dynamic")
    assert (model.calibration, model.min_sqnr_db, model.min_top1_agreement) == (
        "percentile", 30.0, 0.99)


@pytest.mark.parametrize(("line", "says"), [
    ('variants = ["int8_static"]', 'unknown deployment variant "int8_static"; did you mean '
     '"int8-static"? Use one of "int8-dynamic", "int8-static", "fp16", "int4".'),
    ('variants = "fp16"', 'expected a list of deployment variants, e.g. variants = '
     '["int8-dynamic", "fp16"]'),
    ('variants = ["fp16", "fp16"]', "fp16 appears more than once; list each variant once."),
    ('calibration = "histogram"', 'unknown calibration method "histogram".'),
    ("min-sqnr-db = inf", "inf is not a finite number."),
    ("min-top1-agreement = 1.5", "1.5 is not between 0 and 1."),
    ("min-top1-agreement = true", "expected a share between 0 and 1"),
])
def test_a_bad_variant_key_names_the_key_and_the_fix(tmp_path: Path, line: str,
                                                     says: str) -> None:
    from onnx_parity.settings.values import ConfigError

    with pytest.raises(ConfigError) as raised:
        settings_of(tmp_path, SETTINGS_MODEL + line + "\n")
    key = line.split(" =")[0]
    assert f'onnx-parity.toml: model "m": key "{key}": ' in str(raised.value)
    assert says in str(raised.value)
