#!/usr/bin/env bash
# A venv with Axolotl and ray[train] for the two-worker test, made once: Axolotl's own venv
# ($1) is on its path (a .pth file: nothing is installed into that venv), and Ray goes
# beside it at the versions Axolotl already has (a constraints file). Seconds with a warm
# uv cache. Usage: axolotl_ray_venv.sh AXOLOTL_VENV TARGET_VENV [RAY_VERSION]
set -euo pipefail
axolotl="$1" target="$2" version="${3:-2.60.0}"
[ -x "$target/bin/axolotl" ] && exit 0
purelib='import sysconfig; print(sysconfig.get_paths()["purelib"])'
uv venv -q --python "$axolotl/bin/python" "$target"
"$axolotl/bin/python" -c "$purelib" > "$("$target/bin/python" -c "$purelib")/axolotl_venv.pth"
constraints="$(mktemp)"
"$axolotl/bin/python" -m pip freeze --exclude-editable | grep -v ' @ ' > "$constraints"
uv pip install -q --python "$target/bin/python" -c "$constraints" "ray[default,train]==$version"
rm -f "$constraints"
printf '#!%s\nimport sys\nfrom axolotl.cli.main import main\nif __name__ == "__main__":\n    sys.exit(main())\n' \
  "$target/bin/python" > "$target/bin/axolotl.tmp"
chmod +x "$target/bin/axolotl.tmp"
mv "$target/bin/axolotl.tmp" "$target/bin/axolotl"
