"""onnx-parity: prove an ONNX export computes what the PyTorch model computes."""

__version__ = "0.1.0"
