"""The layout holds: imports follow the stage order, each finding code has one home, modules fit.

Parsed from the source with `ast` (every import, those inside functions too), so a shortcut
taken anywhere fails here with the module, the line and the rule it breaks (ARCHITECTURE.md).
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest

from onnx_parity.findings import CATALOGUE

PACKAGE = Path(__file__).resolve().parent.parent / "entrypoint" / "onnx_parity"
MAX_MODULE_LINES = 350

# The data flows one way; a module may import its own layer and the ones before it.
LAYERS: dict[str, int] = {
    # the vocabulary every stage speaks
    "errors": 0, "ansi": 0, "credentials": 0, "findings": 0, "finding_codes": 0,
    "finding_details": 0, "results": 0,
    "locations": 0, "model_files": 0, "bundle_files": 0, "generation_results": 0,
    "settings": 1,
    "models": 2,
    "export": 3,
    "verification": 4,
    "variants": 5,
    "isolation": 6,  # knows nothing of torch, nor of any stage
    "pipeline": 7,
    "report": 8,
    "publishing": 9,
    "commands": 10, "cli": 10, "__main__": 10,
}
# What the vocabulary and the pool may import besides each other.
VOCABULARY = {"errors", "ansi", "credentials", "findings", "finding_codes", "finding_details", "results",
              "locations", "model_files", "bundle_files", "generation_results"}
# Stages below publishing never import the command line or GitHub code.
PUBLISHING_ONLY = ("onnx_parity.cli", "onnx_parity.commands", "onnx_parity.publishing.github")


@dataclass(frozen=True)
class Import:
    module: str  # the importing module, dotted
    target: str  # the imported module, dotted
    line: int


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def imports_of(name: str, path: Path) -> list[Import]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [Import(name, alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module == "onnx_parity":
            # `from onnx_parity import pipeline`: the stage itself, by its front door
            found += [Import(name, f"onnx_parity.{alias.name}", node.lineno)
                      for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(Import(name, node.module, node.lineno))
    return [item for item in found if item.target.split(".")[0] == "onnx_parity"]


def layer_of(dotted: str) -> str:
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


ALL_IMPORTS = [item for name, path in modules().items() for item in imports_of(name, path)]


def test_every_module_belongs_to_a_known_layer() -> None:
    unknown = sorted({layer_of(name) for name in modules()} - set(LAYERS) - {"__init__"})
    assert not unknown, f"add these to LAYERS and ARCHITECTURE.md: {unknown}"


def test_no_import_points_against_the_stage_order() -> None:
    upward = [
        f"{item.module}:{item.line} imports {item.target} "
        f"({layer_of(item.module)} may not import {layer_of(item.target)})"
        for item in ALL_IMPORTS
        if layer_of(item.target) in LAYERS and layer_of(item.module) in LAYERS
        and LAYERS[layer_of(item.target)] > LAYERS[layer_of(item.module)]
    ]
    assert not upward, "\n".join(upward)


@pytest.mark.parametrize("layer", ["isolation", *sorted(VOCABULARY)])
def test_the_pool_and_the_vocabulary_import_no_stage(layer: str) -> None:
    allowed = VOCABULARY | {layer, "__init__"}
    wrong = [f"{item.module}:{item.line} imports {item.target}" for item in ALL_IMPORTS
             if layer_of(item.module) == layer and layer_of(item.target) not in allowed]
    assert not wrong, "\n".join(wrong)


def test_the_vocabulary_modules_import_each_other_without_a_circle() -> None:
    """One owns the other (findings.py owns finding_details.py), type-only imports too: a
    circle reads as two halves of one module and hides which one to change first."""
    graph: dict[str, set[str]] = defaultdict(set)
    for item in ALL_IMPORTS:
        if layer_of(item.module) in VOCABULARY and layer_of(item.target) in VOCABULARY \
                and layer_of(item.module) != layer_of(item.target):
            graph[layer_of(item.module)].add(layer_of(item.target))

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        return any(step == goal or (step not in seen and reaches(step, goal, seen | {step}))
                   for step in graph[start])

    circles = sorted(name for name in list(graph) if reaches(name, name, {name}))
    assert not circles, f"vocabulary modules in an import circle: {circles}"


def test_no_stage_imports_the_command_line_or_github_code() -> None:
    wrong = [f"{item.module}:{item.line} imports {item.target}" for item in ALL_IMPORTS
             if layer_of(item.module) not in ("publishing", "commands", "cli", "__main__")
             and item.target.startswith(PUBLISHING_ONLY)]
    assert not wrong, "\n".join(wrong)


STAGES = sorted(layer for layer, rank in LAYERS.items()
                if layer not in VOCABULARY and rank < LAYERS["commands"])
COMMAND_LINE = {"commands", "cli", "__main__"}


def _stage_of(dotted: str) -> str:
    layer = layer_of(dotted)
    return "command line" if layer in COMMAND_LINE else layer


def test_imports_between_stages_go_through_front_doors() -> None:
    """Another stage is imported as `from onnx_parity.<stage> import name`, never a module."""
    wrong = [f"{item.module}:{item.line} imports {item.target}: import the names from "
             f"onnx_parity.{layer_of(item.target)} (its __init__.pyi)"
             for item in ALL_IMPORTS
             if layer_of(item.target) in STAGES
             and _stage_of(item.target) != _stage_of(item.module)
             and item.target != f"onnx_parity.{layer_of(item.target)}"]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("stage", STAGES)
def test_every_stage_has_a_front_door_whose_names_resolve(stage: str) -> None:
    stub = PACKAGE / stage / "__init__.pyi"
    assert stub.is_file(), f"{stage}/ has no __init__.pyi naming its public API"
    tree = ast.parse(stub.read_text(encoding="utf-8"))
    homes = {alias.name: f"onnx_parity.{stage}.{node.module}" for node in tree.body
             if isinstance(node, ast.ImportFrom) for alias in node.names}
    exported = ast.literal_eval(next(
        node.value for node in tree.body
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "__all__"))
    package = importlib.import_module(f"onnx_parity.{stage}")
    assert sorted(exported) == sorted(homes) == package.__all__
    for name, home in homes.items():
        assert getattr(package, name) is getattr(importlib.import_module(home), name), name


def test_importing_every_front_door_imports_no_torch_and_no_numpy() -> None:
    probe = ("import sys\n"
             + "".join(f"import onnx_parity.{stage}\n" for stage in STAGES)
             + "print(sorted(name for name in ('torch', 'numpy', 'onnx', 'onnxruntime') "
               "if name in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True, timeout=60)
    assert done.stdout.strip() == "[]"


def test_no_module_is_longer_than_350_lines() -> None:
    long = {name: lines for name, path in modules().items()
            if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert not long, long


def finding_codes_built() -> dict[str, set[str]]:
    """finding code -> the modules that construct `Finding("<code>", ...)` with it."""
    built: dict[str, set[str]] = defaultdict(set)
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id == "Finding" and node.args):
                for code in _literal_codes(node.args[0]):
                    built[code].add(name)
    return built


def _literal_codes(node: ast.expr) -> list[str]:
    """`"code"`, or both codes of `"a" if cond else "b"`; a code held in a variable is not one."""
    if isinstance(node, ast.Constant):
        return [str(node.value)]
    if isinstance(node, ast.IfExp):
        return _literal_codes(node.body) + _literal_codes(node.orelse)
    return []


def test_each_finding_code_is_built_in_exactly_one_module() -> None:
    built = finding_codes_built()
    # crash, timeout and out-of-memory come from the pool's own words (WorkerFailure.kind).
    worker_kinds = {"crash", "timeout", "out-of-memory"}
    assert set(built) <= set(CATALOGUE), sorted(set(built) - set(CATALOGUE))
    assert set(CATALOGUE) - worker_kinds <= set(built), sorted(set(CATALOGUE) - set(built))
    doubled = {code: sorted(where) for code, where in built.items() if len(where) > 1}
    assert not doubled, doubled


def test_architecture_md_names_every_package_and_top_level_module() -> None:
    text = (PACKAGE.parent.parent / "ARCHITECTURE.md").read_text(encoding="utf-8")
    missing = [f"`{layer}`" for layer in LAYERS if layer != "__main__" and f"`{layer}" not in text]
    assert not missing, f"ARCHITECTURE.md does not describe {missing}"


# ---------------------------------------------------------------------------------------------
# One way inside a stage too: no circle of imports, rooms of at most 20 modules

BENCH = PACKAGE.parent.parent / "bench"
MAX_FOLDER_MODULES = 20


def _resolved(node: ast.Import | ast.ImportFrom, package: str) -> list[str]:
    """The dotted names an import statement may load: the module itself and, for `from m
    import x`, `m.x` (x may be a submodule); a relative import against the importer's package."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        parts = package.split(".")[:len(package.split(".")) - (node.level - 1)]
        base = ".".join([*parts, *([node.module] if node.module else [])])
    return [base, *(f"{base}.{alias.name}" for alias in node.names)]


