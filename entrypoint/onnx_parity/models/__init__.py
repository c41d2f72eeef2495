"""Stage 2: what the configuration names, made real: the model factory and its sample tensors."""
