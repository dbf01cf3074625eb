"""A directory on ``sys.path`` where tests install plugin distributions for real."""

from __future__ import annotations

import importlib
import textwrap
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Site:
    """A directory on ``sys.path`` where tests install plugin distributions for real: a
    module and a ``.dist-info`` with ``METADATA`` and ``entry_points.txt``."""

    path: Path
    modules: list[str] = field(default_factory=list)

    def install(self, name: str, source: str, version: str = "1.0") -> str:
        """Install the plugin ``name`` (entry point and module ``obtest_<name>``) from
        ``source``; returns its distribution name."""
        module = f"obtest_{name}"
        distribution = f"overbrainer-{name}"
        (self.path / f"{module}.py").write_text(textwrap.dedent(source), encoding="utf-8")
        info = self.path / f"{distribution.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n", encoding="utf-8"
        )
        (info / "entry_points.txt").write_text(
            f"[overbrainer]\n{name} = {module}\n", encoding="utf-8"
        )
        self.modules.append(module)
        importlib.invalidate_caches()  # importlib.metadata caches what each path holds
        return distribution
