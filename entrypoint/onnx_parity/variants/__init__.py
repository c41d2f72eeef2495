"""Stage 5: deployment variants (int8, fp16) of the verified fp32 model, checked against
PyTorch, and every variant finding (`variant-degraded`, `fp16-overflow`, `variant-error`)."""

import lazy_loader

# The names of __init__.pyi, each imported from its module on first use: importing the stage
# imports nothing else (no torch, no numpy until a name that needs them is used).
__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
