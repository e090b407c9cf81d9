"""No import cycle inside the package (module-level or inside functions), checked with ast; no two
of its folders import each other."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "fairseq_clear"


def _graph():
    mods = {}
    for p in PACKAGE.rglob("*.py"):
        parts = list(p.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = p
    edges = {m: set() for m in mods}
    for m, p in mods.items():
        pkg = m if p.name == "__init__.py" else m.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            targets = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = ".".join(pkg.split(".")[: len(pkg.split(".")) - node.level + 1] + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                targets = [base] + [f"{base}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            for t in targets:
                if t in mods and t != m and not m.startswith(t + "."):
                    edges[m].add(t)
    return mods, edges


def _cycle(mods, edges):
    color, stack = {}, []

    def dfs(u):
        color[u] = 1
        stack.append(u)
        for v in sorted(edges[u]):
            if mods[v].name == "__init__.py":  # a package's __init__ re-exports: not a dependency
                continue
            if color.get(v) == 1:
                return stack[stack.index(v):] + [v]
            if not color.get(v):
                found = dfs(v)
                if found:
                    return found
        stack.pop()
        color[u] = 2
        return None

    for u in sorted(mods):
        if not color.get(u) and mods[u].name != "__init__.py":
            found = dfs(u)
            if found:
                return found
    return None


def test_the_package_has_no_import_cycle():
    mods, edges = _graph()
    assert len(mods) > 40
    cycle = _cycle(mods, edges)
    assert cycle is None, " -> ".join(cycle)


def test_the_checker_finds_a_cycle():
    mods = {"a": Path("a.py"), "b": Path("b.py")}
    assert _cycle(mods, {"a": {"b"}, "b": {"a"}}) == ["a", "b", "a"]


def test_library_never_imports_the_console_layer():
    mods, edges = _graph()
    offenders = [(m, t) for m, ts in edges.items() for t in ts
                 if t.startswith("fairseq_clear.cli") and not m.startswith("fairseq_clear.cli")]
    assert offenders == []


#: folder pairs that may import each other, each with the reason it must stay: none (a piece both
#: need moves to the lower one, as the STS and GLUE readers to preprocessing/ and the plugin's
#: registered names to checkpoint_safety.py did)
MUTUAL_ALLOWED = set()


def _folder_edges(edges):
    """{(a, b): [module imports]} between the package's folders: its top-level sub-packages and
    top-level modules (``fairseq_clear.evaluation.sts.scoring`` is in ``evaluation``)."""
    found = {}
    for m, ts in edges.items():
        for t in ts:
            a, b = m.split(".")[1:2], t.split(".")[1:2]
            if a and b and a != b:
                found.setdefault((a[0], b[0]), []).append(f"{m} imports {t}")
    return found


def _mutual(found):
    return sorted(f"{a} <-> {b}: {found[a, b][0]}; {found[b, a][0]}" for a, b in found
                  if a < b and (b, a) in found and frozenset((a, b)) not in MUTUAL_ALLOWED)


def test_no_two_folders_import_each_other():
    """A layer imports only lower ones: a change inside one folder never reaches back into it."""
    assert _mutual(_folder_edges(_graph()[1])) == []


def test_the_folder_rule_finds_a_pair():
    edges = {"p.models.hub": {"p.tasks.base"}, "p.tasks.mt": {"p.models.heads"}, "p.tasks.base": {"p.errors"}}
    assert _mutual(_folder_edges(edges)) == ["models <-> tasks: p.models.hub imports p.tasks.base; "
                                             "p.tasks.mt imports p.models.heads"]


def test_the_unit_tier_runs_no_tool():
    """tests/unit/conftest.py: running the interpreter (as the e2e tests run the CLIs) fails here."""
    import subprocess
    import sys

    import pytest

    with pytest.raises(AssertionError, match="tests/unit runs no tool"):
        subprocess.run([sys.executable, "-c", "pass"])
