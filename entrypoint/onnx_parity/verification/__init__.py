"""Stage 4: the exported model in onnxruntime against PyTorch on the samples, and every output
finding (structure, declared axes, frozen evidence, comparison, golden files).

The modules here are the core: the check of one forward and its tensor rules (verified.py, the
entry), with the exported graph as read and where a node comes from (onnx_values.py,
node_sources.py), which the core's nondeterministic-model check names random operators with.
generation/ (decoding, thresholds, runtimes, vision-language) and localisation/ (the first
diverging node, repro folders, reduction) build on the core; the core imports neither, and
localisation/ imports nothing of generation/.
"""

import lazy_loader

# The names of __init__.pyi, each imported from its module on first use: importing the stage
# imports nothing else (no torch, no numpy until a name that needs them is used).
__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
