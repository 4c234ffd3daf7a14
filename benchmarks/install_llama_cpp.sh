#!/usr/bin/env bash
# Install llama-cpp-python (the llama.cpp peer of bench_models.py / bench_e2e.py) from source,
# built for this CPU (GGML_NATIVE: AVX2/AVX-512 where the host has them), plus diskcache
# (llama_cpp imports it; --no-deps skips it).
#
# Usage:  benchmarks/install_llama_cpp.sh [SDIST]
#   PYTHON   the interpreter whose environment receives the package (default: python3)
#   SDIST    optional path to a downloaded llama_cpp_python-0.3.36.tar.gz (offline hosts);
#            without it pip fetches the sdist from the package index.
#   FORCE=1  rebuild even if the pinned version is already importable.
#   CMAKE_ARGS extra CMake flags, appended after -DGGML_NATIVE=ON (the last one wins). On an Intel Xeon
#            (Sapphire Rapids class) under KVM the native build segfaults inside llama_decode (session 22,
#            RESULTS.md); build the AVX2 one there with PIP_NO_CACHE_DIR=1 FORCE=1 and
#            CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON".
#
# Idempotent: if `import llama_cpp` already gives the pinned version, nothing is rebuilt
# (a build takes ~10-20 min on 2 cores).
set -euo pipefail

VERSION=0.3.36
PY=${PYTHON:-python3}
SDIST=${1:-}

installed=$("$PY" -c 'import llama_cpp; print(llama_cpp.__version__)' 2>/dev/null || true)
if [[ "$installed" == "$VERSION" && "${FORCE:-0}" != 1 ]]; then
    echo "llama-cpp-python $VERSION already installed for $PY"
else
    if ! command -v cmake >/dev/null 2>&1 && ! "$PY" -c 'import cmake' 2>/dev/null; then
        echo "note: no cmake on PATH; pip's build isolation fetches the cmake wheel" >&2
    fi
    target="llama-cpp-python==$VERSION"
    [[ -n "$SDIST" ]] && target="$SDIST"
    CMAKE_ARGS="-DGGML_NATIVE=ON ${CMAKE_ARGS:-}" \
        "$PY" -m pip install --no-deps --no-binary llama-cpp-python --force-reinstall "$target"
fi
"$PY" -m pip install diskcache
"$PY" -c 'import llama_cpp; print("llama_cpp", llama_cpp.__version__, "ok")'