def module_imports(found: dict[str, Path]) -> dict[str, dict[str, int]]:
    """importer -> {imported module among `found`: its first line}, every import counted
    (inside functions and `if TYPE_CHECKING:` too, relative ones, `from . import x`)."""
    graph: dict[str, dict[str, int]] = {}
    for name, path in found.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: dict[str, int] = {}
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                for dotted in _resolved(node, package):
                    while dotted and dotted not in found:  # `a.b.name` -> module `a.b`
                        dotted = dotted.rpartition(".")[0]
                    if dotted and dotted != name:
                        edges.setdefault(dotted, node.lineno)
        graph[name] = edges
    return graph


def import_circles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in graph.get(module, {}):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component: list[str] = []
            while not component or component[-1] != module:
                component.append(stack.pop())
            if len(component) > 1:
                circles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(circles)


def _circle_text(circle: list[str], graph: dict[str, dict[str, int]]) -> str:
    inside = [f"  {module}:{line} imports {target}" for module in circle
              for target, line in sorted(graph[module].items()) if target in circle]
    return f"circle {' <-> '.join(circle)}:\n" + "\n".join(inside)


def bench_modules() -> dict[str, Path]:
    """bench/'s scripts, which import each other by bare name (bench/ is their sys.path[0])."""
    return {path.stem: path for path in sorted(BENCH.glob("*.py"))}


