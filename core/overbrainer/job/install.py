"""The install of Axolotl into a target's venv: uv where the host has it, else pip.

uv reads no pip configuration, so the script hands pip's settings (find-links, index,
constraints, certificates) over to uv's variables first, and falls back to pip where those
settings name several indexes (the two resolvers would pick different wheels).
"""

from __future__ import annotations

import shlex
from importlib import resources

from overbrainer.job.layout import TRAVELS

q = shlex.quote


# pip's settings that decide which wheels an install gets (a machine's find-links holding
# the CPU torch wheel, its index, constraints, certificates), and the variables uv reads
# for each: uv reads no pip configuration of its own. pip weighs every file of every index;
# uv takes a version's files from the first index that has it, so with a partial mirror
# first it can install another wheel than pip would (a mirror's py310 build on 3.11). With
# PyPI as pip's main index, uv gets PyPI first (it holds every file of each version it has)
# and the extra indexes after it: the same wheels as pip (checked tag by tag on the whole
# Axolotl install), in a fifth of the time. With another main index, pip installs.
_PIP_TO_UV = """\
import configparser, os, shlex, sys
names = {"find-links": "UV_FIND_LINKS", "index-url": "UV_INDEX_URL",
         "extra-index-url": "UV_EXTRA_INDEX_URL", "constraint": "UV_CONSTRAINT",
         "no-index": "UV_NO_INDEX", "cert": "SSL_CERT_FILE"}
home = os.path.expanduser("~")
PYPI = "https://pypi.org/simple"
chosen = os.environ.get("PIP_CONFIG_FILE")
files = []
if chosen != os.devnull:  # as pip: global, user (unless PIP_CONFIG_FILE), site, that file
    xdg = os.environ.get("XDG_CONFIG_DIRS") or "/etc/xdg"
    files += [os.path.join(d, "pip", "pip.conf") for d in reversed(xdg.split(":"))]
    files.append("/etc/pip.conf")
    if not (chosen and os.path.exists(chosen)):
        user = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
        files += [os.path.join(home, ".pip", "pip.conf"), os.path.join(user, "pip", "pip.conf")]
    if os.environ.get("VIRTUAL_ENV"):
        files.append(os.path.join(os.environ["VIRTUAL_ENV"], "pip.conf"))
    if chosen:
        files.append(chosen)
settings = {}
for path in files:
    parser = configparser.RawConfigParser()
    try:
        parser.read(path)
    except Exception:
        continue
    for section in ("global", "install"):
        if parser.has_section(section):
            for key, value in parser.items(section):
                settings[key.replace("_", "-")] = value
for name in names:
    value = os.environ.get("PIP_" + name.upper().replace("-", "_"))
    if value:
        settings[name] = value
no_index = settings.get("no-index", "").strip().lower() in ("1", "true", "yes", "on")
extras = settings.get("extra-index-url", "").split()
if extras and not no_index:
    primary = settings.pop("index-url", "").strip() or PYPI
    if primary.rstrip("/") not in (PYPI, "https://pypi.python.org/simple"):
        print("echo 'installing with pip: its settings name several package indexes'")
        sys.exit()
    settings["extra-index-url"] = " ".join([PYPI, *extras])
print("installer=uv")
for name, value in settings.items():
    if name not in names:
        continue
    if name == "no-index":
        value = "1" if value.strip().lower() in ("1", "true", "yes", "on") else ""
    else:
        value = ("," if name == "find-links" else " ").join(value.split())
    if value:
        print(f'[ -n "${{{names[name]}:-}}" ] || export {names[name]}={shlex.quote(value)}')
"""


CONSTRAINTS = "constraints"
"""In this package, ``axolotl-VERSION.txt``: the exact versions an Axolotl release
installs, shipped so that pip and uv install them without resolving its tree."""


RESOLVED_WITH = {"axolotl-0.19.0.txt": "torch==2.13.0"}
"""The torch each shipped file was resolved with: its torch-built packages (triton,
xformers, torchao, bitsandbytes) fit that torch only, so another one gets no constraints."""
RESOLVED_ON = (
    "import platform, sys; sys.exit(sys.version_info[:2] != (3, 11)"
    ' or platform.machine() != "x86_64" or sys.platform != "linux")'
)
"""Run by the venv's Python: whether it is the Python and machine the files were resolved on
(Python 3.11, Linux x86_64); elsewhere the constraints are left out, and pip resolves."""


def constraints_of(requirements: list[str]) -> str:
    """The shipped constraints for the ``axolotl==VERSION`` of ``requirements`` (with the
    torch they were resolved with), or ""."""
    for word in requirements:
        if word.startswith("axolotl=="):
            name = f"axolotl-{word.removeprefix('axolotl==')}.txt"
            path = resources.files(TRAVELS).joinpath(CONSTRAINTS, name)
            torch = RESOLVED_WITH.get(name)
            if "/" not in word and torch in requirements and path.is_file():
                return path.read_text(encoding="utf-8")
    return ""


def install_script(venv: str, shown: str, requirements: list[str]) -> str:
    """Install ``requirements`` (quoted already) into the venv ``venv`` (a shell path):
    with uv where the host has it (its venv, ``uv pip install``, pip's settings handed
    over), with pip otherwise or where pip's settings name several indexes; with the
    shipped constraints of an Axolotl release named exactly (``constraints_of``).
    ``shown``: the venv as the user wrote it."""
    wanted = " ".join(requirements)
    pins = constraints_of(requirements)
    if pins:
        wanted += ' -c "$pins"'
        pins = (
            'pins=$(mktemp)\ntrap \'rm -f "$pins"\' EXIT\n'
            f"cat > \"$pins\" <<'CONSTRAINTS'\n{pins.rstrip()}\nCONSTRAINTS\n"
        )
        fit = f'{venv}/bin/python -c {q(RESOLVED_ON)} || : > "$pins"\n  '
    else:
        fit = ""
    return f"""\
set -e
echo {q(f"installing Axolotl into {shown} (first use; this takes minutes)")}
{pins}installer=pip
if command -v uv >/dev/null 2>&1 && command -v python3 >/dev/null 2>&1; then
  eval "$(python3 - <<'PIP_TO_UV'
{_PIP_TO_UV}PIP_TO_UV
)"
fi
if [ "$installer" = uv ]; then
  echo 'installing with uv'
  # pip takes the best version over every source (a local +cpu wheel over PyPI's): so does uv.
  [ -n "${{UV_INDEX_STRATEGY:-}}" ] || export UV_INDEX_STRATEGY=unsafe-best-match
  [ -x {venv}/bin/python ] || uv venv --python "$(command -v python3)" {venv} 2>&1
  {fit}uv pip install --python {venv}/bin/python {wanted} 2>&1
else
  [ -x {venv}/bin/pip ] || python3 -m venv {venv}
  {fit}{venv}/bin/pip install --progress-bar off {wanted} 2>&1
fi
"""
