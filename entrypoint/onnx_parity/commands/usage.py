"""The command line asks for something that cannot be done: exit 2, naming the option."""

from __future__ import annotations

from onnx_parity.errors import UserError


class UsageError(UserError):
    """The command line asks for something that cannot be done."""

    title = "command line"