@pytest.mark.parametrize("where", ["package", "bench"])
def test_no_modules_import_each_other_in_a_circle(where: str) -> None:
    """Types two modules share get a module of their own, which both import: a circle reads as
    two halves of one module and hides which one to change first."""
    graph = module_imports(modules() if where == "package" else bench_modules())
    circles = import_circles(graph)
    assert not circles, "\n".join(_circle_text(circle, graph) for circle in circles)


def test_no_folder_holds_more_than_20_modules() -> None:
    """A folder holds one concern, small enough to read as a list; past 20 it wants
    sub-packages, each saying in its docstring what it owns."""
    counts: dict[str, int] = defaultdict(int)
    for path in PACKAGE.rglob("*.py"):
        if path.name != "__init__.py":
            counts[str(path.parent.relative_to(PACKAGE.parent))] += 1
    crowded = {folder: count for folder, count in sorted(counts.items())
               if count > MAX_FOLDER_MODULES}
    assert not crowded, f"folders over {MAX_FOLDER_MODULES} modules: {crowded}"


def sub_packages() -> list[Path]:
    return sorted({path.parent for path in PACKAGE.rglob("*.py")} - {PACKAGE})


@pytest.mark.parametrize("folder", sub_packages(),
                         ids=lambda folder: str(folder.relative_to(PACKAGE)))
def test_every_sub_package_says_what_it_owns(folder: Path) -> None:
    init = folder / "__init__.py"
    assert init.is_file(), f"{folder.relative_to(PACKAGE.parent)} has no __init__.py"
    docstring = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
    assert docstring, f"{init.relative_to(PACKAGE.parent)} has no docstring saying what it owns"


@pytest.mark.parametrize("folder", [folder for folder in sub_packages()
                                    if folder.parent != PACKAGE],
                         ids=lambda folder: str(folder.relative_to(PACKAGE)))
def test_a_sub_package_below_a_stage_imports_nothing(folder: Path) -> None:
    """Its modules are imported by name; the stage's front door is the stage's __init__."""
    tree = ast.parse((folder / "__init__.py").read_text(encoding="utf-8"))
    imports = [node.lineno for node in ast.walk(tree)
               if isinstance(node, ast.Import | ast.ImportFrom)]
    assert not imports, f"{folder.relative_to(PACKAGE.parent)}/__init__.py imports at {imports}"
