"""One finding per cause: repeats of a finding at each batch size or length merged into one.

A model that fails the same way at every batch size (or every length of a declared axis) gives
the same finding once per cut, its texts differing only in the figures the size changes. They
become one finding whose text lists the sizes ("at batches 1, 4, 8"), each differing figure of
the repeats kept in order ("Got: 4/8"), and whose details list the sizes (`batches` or
`sizes`). The same rule merges the lines of evidence inside one finding (frozen.py).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import cast

from onnx_parity.finding_details import FindingDetails
from onnx_parity.findings import Finding

# A figure in a message: an integer, a decimal or a number in scientific notation.
FIGURE = re.compile(r"\d+(?:\.\d+)?(?:e[-+]?\d+)?")
# The details key that says which size a finding is about, and the key listing merged sizes.
SIZE_KEYS = (("batch_size", "batches"), ("size", "sizes"))

Key = tuple[object, ...]


def merge_repeats(findings: Sequence[Finding]) -> list[Finding]:
    """Findings of one code about one subject whose texts differ only in their size's figures
    become one, where the first of them stood; every other finding is kept as it is."""
    groups: dict[Key, list[Finding]] = {}
    for index, finding in enumerate(findings):
        groups.setdefault(_key(finding, index), []).append(finding)
    merged: list[Finding] = []
    for group in groups.values():
        merged += _merged(group)
    return merged


def merge_texts(items: Sequence[tuple[int, str]]) -> str | None:
    """(size, text) pairs of one skeleton as one text: the first figure that is each text's
    size lists the sizes, any other differing figure lists each text's, joined by "/".
    None when the texts are not repeats of one text at several sizes."""
    unique = list(dict.fromkeys(items))
    if len(unique) == 1:
        return unique[0][1]
    skeletons = {tuple(FIGURE.split(text)) for _, text in unique}
    sizes = [str(size) for size, _ in unique]
    if len(skeletons) != 1 or len(set(sizes)) != len(sizes):
        return None
    [skeleton] = skeletons
    columns = list(zip(*(FIGURE.findall(text) for _, text in unique), strict=True))
    anchor = next((j for j, column in enumerate(columns) if list(column) == sizes), None)
    if anchor is None:
        return None
    text = skeleton[0]
    for j, column in enumerate(columns):
        if j == anchor:
            text = _plural(text) + ", ".join(column)
        else:
            text += column[0] if len(set(column)) == 1 else "/".join(column)
        text += skeleton[j + 1]
    return text


def _plural(text: str) -> str:
    return text[: -len("batch ")] + "batches " if text.endswith("batch ") else text


def _key(finding: Finding, index: int) -> Key:
    """Findings that may be repeats share a key: a size in their details, the same code,
    subject, place and fix, and the same text but for its figures."""
    size_key = _size_key(finding.details)
    if size_key is None:
        return (index,)
    rest = {key: value for key, value in finding.details.items() if key != size_key}
    return (finding.code, finding.severity, finding.file, finding.line, finding.allowed_by,
            finding.fix, repr(sorted(rest.items())), size_key,
            tuple(FIGURE.split(finding.message)))


def _size_key(details: FindingDetails) -> str | None:
    return next((key for key, _ in SIZE_KEYS if isinstance(details.get(key), int)), None)


def _merged(group: list[Finding]) -> list[Finding]:
    first = group[0]
    size_key = _size_key(first.details)
    if size_key is None or len(group) == 1:
        return group
    sizes = [_size(finding, size_key) for finding in group]
    message = merge_texts(list(zip(sizes, (f.message for f in group), strict=True)))
    if message is None:
        return group
    listed = dict(SIZE_KEYS)[size_key]
    details: dict[str, object] = {key: value for key, value in first.details.items()
                                  if key != size_key}
    details[listed] = list(dict.fromkeys(sizes))
    evidence = "\n".join(dict.fromkeys(f.evidence for f in group if f.evidence)) or None
    return [dataclasses.replace(first, message=message, evidence=evidence,
                                details=cast(FindingDetails, details))]


def _size(finding: Finding, size_key: str) -> int:
    value = finding.details.get(size_key)
    assert isinstance(value, int)  # _key grouped only findings that have it
    return value
