"""The sample tensors a model is checked on, read from committed files without any pickle.

Owns the formats (`files.py`: `.npy`, `.npz`, `.pt`, `.pb`, hashed as read), ONNX Model Zoo
folders with their golden outputs (`model_zoo.py`) and the sample set of a `[[model]]`
(`loading.py`, the entry). May use the rest of models/ below it (dtypes, lfs, load_errors).
"""
