#!/bin/sh
# Build the llama.cpp toolchain of overbrainer's export and compare into DIR (idempotent:
# DIR/.complete is written last, and a DIR without it is built again).
# Usage: install_llama_cpp.sh DIR VERSION [PYTHON]
# DIR gets a venv with llama-cpp-python[server]==VERSION built from source (CUDA when nvcc
# and a GPU are there, else the CPU with AVX2 and no AMX, which some compilers fail to build), and
# llama.cpp/ with the converter and gguf-py from the same source distribution.
set -eu
dir=$1
version=$2
python=${3:-python3}
[ -f "$dir/.complete" ] && exit 0
rm -rf "$dir"
"$python" -m venv "$dir"
"$dir/bin/pip" install --quiet --upgrade pip
"$dir/bin/pip" download --quiet --no-deps --no-binary :all: \
  "llama-cpp-python==$version" -d "$dir/sdist"
if command -v nvcc >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  CMAKE_ARGS="${CMAKE_ARGS:-} -DGGML_CUDA=ON"
else
  CMAKE_ARGS="${CMAKE_ARGS:-} -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON"
  CMAKE_ARGS="$CMAKE_ARGS -DGGML_F16C=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
fi
export CMAKE_ARGS="$CMAKE_ARGS -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF"
sdist=$(ls "$dir"/sdist/llama_cpp_python-*.tar.gz)
"$dir/bin/pip" install "llama-cpp-python[server] @ file://$sdist"
tar xzf "$dir"/sdist/llama_cpp_python-*.tar.gz -C "$dir/sdist" \
  "llama_cpp_python-$version/vendor/llama.cpp/convert_hf_to_gguf.py" \
  "llama_cpp_python-$version/vendor/llama.cpp/gguf-py"
mkdir -p "$dir/llama.cpp"
cp -r "$dir/sdist/llama_cpp_python-$version/vendor/llama.cpp/convert_hf_to_gguf.py" \
  "$dir/sdist/llama_cpp_python-$version/vendor/llama.cpp/gguf-py" "$dir/llama.cpp/"
rm -rf "$dir/sdist"
touch "$dir/.complete"
