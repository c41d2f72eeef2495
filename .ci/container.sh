#!/usr/bin/env bash
# Build and run the onnx-parity action image with podman, on a machine without a Docker engine
# and without a registry that serves base images (CI here). Needs root.
#
#   .ci/container.sh build                                  install podman if missing, make the
#                                                           Debian base, build localhost/onnx-parity:ci
#   .ci/container.sh smoke                                  imports + a tiny dynamo export run by ORT,
#                                                           and `onnx-parity --help`, inside the image
#   .ci/container.sh run-action WORKSPACE EVENT_JSON ENV_FILE [RUNNER_DIR]
#                                                           run the action the way the GitHub runner
#                                                           starts a docker action; exits with the
#                                                           container's exit code
#
# ENV_FILE holds KEY=VALUE lines (INPUT_*, GITHUB_*); names may contain hyphens, as the runner's
# INPUT_GITHUB-TOKEN does. RUNNER_DIR (default: a fresh folder under .ci-cache/container/runs)
# receives workflow/event.json, file_commands/output (GITHUB_OUTPUT), file_commands/step_summary
# (GITHUB_STEP_SUMMARY) and home/; its path is printed so a caller can read the outputs.
# Environment:
#   ONNX_PARITY_IMAGE        tag to build and run (default localhost/onnx-parity:ci)
#   ONNX_PARITY_BASE         "local" (default): a debootstrap'd Debian bookworm base, for machines
#                            without a registry; "dockerfile": the Dockerfile's digest-pinned base,
#                            pulled if missing (GitHub's runners)
#   PIP_FIND_LINKS           a folder holding the torch CPU wheel: mounted into the build, and the
#                            PyTorch index is then not used (TORCH_INDEX_URL empty)
#   ONNX_PARITY_RUN_TIMEOUT  seconds before run-action kills the container (default 900)
#   ONNX_PARITY_NETWORK      run-action's podman network (default host, to reach a fake GitHub on
#                            127.0.0.1; "none" proves a run without a comment needs no network)
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE="$REPO/.ci-cache/container"
IMAGE="${ONNX_PARITY_IMAGE:-localhost/onnx-parity:ci}"
BASE_IMAGE="localhost/debian:bookworm-slim"
BASE_MODE="${ONNX_PARITY_BASE:-local}"
HOST_CA="/etc/ssl/certs/ca-certificates.crt"
BUILD_CA="/run/host-ca.crt"   # beside the system path: mounting over it breaks apt in the build

die() { echo "container.sh: $*" >&2; exit 2; }

# Runs "$@" and prints how long it took, under a name.
timed() {
    local name=$1 start=$SECONDS
    shift
    "$@"
    echo "container.sh: phase '$name' took $((SECONDS - start)) s"
}

require_root() {
    [ "$(id -u)" = 0 ] || die "must run as root (podman storage, apt-get, debootstrap)"
}

install_tools() {
    local wanted=(podman runc) missing=() tool
    [ "$BASE_MODE" = dockerfile ] || wanted+=(debootstrap)
    for tool in "${wanted[@]}"; do
        command -v "$tool" >/dev/null || missing+=("$tool")
    done
    [ "${#missing[@]}" -gt 0 ] || return 0
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# podman's defaults ask for more open files and processes than this sandbox allows.
write_containers_conf() {
    local nofile nproc
    nofile=$(ulimit -Hn)
    nproc=$(ulimit -Hu)
    if [ "$nproc" = unlimited ] || [ "$nproc" -gt 32768 ]; then nproc=32768; fi
    if [ "$nofile" = unlimited ]; then nofile=1048576; fi
    mkdir -p "$CACHE"
    cat >"$CACHE/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]
[engine]
runtime = "runc"
EOF
    export CONTAINERS_CONF="$CACHE/containers.conf"
}

# The Debian archive this machine's apt already uses (never a host name written into the repo).
debian_mirror() {
    local mirror
    # shellcheck disable=SC2016  # $(SITE) etc. are apt's format fields, not shell
    mirror=$(apt-get indextargets --format '$(SITE) $(RELEASE) $(COMPONENT)' 2>/dev/null \
        | awk '$3 == "main" && $2 !~ /-/ { print $1; exit }')
    [ -n "$mirror" ] || die "no Debian archive found in apt's sources: run apt-get update, or check /etc/apt/sources.list*"
    echo "$mirror"
}

build_base() {
    if [ "$BASE_MODE" = dockerfile ]; then
        echo "container.sh: using the Dockerfile's pinned base"
        return 0
    fi
    [ "$BASE_MODE" = local ] || die "ONNX_PARITY_BASE=$BASE_MODE: expected \"local\" or \"dockerfile\""
    if podman image exists "$BASE_IMAGE"; then
        echo "container.sh: $BASE_IMAGE already present"
        return 0
    fi
    local rootfs="$CACHE/rootfs" mirror
    mirror=$(debian_mirror)
    rm -rf "$rootfs"
    debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$CACHE/debootstrap.log" 2>&1 \
        || { tail -20 "$CACHE/debootstrap.log" >&2; die "debootstrap failed (log: $CACHE/debootstrap.log)"; }
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
        "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/*
    tar -C "$rootfs" -c . | podman import --change 'CMD ["/bin/bash"]' - "$BASE_IMAGE" >/dev/null
    rm -rf "$rootfs"
    echo "container.sh: imported $BASE_IMAGE from $mirror"
}

build_image() {
    local find_links=${PIP_FIND_LINKS:-}
    local args=(--network host)
    if [ "$BASE_MODE" = dockerfile ]; then
        args+=(--pull=missing)
    else
        args+=(--pull=never --build-arg "BASE_IMAGE=$BASE_IMAGE")
    fi
    if [ -f "$HOST_CA" ]; then
        args+=(-v "$HOST_CA:$BUILD_CA:ro" --build-arg "PIP_CERT=$BUILD_CA")
    fi
    if [ -n "$find_links" ]; then
        [ -d "$find_links" ] || die "PIP_FIND_LINKS=$find_links is not a folder (it should hold the torch CPU wheel)"
        args+=(-v "$find_links:$find_links:ro" --build-arg "PIP_FIND_LINKS=$find_links"
            --build-arg "TORCH_INDEX_URL=")
    fi
    podman build "${args[@]}" -t "$IMAGE" -f "$REPO/Dockerfile" "$REPO"
    podman image inspect --format 'container.sh: {{.RepoTags}} size {{.Size}} bytes' "$IMAGE"
}

cmd_build() {
    require_root
    timed install-tools install_tools
    write_containers_conf
    timed base-image build_base
    timed image build_image
}

# A tiny model through the same path the action takes: dynamo export, then onnxruntime.
SMOKE_PY='
import tempfile, time, pathlib
t0 = time.perf_counter()
import torch, onnxruntime, onnxscript, onnx
print(f"imports {time.perf_counter() - t0:.1f} s: torch {torch.__version__}, onnxruntime {onnxruntime.__version__}, onnxscript {onnxscript.__version__}, onnx {onnx.__version__}")
model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(4 * 6 * 6, 2)).eval()
x = torch.randn(2, 3, 8, 8)
t0 = time.perf_counter()
program = torch.onnx.export(model, (x,), dynamo=True, verbose=False,
                            dynamic_shapes=({0: torch.export.Dim("batch")},))
