"""The package's metadata says what the code does: the core needs torch alone, every declared dependency is imported
somewhere, the version is written once, the console scripts reach their commands, the typing marker ships."""

from __future__ import annotations

import ast
import importlib
import re
import tomllib
from pathlib import Path

import pytest

import vitpe

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
#: A distribution's name -> the module it is imported as, where the two differ.
IMPORT_NAMES = {"PyYAML": "yaml", "rotary-embedding-torch": "rotary_embedding_torch", "pytest-xdist": "xdist"}


def distribution(requirement: str) -> str:
    return re.split(r"[<>=!~\[ ;]", requirement, maxsplit=1)[0]


def imported_modules(*folders: str) -> set[str]:
    """The top-level modules every Python file under ``folders`` imports."""
    found: set[str] = set()
    for folder in folders:
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    found.update(alias.name.split(".")[0] for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    found.add(node.module.split(".")[0])
    return found


def test_the_core_needs_torch_alone() -> None:
    assert [distribution(r) for r in PROJECT["dependencies"]] == ["torch"]


def test_every_declared_dependency_is_imported() -> None:
    """No dependency that nothing imports (the `train` extra by the package, `dev` by the tests, `bench` by the
    benchmarks); pytest-xdist is a pytest plugin, used by the test command's -n."""
    extras = PROJECT["optional-dependencies"]
    uses = {"train": imported_modules("vitpe"), "dev": imported_modules("tests"),
            "bench": imported_modules("benchmarks")}
    for extra, requirements in extras.items():
        for requirement in requirements:
            name = distribution(requirement)
            if name in ("vitpe", "pytest-xdist", "pytest"):
                continue
            module = IMPORT_NAMES.get(name, name)
            assert module in uses[extra], f"{extra} extra declares {name}, which nothing in it imports"
    assert "vitpe[train]" in extras["dev"], "pip install -e '.[dev]' must bring what training needs"


def test_the_version_is_written_once() -> None:
    assert "version" not in PROJECT and PROJECT["dynamic"] == ["version"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", vitpe.__version__)


@pytest.mark.parametrize("script", ["vitpe-train", "vitpe-eval"])
def test_the_console_scripts_reach_their_commands(script: str) -> None:
    module, function = PROJECT["scripts"][script].split(":")
    assert callable(getattr(importlib.import_module(module), function))


def test_the_top_level_commands_are_the_console_scripts() -> None:
    """train.py and eval.py at the top level run the same main as the installed commands."""
    for path, target in (("train.py", "vitpe.cli.train"), ("eval.py", "vitpe.cli.evaluate")):
        tree = ast.parse((ROOT / path).read_text())
        imports = [n for n in tree.body if isinstance(n, ast.ImportFrom) and n.module == target]
        assert imports and imports[0].names[0].name == "main", path


def test_the_typing_marker_and_licence_ship() -> None:
    assert (ROOT / "vitpe" / "py.typed").is_file() and (ROOT / "LICENSE").is_file()
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "py.typed" in package_data["vitpe"]
    assert PROJECT["license"] == {"file": "LICENSE"}
