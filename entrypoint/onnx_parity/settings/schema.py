"""The validated configuration: frozen values, built once, passed to every later stage."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

EXPORTERS = ("dynamo", "torchscript")
DEFAULT_OPSET = 18
DEFAULT_EXPORTER = "auto"
DEFAULT_ATOL = 1e-5
DEFAULT_RTOL = 1e-4
DEFAULT_BATCH_SIZES = (1, 4)
DEFAULT_TIMEOUT_SECONDS = 600.0
DEFAULT_MEMORY_LIMIT_MB: int | None = None
MIN_OPSET = 7
MAX_OPSET = 23


class ConfigError(Exception):
    """The configuration is invalid; the text names the file, the key and the fix."""


@dataclass(frozen=True)
class AllowWarning:
    match: str
    reason: str


@dataclass(frozen=True)
class ModelSpec:
    """One `[[model]]` entry with the top-level defaults applied and paths resolved."""

    name: str
    factory: str
    # Absolute paths, each checked to lie inside the repository.
    weights: Path | None
    # Either input name -> sample file, or one bundle (.npz/.pt file or Model Zoo folder).
    inputs: dict[str, Path] | Path
    outputs: tuple[str, ...]
    dynamic_axes: dict[str, dict[int, str]]
    opset: int
    exporters: tuple[str, ...]
    atol: float
    rtol: float
    batch_sizes: tuple[int, ...]
    allow_warnings: tuple[AllowWarning, ...]
    timeout_seconds: float
    memory_limit_mb: int | None


@dataclass(frozen=True)
class Settings:
    repo: Path
    config_path: Path
    models: tuple[ModelSpec, ...]

    def relative(self, path: Path) -> str:
        """A path as the user wrote it: relative to the repository, with forward slashes."""
        try:
            return path.resolve().relative_to(self.repo.resolve()).as_posix()
        except ValueError:
            return path.as_posix()