path = pathlib.Path(tempfile.mkdtemp()) / "m.onnx"
program.save(str(path))
session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
for batch in (1, 5):
    xb = torch.randn(batch, 3, 8, 8)
    got = session.run(None, {session.get_inputs()[0].name: xb.numpy()})[0]
    diff = float(abs(torch.from_numpy(got) - model(xb)).max())
    assert diff < 1e-4, diff
    print(f"batch {batch}: max abs diff {diff:.2e}")
print(f"dynamo export + ORT run {time.perf_counter() - t0:.1f} s: OK")
'

cmd_smoke() {
    require_root
    write_containers_conf
    timed smoke-python podman run --rm --network none --entrypoint python "$IMAGE" -c "$SMOKE_PY"
    timed smoke-cli podman run --rm --network none --entrypoint onnx-parity "$IMAGE" --help
}

cmd_run_action() {
    [ $# -ge 3 ] || die "usage: run-action WORKSPACE EVENT_JSON ENV_FILE [RUNNER_DIR]"
    local workspace event env_file runner rc
    workspace=$(cd "$1" && pwd) || die "workspace folder $1 not found"
    event=$2 env_file=$3
    [ -f "$event" ] || die "event JSON $event not found"
    [ -f "$env_file" ] || die "env file $env_file not found"
    require_root
    write_containers_conf
    runner=${4:-}
    if [ -z "$runner" ]; then
        mkdir -p "$CACHE/runs"
        runner=$(mktemp -d "$CACHE/runs/run.XXXXXX")
    fi
    mkdir -p "$runner/workflow" "$runner/file_commands" "$runner/home"
    cp "$event" "$runner/workflow/event.json"
    : >"$runner/file_commands/output"
    : >"$runner/file_commands/step_summary"
    echo "container.sh: runner folder $runner"
    RUN_NAME="onnx-parity-action-$$"
    # podman runs in the background and this shell waits for it, so a TERM sent to this
    # script's PID runs the trap at once and the container goes too.
    trap 'podman rm -f -t 0 "$RUN_NAME" >/dev/null 2>&1; exit 143' INT TERM
    podman run --rm --name "$RUN_NAME" --network "${ONNX_PARITY_NETWORK:-host}" --timeout "${ONNX_PARITY_RUN_TIMEOUT:-900}" \
        -v "$workspace:/github/workspace" -v "$runner/workflow:/github/workflow" \
        -v "$runner/file_commands:/github/file_commands" -v "$runner/home:/github/home" \
        -w /github/workspace \
        -e GITHUB_ACTIONS=true -e CI=true -e HOME=/github/home \
        -e GITHUB_WORKSPACE=/github/workspace \
        -e GITHUB_EVENT_PATH=/github/workflow/event.json \
        -e GITHUB_OUTPUT=/github/file_commands/output \
        -e GITHUB_STEP_SUMMARY=/github/file_commands/step_summary \
        --env-file "$env_file" \
        "$IMAGE" &
    rc=0
    wait $! || rc=$?
    trap - INT TERM
    echo "container.sh: action exited $rc"
    return "$rc"
}

main() {
    local command=${1:-}
    shift || true
    case "$command" in
        build) timed total cmd_build ;;
        smoke | run-smoke) timed total cmd_smoke ;;
        run-action) cmd_run_action "$@" ;;
        *) die "usage: $0 build | smoke | run-action WORKSPACE EVENT_JSON ENV_FILE [RUNNER_DIR]" ;;
    esac
}

main "$@"
