"""The layers of docs/architecture.md, checked on the import graph of `src/ctxfold`.

Every import points down (or stays inside its own layer), and no two modules import each other,
directly or round a loop, counting imports made inside functions (which can hide a cycle but not
remove it). Imports made only for type checking may point up in two places, named in
`TYPED_UPWARD` with the reason: they cost nothing at run time and tie no layer to another.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "ctxfold"

# Lowest first. A module may import its own layer and any layer below it.
LAYERS: tuple[tuple[str, ...], ...] = (
    (
        "ctxfold.errors",
        "ctxfold._assembled",
        "ctxfold._drive",
        "ctxfold._files",
        "ctxfold._memo",
        "ctxfold._unicode",
        "ctxfold._version",
    ),
    ("ctxfold.messages",),
    ("ctxfold.protocols",),
    ("ctxfold.tokens", "ctxfold.events", "ctxfold.overflow"),
    ("ctxfold.storage",),
    ("ctxfold.session",),
    ("ctxfold.summarizers",),
    ("ctxfold.pipeline",),
    ("ctxfold.compactor",),
    ("ctxfold.replay", "ctxfold.integrations"),
    ("ctxfold.testing",),
    ("ctxfold.cli",),
    ("ctxfold", "ctxfold.__main__"),
)
TYPED_UPWARD = {
    # The module of seams names the values its protocols take (a summary request).
    ("ctxfold.protocols", "ctxfold.summarizers.request"),
    # `store.session(id)` is annotated as returning a Session; the session layer registers
    # the class at import, so the store never imports it to run.
    ("ctxfold.storage.base", "ctxfold.session"),
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> int:
    best, rank = "", -1
    for number, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            inside = module == prefix or module.startswith(prefix + ".")
            if inside and len(prefix) > len(best):
                best, rank = prefix, number
    assert rank >= 0, f"{module} is in no layer; add it to LAYERS"
    return rank


def imports(path: Path) -> list[tuple[str, bool]]:
    """(imported ctxfold module, only for type checking) for every import in `path`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            typing_only.update(id(child) for child in ast.walk(node))
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found: list[tuple[str, bool]] = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # `from ctxfold.x import y` may name a submodule y; count the deepest that exists.
            names = [_deepest(f"{base}.{alias.name}") or base for alias in node.names]
        found.extend((n, id(node) in typing_only) for n in names if n.split(".")[0] == "ctxfold")
    return found


def _deepest(dotted: str) -> str | None:
    path = SRC.joinpath(*dotted.split("."))
    return dotted if path.with_suffix(".py").is_file() or (path / "__init__.py").is_file() else None


def graph() -> dict[str, list[tuple[str, bool]]]:
    return {module_name(p): imports(p) for p in sorted(PACKAGE.rglob("*.py"))}


def test_every_import_points_down_the_layers() -> None:
    upward = [
        f"{source} (layer {layer_of(source)}) imports {target} (layer {layer_of(target)})"
        for source, targets in graph().items()
        for target, typing_only in targets
        if layer_of(target) > layer_of(source)
        and not (typing_only and (source, target) in TYPED_UPWARD)
    ]
    assert upward == []


def test_no_module_imports_itself_round_a_loop() -> None:
    edges = {
        source: {t for t, typing_only in targets if not typing_only and t != source}
        for source, targets in graph().items()
    }
    cycles: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node)
    assert cycles == []
