"""`--shard K/N`: the K-th of N deterministic parts of the configured models.

Every shard of a CI matrix computes the same partition from the same inputs (the configured
models and, when the cache knows them, each model's last measured duration), so every model
lands in exactly one shard. Longest first, each to the shard with the least work so far
(ties to the lower shard); without durations every model weighs the same and the models are
dealt out by name. A model the cache has not timed yet weighs the median of those it has.
"""

from __future__ import annotations

import hashlib
import json
import re
import statistics
from collections.abc import Mapping, Sequence

from onnx_parity.errors import UserError
from onnx_parity.results import Shard
from onnx_parity.settings import ModelSpec

_SHARD = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")


class ShardError(UserError):
    """A shard that does not name one of N parts."""

    title = "shard"


def parse_shard(text: str, where: str) -> Shard:
    """"K/N" with 1 <= K <= N; `where` names the option or input in the message."""
    match = _SHARD.fullmatch(text)
    if match is None or not 1 <= int(match[1]) <= int(match[2]):
        raise ShardError(f'{where} is "{text}": write K/N with 1 <= K <= N, e.g. 2/4 for the '
                         "second of four shards (a CI matrix of shard: [1, 2, 3, 4]).")
    return Shard(int(match[1]), int(match[2]))


def partition(names: Sequence[str], count: int,
              durations: Mapping[str, float]) -> list[list[str]]:
    """The `count` parts of `names`, each in configuration order."""
    known = [durations[name] for name in names if name in durations]
    default = statistics.median(known) if known else 1.0
    weight = {name: durations.get(name, default) for name in names}
    loads = [0.0] * count
    parts: list[set[str]] = [set() for _ in range(count)]
    for name in sorted(names, key=lambda n: (-weight[n], n)):
        lightest = min(range(count), key=lambda i: (loads[i], i))
        parts[lightest].add(name)
        loads[lightest] += weight[name]
    return [[name for name in names if name in part] for part in parts]


def shard_models(specs: Sequence[ModelSpec], shard: Shard,
                 durations: Mapping[str, float]) -> tuple[ModelSpec, ...]:
    names = partition([spec.name for spec in specs], shard.count, durations)[shard.index - 1]
    return tuple(spec for spec in specs if spec.name in names)


def plan_digest(specs: Sequence[ModelSpec], durations: Mapping[str, float]) -> str:
    """What the partition was computed from: shards that disagree here disagree on models."""
    used = {spec.name: durations[spec.name] for spec in specs if spec.name in durations}
    if not used:
        return "by-name"
    text = json.dumps(used, sort_keys=True)
    return "durations:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
