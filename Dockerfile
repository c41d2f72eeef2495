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
FROM ${BASE_IMAGE} AS python-base

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
    fi

ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONIOENCODING=utf-8 \
    LANG=C.UTF-8 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    ONNX_PARITY_CONSTRAINTS=/opt/onnx-parity/requirements.lock

# ---------------------------------------------------------------------------------------------
# Stage `dependencies`: the venv with torch and friends, slimmed. Its tools (binutils for
# `strip`) and caches stay in this stage; only /opt/venv is copied into the image.
FROM python-base AS dependencies

# Where torch's "+cpu" build comes from. CI passes an empty value and a local wheel folder
# through PIP_FIND_LINKS instead.
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
# Build-time only, never stored in the image (ARGs are not part of its environment): CI passes
# the host's CA bundle (mounted beside the system path) and its local wheel folder here.
ARG PIP_CERT
ARG PIP_FIND_LINKS

# hadolint ignore=DL3008
RUN set -eu; \
    apt-get update; \
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends binutils

# The runtime dependencies: the list comes from pyproject.toml, the exact versions from the lock
# (used as constraints: only what the runtime needs is installed, every version is pinned).
# Then docker/slim-venv.sh removes what CPU export and onnxruntime never open (measured; see the
# script and the README), and the result must still import and export.
COPY pyproject.toml requirements.lock /opt/onnx-parity/
COPY docker/slim-venv.sh /opt/onnx-parity/slim-venv.sh
RUN set -eu; \
    python3 -m venv /opt/venv; \
    python -c "import tomllib; print('\n'.join(tomllib.load(open('/opt/onnx-parity/pyproject.toml', 'rb'))['project']['dependencies']))" \
        > /tmp/runtime-deps.txt; \
    pip install --no-cache-dir ${TORCH_INDEX_URL:+--extra-index-url "$TORCH_INDEX_URL"} \
        -c /opt/onnx-parity/requirements.lock -r /tmp/runtime-deps.txt; \
    rm /tmp/runtime-deps.txt; \
    bash /opt/onnx-parity/slim-venv.sh "$(python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")"; \
    python -c "import torch, onnxruntime, onnxscript; torch.onnx.export(torch.nn.Linear(2, 2), (torch.randn(1, 2),), dynamo=True, verbose=False)"

# ---------------------------------------------------------------------------------------------
# The image: the base, the slimmed venv, the package.
FROM python-base

# Where torch's CPU builds come from, kept in the image: the `requirements` input installs
# torchvision and torchaudio from the same index, so they match this torch (README, "requirements").
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ENV ONNX_PARITY_TORCH_INDEX_URL=${TORCH_INDEX_URL}
# Build-time only, as above (installing the package builds it in an isolated environment).
ARG PIP_CERT
ARG PIP_FIND_LINKS

COPY --from=dependencies /opt/venv /opt/venv
COPY pyproject.toml requirements.lock /opt/onnx-parity/

# The package itself (no dependency changes: the lock already holds them all).
COPY README.md /opt/onnx-parity/src/README.md
COPY pyproject.toml /opt/onnx-parity/src/pyproject.toml
COPY entrypoint /opt/onnx-parity/src/entrypoint
RUN set -eu; \
    pip install --no-cache-dir -c /opt/onnx-parity/requirements.lock /opt/onnx-parity/src; \
    rm -rf /opt/onnx-parity/src; \
    onnx-parity --help >/dev/null; \
    EAGER_IMPORT=1 python -c "import onnx_parity.settings, onnx_parity.models, onnx_parity.export, onnx_parity.verification, onnx_parity.variants, onnx_parity.isolation, onnx_parity.pipeline, onnx_parity.report, onnx_parity.publishing"

ENTRYPOINT ["onnx-parity", "action"]
