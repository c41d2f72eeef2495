"""What a model's dtype changes in its settings: the tolerance defaults, and the variants.

`atol` and `rtol` left out follow the dtype the model computes in, which only its worker knows
(the factory's parameters, or `dtype`): `at_dtype` applies them there. `variants` are built from
a float32 check, so another `dtype` with them is a configuration error.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from onnx_parity.settings.keys.checks import DTYPE_TOLERANCES
from onnx_parity.settings.schema import ModelSpec
from onnx_parity.settings.values import ConfigError, Place, quoted


def at_dtype(spec: ModelSpec, dtype: str) -> ModelSpec:
    """The spec with the tolerance defaults of `dtype` where the configuration sets none; a
    float32 (or float64) model keeps the spec as it is."""
    if dtype == "float32" or dtype not in DTYPE_TOLERANCES:
        return spec
    atol, rtol = DTYPE_TOLERANCES[dtype]
    return dataclasses.replace(spec, atol=spec.atol if "atol" in spec.explicit else atol,
                               rtol=spec.rtol if "rtol" in spec.explicit else rtol)


def check_dtype_variants(fields: dict[str, Any], place: Place) -> None:
    """`variants` with a `dtype` other than float32, wherever each is set: exit 2."""
    dtype, variants = fields.get("dtype"), fields.get("variants", ())
    if dtype in (None, "float32") or not variants:
        return
    raise ConfigError(
        f'{place.here()}: keys "dtype" and "variants": variants {quoted(tuple(variants))} are '
        f'built from a float32 check, but dtype = "{dtype}". Set dtype = "float32" to check '
        "the model in float32 with its variants (the fp16 variant checks half precision), or "
        "leave `variants` out of this model.")
