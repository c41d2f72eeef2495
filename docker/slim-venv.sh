#!/usr/bin/env bash
# Remove from the image's venv what a CPU export and an onnxruntime run never load.
#
#   docker/slim-venv.sh SITE_PACKAGES
#
# Run by the Dockerfile's `dependencies` stage, right after `pip install`, before the venv is
# copied into the final image. Only files that were measured never to be opened are removed
# (README, "Size and contents"): every file the smoke test (.ci/container.sh smoke) and
# `onnx-parity check` of examples/seed-failures opened inside the image was recorded with a
# Python audit hook, and none of the files below was among them. Python code is never removed:
# user code (transformers, timm, torchvision) imports parts of torch that our runs do not, and
# torch.export itself loads pieces of torch/testing and torch/_inductor.
set -euo pipefail

SITE=${1:?usage: slim-venv.sh SITE_PACKAGES}
[ -d "$SITE/torch" ] || { echo "slim-venv.sh: $SITE has no torch" >&2; exit 2; }

before=$(du -sb "$SITE" | cut -f1)

# C++ headers, CMake files, C++ test binaries and protoc, test suites, static archives: for
# building against torch or testing it, never for running it. torch/bin/torch_shm_manager stays:
# `import torch` checks for it.
rm -rf "$SITE/torch/include" "$SITE/torch/test" "$SITE/torch/share/cmake" \
    "$SITE"/torch/bin/test_* "$SITE"/torch/bin/*Test "$SITE"/torch/bin/protoc* \
    "$SITE/onnx/backend/test/data"
find "$SITE" -depth -type d -name tests -prune -exec rm -rf {} +
find "$SITE" -name '*.a' -delete

# torch's own C++ test libraries (TorchBind, JIT backend and AOTInductor test ops): loaded only
# by torch's test suite.
rm -f "$SITE"/torch/lib/libtorchbind_test.so "$SITE"/torch/lib/libjitbackend_test.so \
    "$SITE"/torch/lib/libbackend_with_compiler.so "$SITE"/torch/lib/libaoti_custom_ops.so

# onnxruntime's C API library (35 MB): the Python binding (onnxruntime_pybind11_state) links the
# runtime statically and never opens it; it is there for C programs that link against it.
rm -f "$SITE"/onnxruntime/capi/libonnxruntime.so.*

# Type stubs: read by type checkers, never by the interpreter.
find "$SITE" -name '*.pyi' -delete

# The static symbol tables of torch's libraries (.symtab/.strtab: 89 MB in libtorch_cpu.so
# alone). They lie outside every loaded segment, so the dynamic loader never maps them; the
# dynamic symbol table (.dynsym) that linking and dlsym use is kept. What is lost: function
# names in a native crash's backtrace inside torch.
find "$SITE/torch/lib" -name '*.so*' -type f -exec strip --strip-unneeded {} +

after=$(du -sb "$SITE" | cut -f1)
echo "slim-venv.sh: $SITE from $((before / 1000000)) MB to $((after / 1000000)) MB"
