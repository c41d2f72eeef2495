"""Stage 1: what the user asked for, read from onnx-parity.toml or pyproject.toml."""

import lazy_loader

# The names of __init__.pyi, each imported from its module on first use: importing the stage
# imports nothing else (no torch, no numpy until a name that needs them is used).
__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
