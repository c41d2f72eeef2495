# The onnx-parity action image: Python 3.11, CPU-only torch and onnxruntime, this package.
#
# BASE_IMAGE is pinned by digest so a tag moving upstream cannot change the image under a
# release. The digest is python:3.11-slim-bookworm (Python 3.11.16), the multi-platform index
# digest as published in many public Dockerfiles; it could NOT be re-checked against Docker Hub
# from the machine this file was written on (no registry access there). To refresh it:
#     docker buildx imagetools inspect python:3.11-slim-bookworm   # "Digest:" line
#  or crane digest python:3.11-slim-bookworm
# and replace the sha256 below (keep the tag for humans, the digest is what Docker uses).
#
# CI builds the same file on a locally made Debian bookworm base without Python
# (--build-arg BASE_IMAGE=localhost/debian:bookworm-slim): Debian bookworm's python3 is 3.11 too.
ARG BASE_IMAGE=python:3.11-slim-bookworm@sha256:2e32f7d302adc1c37428355c1e646897c0c53f4fd60b6a551245fb90ee129f91
FROM ${BASE_IMAGE}

# Where torch's "+cpu" build comes from. CI passes an empty value and a local wheel folder
# through PIP_FIND_LINKS instead.
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
# Build-time only, never stored in the image (ARGs are not part of its environment): CI passes
# the host's CA bundle (mounted beside the system path) and its local wheel folder here.
ARG PIP_CERT
ARG PIP_FIND_LINKS

# A base without python3 (the CI base) gets Debian's python3 (3.11) and venv support; the
# official python image already has both, so nothing is installed there.
# DL3008 (pin apt versions) is ignored: this branch runs only on the CI base, whose bookworm
# versions move with Debian's point releases; the Python packages that matter are pinned.
# hadolint ignore=DL3008
RUN set -eu; \
    if ! command -v python3 >/dev/null 2>&1; then \
        apt-get update; \
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
            python3 python3-venv ca-certificates; \
        apt-get clean; \
        rm -rf /var/lib/apt/lists/* /usr/share/doc/* /usr/share/man/* /usr/share/info/*; \
    fi; \
    python3 -m venv /opt/venv

ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONIOENCODING=utf-8 \
    LANG=C.UTF-8 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    ONNX_PARITY_CONSTRAINTS=/opt/onnx-parity/requirements.lock

# Runtime dependencies first, in their own layer, so a change to the package's code does not
# reinstall torch. The list comes from pyproject.toml, the exact versions from the lock (used
# as constraints: only what the runtime needs is installed, every version is pinned).
# Then everything inside torch and friends that CPU inference and ONNX export never load is
# deleted in the same layer (C++ headers, C++ test binaries and protoc, test suites;
# torch/bin/torch_shm_manager stays: `import torch` needs it): about 0.27 GB.
COPY pyproject.toml requirements.lock /opt/onnx-parity/
RUN set -eu; \
    python -c "import tomllib; print('\n'.join(tomllib.load(open('/opt/onnx-parity/pyproject.toml', 'rb'))['project']['dependencies']))" \
        > /tmp/runtime-deps.txt; \
    pip install --no-cache-dir ${TORCH_INDEX_URL:+--extra-index-url "$TORCH_INDEX_URL"} \
        -c /opt/onnx-parity/requirements.lock -r /tmp/runtime-deps.txt; \
    rm /tmp/runtime-deps.txt; \
    site=$(python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])"); \
    rm -rf "$site/torch/include" "$site/torch/test" "$site/torch/share/cmake" \
        "$site"/torch/bin/test_* "$site"/torch/bin/*Test "$site"/torch/bin/protoc* \
        "$site/onnx/backend/test/data"; \
    find "$site" -depth -type d -name tests -prune -exec rm -rf {} +; \
    find "$site" -name '*.a' -delete; \
    python -c "import torch, onnxruntime, onnxscript"

# The package itself (no dependency changes: the lock already holds them all).
COPY README.md /opt/onnx-parity/src/README.md
COPY pyproject.toml /opt/onnx-parity/src/pyproject.toml
COPY entrypoint /opt/onnx-parity/src/entrypoint
RUN set -eu; \
    pip install --no-cache-dir -c /opt/onnx-parity/requirements.lock /opt/onnx-parity/src; \
    rm -rf /opt/onnx-parity/src; \
    onnx-parity --help >/dev/null

ENTRYPOINT ["onnx-parity", "action"]
