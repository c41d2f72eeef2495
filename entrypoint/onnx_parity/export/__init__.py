"""Stage 3: the built model to ONNX with the configured exporters, and every export finding."""
