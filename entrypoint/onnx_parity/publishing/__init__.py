"""Publishing: the last stage. Only this stage writes outside the run (PR comment, API)."""

import lazy_loader

# The names of __init__.pyi, each imported from its module on first use: importing the stage
# imports nothing else (no torch, no numpy until a name that needs them is used).
__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
