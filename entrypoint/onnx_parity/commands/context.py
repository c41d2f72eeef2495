"""What the top level (cli.py) builds once and hands every command: the real outside world.

Only cli.py makes one from the process (os.environ, sys.stdout, the HTTP client); a command
reads the environment and writes to the streams through it, so none reaches for `os` or `sys`
to find them.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:  # the GitHub client is imported only by the commands that post
    from onnx_parity.publishing import ClientFactory


@dataclass(frozen=True)
class Context:
    environ: Mapping[str, str]  # the process's environment (os.environ itself)
    stdout: TextIO
    stderr: TextIO
    client_factory: ClientFactory  # (api_url, token) -> the REST client


# One command: its parsed options and the context -> the exit code.
Handler = Callable[[argparse.Namespace, Context], int]
