"""Where the checked folder lies within its repository: the prefix of paths in report.sarif.

Findings name files relative to the folder that was checked (`--repo`); code scanning wants
them relative to the repository's root, the git checkout that holds that folder.
"""

from __future__ import annotations

from pathlib import Path


def source_root(repo: Path) -> str:
    """`repo` relative to the nearest enclosing git checkout ("" when it is one, or none)."""
    folder = repo.resolve()
    for candidate in (folder, *folder.parents):
        if (candidate / ".git").exists():  # a folder, or a file in a worktree or submodule
            relative = folder.relative_to(candidate).as_posix()
            return "" if relative == "." else relative
    return ""
