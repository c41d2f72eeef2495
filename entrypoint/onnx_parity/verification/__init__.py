"""Stage 4: the exported model in onnxruntime against PyTorch on the samples, and every output
finding (structure, declared axes, frozen evidence, comparison, golden files)."""
