"""Stage 4: PyTorch against onnxruntime on the samples, as values that carry their evidence.

Pure numpy: nothing here imports torch or onnxruntime; the engine runs both and hands the
outputs in.
"""
