"""Models that attack the process they run in: crash it, hang it, exhaust its memory, read it."""

import ctypes
import os
import time

import numpy as np
import torch
from torch import nn


class Segfault(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        print("about to crash in forward", flush=True)
        ctypes.string_at(0)
        return x


class Sleeper(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        print("going to sleep in forward", flush=True)
        time.sleep(3600)
        return x


class Hog(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        print("allocating 1.25 GiB in forward", flush=True)
        hog = np.ones((1280, 1024, 256), dtype=np.float32)  # 1.25 GiB, every page written
        time.sleep(60)  # hold it: only the memory limit may end this model
        return x + float(hog[0, 0, 0])


class PrintsEnvironment(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        print(dict(os.environ), flush=True)
        return x * 2
