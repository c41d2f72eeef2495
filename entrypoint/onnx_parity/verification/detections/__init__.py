"""A detector's outputs judged as detections (`[model.detections]`): each image's boxes,
scores and labels read from the outputs (`images.py`), matched per label by IoU between
PyTorch and onnxruntime (`matching.py`), the detections one side alone has explained by a
near-tie of a threshold or not (`near_threshold.py`), judged per run (`judged.py`, the entry
the core's cuts.py calls) and turned into findings (`findings.py`: `detection-mismatch`,
`detection-near-threshold`).

May use: numpy, the vocabulary and settings; nothing of the core (the core calls it).
"""
