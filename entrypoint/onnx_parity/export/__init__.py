"""Stage 3: turn the built model into ONNX with the configured exporters, capturing everything they say."""
