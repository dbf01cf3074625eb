"""axolotl.yaml as text: written so that PyYAML reads it back unchanged, and a stopped
run's read back to tell what a resume would change."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from typing import Any

import yaml

from overbrainer.train.axolotl import RESUME_IGNORED

# A key written plain must be a simple word, and not one YAML 1.1 reads as something else:
# PyYAML's resolver knows most of them (on, yes, null, 1e3...), but not y and n.
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:[.-][A-Za-z0-9_]+)*")
_YAML11_BOOLEAN_LETTERS = frozenset("yYnN")


class _Dumper(yaml.SafeDumper):
    """Block YAML with every string value double-quoted and plain keys where they are safe."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _represent_str(dumper: _Dumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"')


def _represent_dict(dumper: _Dumper, data: Mapping[Any, Any]) -> yaml.MappingNode:
    pairs = [(_key(dumper, key), dumper.represent_data(value)) for key, value in data.items()]
    return yaml.MappingNode("tag:yaml.org,2002:map", pairs, flow_style=False)


def _key(dumper: _Dumper, key: Any) -> yaml.Node:
    if not isinstance(key, str):
        return dumper.represent_data(key)
    plain = (
        bool(_PLAIN_KEY.fullmatch(key))
        and key not in _YAML11_BOOLEAN_LETTERS
        and dumper.resolve(yaml.ScalarNode, key, (True, False)) == "tag:yaml.org,2002:str"
    )
    return yaml.ScalarNode("tag:yaml.org,2002:str", key, style=None if plain else '"')


_Dumper.add_representer(str, _represent_str)
_Dumper.add_representer(dict, _represent_dict)


def dump_yaml(config: Mapping[str, Any]) -> str:
    """``config`` as block YAML that PyYAML reads back unchanged."""
    return yaml.dump(
        dict(config),
        Dumper=_Dumper,
        default_flow_style=False,
        sort_keys=False,
        allow_unicode=True,
        width=float("inf"),
    )


def resume_mismatch(old_yaml: str, new_config: Mapping[str, Any]) -> list[str]:
    """Top-level keys whose values differ between a stopped run's axolotl.yaml and ``new_config``.

    ``new_config`` is today's configuration generated as the old run's was (relative paths,
    or absolute ones under its root); keys that do not change what is trained
    (``RESUME_IGNORED``) are left out.

    Raises:
        ValueError: ``old_yaml`` is not a YAML mapping.
    """
    try:
        old = yaml.safe_load(old_yaml)
    except yaml.YAMLError as error:
        raise ValueError(f"not valid YAML: {error}") from None
    if not isinstance(old, dict):
        raise ValueError("not a YAML mapping")
    missing = object()
    keys = list(new_config) + [key for key in old if key not in new_config]
    return [
        key
        for key in keys
        if not any(fnmatch.fnmatchcase(str(key), pattern) for pattern in RESUME_IGNORED)
        and old.get(key, missing) != new_config.get(key, missing)
        # A run made before overbrainer set a seed shuffled at random: any seed resumes it.
        and not (key == "seed" and key not in old)
    ]
