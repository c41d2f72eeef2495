"""Stage 5: deployment variants (int8, fp16) of the verified fp32 model, checked against
PyTorch, and every variant finding (`variant-degraded`, `fp16-overflow`, `variant-error`)."""
