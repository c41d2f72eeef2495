"""Stage 1: what the user asked for, read from onnx-parity.toml or pyproject.toml."""
