"""Says, into the model's log, what the worker found when this module was imported.

Evaluated before the imports below run: whether the zygote had already imported the installed
package this module imports (it should) and the repository's own helper (it must not), and
the worker's torch thread counts.
"""

import sys

PREIMPORTED = {name: name in sys.modules for name in
               ("transformers.models.bert.modeling_bert", "models.probe_helper")}

import torch  # noqa: E402
from torch import nn  # noqa: E402
from transformers import BertConfig, BertModel  # noqa: E402

from .probe_helper import WIDTH  # noqa: E402


class Probe(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(12, WIDTH)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


def build() -> nn.Module:
    print(f"probe: preimported {PREIMPORTED}", flush=True)
    print(f"probe: threads {torch.get_num_threads()} {torch.get_num_interop_threads()}",
          flush=True)
    assert BertConfig is not None
    assert BertModel is not None
    return Probe()
