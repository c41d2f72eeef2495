"""Keep the token out of everything the action writes, as a second line behind `::add-mask::`.

The runner's mask only covers the live log. The step summary, the outputs, the report files and
the PR comment are not masked by anyone, so every one of them passes through a `Redactor` that
replaces the token and the forms it travels in (base64 as git's `http.extraheader` carries it,
base64 of the bare token, percent-encoding as in a URL) with `***`.
"""

from __future__ import annotations

import base64
import urllib.parse
from collections.abc import Iterable
from pathlib import Path

from onnx_parity.publishing.github.commands import Writer

REPLACEMENT = "***"
# Files of the output folder that hold text; the .onnx models are binary and made by the engine.
TEXT_SUFFIXES = (".json", ".md", ".txt", ".log", ".csv", ".html")


class Redactor:
    def __init__(self, secrets: Iterable[str]) -> None:
        forms: set[str] = set()
        for secret in secrets:
            if secret:
                forms.update(_encodings(secret))
        # Longest first, so a form containing another is replaced whole.
        self._forms = sorted(forms, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for form in self._forms:
            if form in text:
                text = text.replace(form, REPLACEMENT)
        return text

    def __bool__(self) -> bool:
        return bool(self._forms)

    def file(self, path: Path) -> bool:
        """Rewrite a text file in place if it holds a secret; True when it did."""
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return False
        clean = self(text)
        if clean != text:
            path.write_text(clean, encoding="utf-8")
        return clean != text

    def folder(self, folder: Path) -> list[Path]:
        """Redact every text file under `folder`; the files that had to change."""
        if not self._forms or not folder.is_dir():
            return []
        candidates = sorted(p for p in folder.rglob("*") if p.suffix.lower() in TEXT_SUFFIXES)
        return [path for path in candidates if path.is_file() and self.file(path)]


def _encodings(secret: str) -> set[str]:
    raw = secret.encode("utf-8")
    forms = {
        secret,
        urllib.parse.quote(secret, safe=""),
        base64.b64encode(raw).decode("ascii").rstrip("="),
        base64.b64encode(b"x-access-token:" + raw).decode("ascii").rstrip("="),
    }
    return {form for form in forms if form}


class RedactingWriter:
    """A text stream that redacts whole lines before passing them on.

    Writing is line-buffered on purpose: `print(a, b)` arrives in several `write` calls, and a
    secret split across two calls must still be caught. A secret never contains a newline.
    """

    def __init__(self, stream: Writer, redact: Redactor) -> None:
        self._stream = stream
        self._redact = redact
        self._pending = ""

    def write(self, text: str) -> int:
        self._pending += text
        complete, newline, rest = self._pending.rpartition("\n")
        if newline:
            self._stream.write(self._redact(complete + newline))
            self._pending = rest
        return len(text)

    def flush(self) -> None:
        if self._pending:
            self._stream.write(self._redact(self._pending))
            self._pending = ""
        self._stream.flush()

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def isatty(self) -> bool:
        return False

    @property
    def encoding(self) -> str:
        return getattr(self._stream, "encoding", "utf-8") or "utf-8"
