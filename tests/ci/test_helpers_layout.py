"""Where the tests' shared code lives: library code in ``tests/helpers`` (imported as
``tests.helpers.X``), fixtures in conftest modules and ``tests/fixtures``. A conftest imported
as a library runs twice under two names (``conftest`` and ``tests.conftest``), and a fixture
imported by name is registered again where it is imported: both are how this tree was before.
A test module imported by another ties the two files together (moving or deleting one breaks
the other) and registers the imported fixtures a second time."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).parents[2]
TREES = [
    ROOT / "tests",
    ROOT / "benchmarks",
    *ROOT.glob("contrib/*/tests"),
    *ROOT.glob("plugins/*/tests"),
]


def sources() -> Iterator[Path]:
    for tree in TREES:
        yield from sorted(tree.rglob("*.py"))


def conftest_imports(path: Path) -> list[str]:
    """``file:line: statement`` of each import of a conftest module in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.ImportFrom):
            names = [node.module or ""] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        if any(name.split(".")[-1] == "conftest" for name in names):
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            found.append(f"{where}: {ast.unparse(node)}")
    return found


def imports_of_test_modules(path: Path) -> list[str]:
    """``file:line: statement`` of each import of a test module (``test_*``) in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            names = [module] + [f"{module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        if any(part.startswith("test_") for name in names for part in name.split(".")):
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            found.append(f"{where}: {ast.unparse(node)}")
    return found


def fixtures_defined(path: Path) -> list[str]:
    """``file:line: name`` of each function decorated as a pytest fixture in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.FunctionDef):
            for decorator in node.decorator_list:
                target = decorator.func if isinstance(decorator, ast.Call) else decorator
                if ast.unparse(target) in ("pytest.fixture", "fixture"):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.name}")
    return found


def test_no_test_imports_a_conftest_module():
    found = [line for path in sources() for line in conftest_imports(path)]
    assert not found, (
        "conftest modules hold fixtures and hooks, never a library: move what these import "
        "to tests/helpers/ (fixtures other directories need: tests/fixtures/, in the root "
        "conftest's pytest_plugins)\n" + "\n".join(found)
    )


def test_no_module_imports_a_test_module():
    found = [line for path in sources() for line in imports_of_test_modules(path)]
    assert not found, (
        "a test module holds tests, never a library: move what these import to "
        "tests/helpers/ (fixtures: the directory's conftest, or tests/fixtures/ in the root "
        "conftest's pytest_plugins when several directories use them)\n" + "\n".join(found)
    )


def test_the_tests_have_no_loose_top_level_modules():
    loose = sorted(
        str(path.relative_to(ROOT))
        for path in (ROOT / "tests").glob("*.py")
        if path.name != "conftest.py"
    )
    assert not loose, (
        "a module beside tests/conftest.py is imported through the rootdir on sys.path: "
        "move it to tests/helpers/ and import it as tests.helpers.NAME\n" + "\n".join(loose)
    )


def test_helpers_define_no_fixtures():
    found = [line for path in sorted((ROOT / "tests" / "helpers").rglob("*.py"))
             for line in fixtures_defined(path)]
    assert not found, (
        "a fixture in tests/helpers/ works only where it is imported by name: put it in a "
        "conftest, or in tests/fixtures/ (registered in the root conftest's pytest_plugins)\n"
        + "\n".join(found)
    )


def test_every_fixture_module_is_registered():
    tree = ast.parse((ROOT / "tests" / "conftest.py").read_text(encoding="utf-8"))
    [plugins] = [
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "pytest_plugins"
    ]
    modules = {f"tests.fixtures.{path.stem}" for path in (ROOT / "tests" / "fixtures").glob("*.py")}
    assert set(plugins) == modules, (
        "tests/fixtures/ and the root conftest's pytest_plugins name different modules: "
        f"unregistered {sorted(modules - set(plugins))}, missing {sorted(set(plugins) - modules)}"
    )
