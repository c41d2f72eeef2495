"""What every step of one action invocation shares, and the guard that builds it.

`guarded` is the first thing either entry point (the action, `onnx-parity comment`) runs:
`::add-mask::` for the token is the first line written, before anything could echo it; the
credentials then leave `os.environ`, so model code run by the check can never read them; every
byte written afterwards passes through the Redactor. A UserError ends the step with exit
code 2 and one annotation naming it; anything else is a bug, reported here (redacted), exit 3.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from onnx_parity.credentials import SECRET_VARIABLES, TOKEN_VARIABLES, without_credentials
from onnx_parity.errors import ExitCode, UserError
from onnx_parity.publishing.github.commands import WorkflowCommands, Writer, format_command
from onnx_parity.publishing.github.event import EventContext
from onnx_parity.publishing.github.http import GitHubClient
from onnx_parity.publishing.github.inputs import ActionInputs
from onnx_parity.publishing.github.redaction import RedactingWriter, Redactor
from onnx_parity.report import render_markdown
from onnx_parity.results import RunResult

ClientFactory = Callable[[str, str], GitHubClient]  # (api_url, token)


@dataclass(frozen=True)
class Session:
    """What every publishing step needs: built once per invocation by `guarded`."""

    environ: Mapping[str, str]  # the invocation's environment, secrets removed
    token: str
    inputs: ActionInputs
    event: EventContext
    commands: WorkflowCommands
    redact: Redactor
    client_factory: ClientFactory
    stdout: Writer
    stderr: Writer

    def renderer(self, run: RunResult, source_base: str, footer: str) -> Callable[[int], str]:
        """The run's markdown at a detail level, redacted (for the summary and the comment)."""
        def render(detail: int) -> str:
            text = render_markdown(run, source_base=source_base, detail=detail, footer=footer)
            return self.redact(text)
        return render


def guarded(environ: Mapping[str, str], client_factory: ClientFactory, stdout: Writer,
            stderr: Writer, body: Callable[[Session], int]) -> int:
    """Mask and remove the secrets, build the Session, map expected errors to exit code 2."""
    snapshot = dict(environ)  # `environ` may be os.environ itself, which is scrubbed below
    secrets = [snapshot.get(name, "") for name in SECRET_VARIABLES]
    for value in dict.fromkeys(v.strip() for v in secrets[:len(TOKEN_VARIABLES)] if v.strip()):
        stdout.write(f"::add-mask::{value}\n")
    stdout.flush()
    scrub_os_environ(secrets)
    redact = Redactor(v.strip() for v in secrets)
    out, err = RedactingWriter(stdout, redact), RedactingWriter(stderr, redact)
    commands = WorkflowCommands(out)
    try:
        return body(_session(snapshot, redact, commands, client_factory, out, err))
    except UserError as error:
        commands.emit(format_command("error", str(error), title=f"onnx-parity: {error.title}"))
        return ExitCode.INVALID
    except Exception as error:  # a bug: report it here, where the text is redacted
        report_internal_error(commands, error)
        return ExitCode.INTERNAL
    finally:
        out.flush()
        err.flush()


def report_internal_error(commands: WorkflowCommands, error: Exception) -> None:
    with commands.group("onnx-parity: internal error (traceback)"):
        commands.untrusted_text("".join(traceback.format_exception(error)))
    commands.emit(format_command(
        "error", f"{type(error).__name__}: {error}. This is a bug in onnx-parity; the "
        "traceback is in the group above. Please report it with that traceback.",
        title="onnx-parity: internal error"))


def scrub_os_environ(secrets: list[str]) -> None:
    """Delete the credential variables, and any variable holding a credential, from os.environ."""
    # A variable that merely contains a very short "secret" (a test value) is left alone.
    values = {value.strip() for value in secrets if len(value.strip()) >= 8}
    for name in list(os.environ):
        if name in SECRET_VARIABLES or any(v in os.environ[name] for v in values):
            del os.environ[name]


def _session(environ: dict[str, str], redact: Redactor, commands: WorkflowCommands,
             client_factory: ClientFactory, out: Writer, err: Writer) -> Session:
    inputs = ActionInputs.from_environ(environ)
    token = inputs.github_token or environ.get("GITHUB_TOKEN", "").strip()
    return Session(without_credentials(environ), token, inputs,
                   EventContext.from_environ(environ), commands, redact, client_factory, out, err)
