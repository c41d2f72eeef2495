"""The environment variables that carry credentials: one list for the engine and the action.

The action masks the tokens before anything is printed and removes every one of these from
its own environment; the engine never hands any of them to the workers that run model code.
"""

from __future__ import annotations

from collections.abc import Mapping

# Tokens the action may use for the API (masked first, then removed).
TOKEN_VARIABLES = ("INPUT_GITHUB-TOKEN", "GITHUB_TOKEN")
# Every variable whose value is a credential: never visible to model code.
SECRET_VARIABLES = (*TOKEN_VARIABLES, "GH_TOKEN", "ACTIONS_RUNTIME_TOKEN",
                    "ACTIONS_ID_TOKEN_REQUEST_TOKEN")


def without_credentials(environ: Mapping[str, str]) -> dict[str, str]:
    """A copy of `environ` without any of SECRET_VARIABLES."""
    return {key: value for key, value in environ.items() if key not in SECRET_VARIABLES}
