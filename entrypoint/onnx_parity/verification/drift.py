"""`drift-regression`: a model that still passes but whose figures grew against the baseline.

A pass hides a slow slide towards the tolerance; comparing the max abs diff with the base
branch's catches the pull request that moved it. Below atol / 10 growth is noise (1e-8 to
1e-7 is a tenfold "growth" of rounding) and never warns.
"""

from __future__ import annotations

from onnx_parity.findings import Finding
from onnx_parity.results import BaseFigures, ModelResult
from onnx_parity.settings import ModelSpec

NOISE_FRACTION_OF_ATOL = 0.1


def drift_findings(spec: ModelSpec, model: ModelResult, base: BaseFigures) -> tuple[Finding, ...]:
    now, before = model.max_abs_diff, base.max_abs_diff
    if not model.passed or now is None or before is None:
        return ()
    floor = spec.atol * NOISE_FRACTION_OF_ATOL
    if now <= floor or now <= before * spec.drift_warning_ratio:
        return ()
    growth = f"x{now / before:.3g}" if before > 0 else "from exactly 0"
    return (Finding(
        "drift-regression",
        f"max abs diff grew from {before:.2g} on the baseline to {now:.2g} ({growth}), more "
        f"than drift-warning-ratio {spec.drift_warning_ratio:g} allows; it still passes atol "
        f"{spec.atol:g} (noise floor atol / 10 = {floor:.2g})",
    ),)
