"""The package layout stays readable: no import circles, and a module over 500 lines says why it is long; the
Slurm releases are listed in one table, and every command-line module is in slurmx/cli/, which no library
package imports.

A circle means neither module can be read, tested or moved without the other; a lazy import inside a function
still makes one (it only hides it until the call), so every import statement counts, wherever it stands.
Circles are checked twice: between modules, and between slurmx's subpackages (`slurmx.daemon` and
`slurmx.submit` importing each other through different modules is a circle of the layout).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Mapping
from collections.abc import Set as AbstractSet
from pathlib import Path

import slurmx
from slurmx.slurm.versions import TESTED

ROOT = Path(slurmx.__file__).parent
LONG = 500
MARKER = "Long because"
_REASON = re.compile(rf"(?:^|[.!?:]\s+){MARKER} \w")  # a sentence starting with the marker, with a reason after it


def _modules() -> dict[str, Path]:
    """Dotted name -> file, for every module of slurmx; a package's `__init__` is the package's own module."""
    found = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imported(name: str, path: Path, node: ast.Import | ast.ImportFrom, modules: Mapping[str, Path]) -> Iterator[str]:
    """The slurmx modules one import statement imports.

    `import a.b` and `from a.b import c` import module a.b; when c is itself a module, `from a.b import c`
    imports a.b.c and not a.b's own code (`from . import _env` only needs the sibling), so the edge goes to a.b.c.
    """
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield from _known(alias.name, modules)
        return
    if node.level:
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        base = ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    for alias in node.names:
        if f"{base}.{alias.name}" in modules:
            yield f"{base}.{alias.name}"
        else:
            yield from _known(base, modules)


def _known(dotted: str, modules: Mapping[str, Path]) -> Iterator[str]:
    """`dotted`, or its longest prefix that is a slurmx module (none for other libraries)."""
    parts = dotted.split(".")
    while parts:
        if ".".join(parts) in modules:
            yield ".".join(parts)
            return
        parts.pop()


def import_graph() -> dict[str, set[str]]:
    """Module -> the slurmx modules it imports anywhere in its body (functions and TYPE_CHECKING blocks too)."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        targets = {target for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom)
                   for target in _imported(name, path, node, modules)}
        graph[name] = targets - {name}
    return graph


def package_graph(graph: Mapping[str, set[str]]) -> dict[str, set[str]]:
    """The module graph seen from above: each module becomes its subpackage of slurmx (`slurmx.daemon`)."""
    def top(module: str) -> str:
        return ".".join(module.split(".")[:2])

    packages: dict[str, set[str]] = {}
    for module, targets in graph.items():
        packages.setdefault(top(module), set()).update(top(t) for t in targets)
    return {p: targets - {p} for p, targets in packages.items()}


def circles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one member (Tarjan, iterative), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def loop(graph: Mapping[str, set[str]], component: list[str]) -> str:
    """One concrete loop through a circle, `a -> b -> a`, so the failure names the imports to cut."""
    members = set(component)
    start = component[0]
    paths = {start: [start]}
    frontier = [start]
    while frontier:  # breadth first inside the component: the shortest way back to start
        following = []
        for node in frontier:
            for child in sorted(graph[node] & members):
                if child == start:
                    return " -> ".join([*paths[node], start])
                if child not in paths:
                    paths[child] = [*paths[node], child]
                    following.append(child)
        frontier = following
    raise AssertionError(f"{component} is not a circle")


def _describe(graph: Mapping[str, set[str]], found: list[list[str]]) -> str:
    return "\n".join(f"  {', '.join(c)}\n    e.g. {loop(graph, c)}" for c in found)


def test_no_module_imports_itself_around_a_loop() -> None:
    graph = import_graph()
    found = circles(graph)
    assert not found, f"import circles among slurmx modules:\n{_describe(graph, found)}"


def _culprits(graph: Mapping[str, set[str]], packages: list[str]) -> str:
    """The module imports that tie the given subpackages together."""
    inside = set(packages)

    def top(module: str) -> str:
        return ".".join(module.split(".")[:2])

    return "\n".join(f"    {module} imports {target}" for module, targets in sorted(graph.items())
                     for target in sorted(targets) if top(module) != top(target)
                     and top(module) in inside and top(target) in inside)


def test_no_subpackages_import_each_other() -> None:
    modules = import_graph()
    graph = package_graph(modules)
    found = circles(graph)
    assert not found, "import circles among slurmx's subpackages:\n" + "\n".join(
        f"{_describe(graph, [c])}\n{_culprits(modules, c)}" for c in found)


def test_long_modules_say_why() -> None:
    unexplained = []
    for path in sorted(ROOT.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        relative = path.relative_to(ROOT.parent).as_posix()
        lines = len(text.splitlines())
        if lines <= LONG:
            continue
        docstring = ast.get_docstring(ast.parse(text, relative)) or ""
        if not _REASON.search(docstring):
            unexplained.append(f"  {relative} ({lines} lines)")
    assert not unexplained, (f"modules over {LONG} lines need a '{MARKER} ...' sentence in their docstring "
                             "(or a split):\n" + "\n".join(unexplained))


def test_a_reason_starts_a_sentence() -> None:
    assert _REASON.search("Parsers.\n\nLong because every reader shares one guard.")
    assert _REASON.search(f"{MARKER} the table is one piece.")
    assert not _REASON.search(f"Mid-sentence {MARKER} does not count.")
    assert not _REASON.search(f"{MARKER}.")


def test_the_checks_see_a_circle() -> None:
    """The checker itself, on a small graph: the circle, one loop through it, and the subpackage view."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]
    assert loop(graph, ["a", "b", "c"]) == "a -> b -> c -> a"
    assert package_graph({"slurmx.x.m": {"slurmx.y.n"}, "slurmx.y.n": {"slurmx.x.k"}, "slurmx.x.k": set()}) == {
        "slurmx.x": {"slurmx.y"}, "slurmx.y": {"slurmx.x"}}


def test_the_graph_reads_every_kind_of_import() -> None:
    """Lazy and relative imports are edges; `from . import sibling` is an edge to the sibling, not the package."""
    graph = import_graph()
    assert "slurmx.sim.runner" in graph["slurmx.sim.sweep"]
    assert "slurmx.cli.context" in graph["slurmx.cli.preempt"]
    assert "slurmx.cli.preempt" in graph["slurmx.cli.commands"]  # imported inside its lazy loader
    assert "slurmx.cli.app" in graph["slurmx.cli"]  # imported inside the console scripts' functions
    assert "slurmx.hooks.progress" in graph["slurmx.hooks"]  # from .progress import ...
    assert "slurmx.hooks._env" in graph["slurmx.hooks.progress"]  # from . import _env
    assert "slurmx.hooks" not in graph["slurmx.hooks.progress"]


# --- Slurm versions: listed once -------------------------------------------------------------------------------------
# The tested releases are listed in one table (slurmx/slurm/versions.txt, read by slurmx/slurm/versions.py). "A list"
# elsewhere: in Python, a list, tuple or set literal whose elements are all strings, two or more of them tested
# releases, or a string that is nothing but releases ("22.05 24.11", "22.05|24.11"); in the Makefile and the shell
# scripts, a line outside a comment naming two or more. Pairs of (release, expected value) and dicts keyed by
# release are data about one recording each, not lists; prose (docstrings, comments, docs/) and the recordings
# themselves (tests/fixtures/) are not code.
REPO = ROOT.parent
VERSION_TABLE = {"slurmx/slurm/versions.py", "slurmx/slurm/versions.txt"}
SHELL_FILES = ("Makefile", "tests/run-integration", "docker-slurm/*.sh", "docker-slurm/Dockerfile*")
_RELEASE_LIST = re.compile(r"\s*\d+\.\d+(?:\s*[\s,|]\s*\d+\.\d+)+\s*")


def _python_files() -> list[Path]:
    found = [p for top in ("slurmx", "tests", "bench") for p in sorted((REPO / top).rglob("*.py"))
             if "fixtures" not in p.relative_to(REPO).parts]
    return [*found, REPO / "docker-slurm" / "cluster"]


def version_lists(source: str, tested: AbstractSet[str]) -> list[int]:
    """The lines of Python `source` holding a hand-written list of two or more of the `tested` releases."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.List | ast.Tuple | ast.Set) and node.elts and all(
                isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
            named = {e.value for e in node.elts if isinstance(e, ast.Constant)} & tested
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _RELEASE_LIST.fullmatch(node.value):
            named = set(re.findall(r"\d+\.\d+", node.value)) & tested
        else:
            continue
        if len(named) >= 2:
            lines.append(node.lineno)
    return sorted(set(lines))


def shell_version_lists(text: str, tested: AbstractSet[str]) -> list[int]:
    """The lines of a Makefile or shell script naming two or more `tested` releases outside a comment."""
    return [number for number, line in enumerate(text.splitlines(), 1)
            if not line.lstrip().startswith("#") and len(set(re.findall(r"\d+\.\d+", line)) & tested) >= 2]


def test_slurm_versions_are_listed_in_one_table() -> None:
    tested = set(TESTED)
    found = []
    for path in _python_files():
        relative = path.relative_to(REPO).as_posix()
        if relative not in VERSION_TABLE:
            found += [f"  {relative}:{n}" for n in version_lists(path.read_text(encoding="utf-8"), tested)]
    for pattern in SHELL_FILES:
        for path in sorted(REPO.glob(pattern)):
            found += [f"  {path.relative_to(REPO).as_posix()}:{n}"
                      for n in shell_version_lists(path.read_text(encoding="utf-8"), tested)]
    assert not found, ("Slurm versions listed outside slurmx/slurm/versions.txt (read it: slurmx.slurm.versions."
                       "TESTED / RELEASES in Python, awk in shell):\n" + "\n".join(found))


def test_the_version_check_sees_a_list() -> None:
    tested = {"91.01", "91.02"}
    assert version_lists('V = ["91.01", "91.02"]\nW = ("91.02",)\n', tested) == [1]
    assert version_lists('@mark.parametrize("v", {"91.01", "91.02"})\ndef f(): ...\n', tested) == [1]
    assert version_lists('CHOICES = "91.01|91.02"\n', tested) == [1]
    assert version_lists('PAIRS = [("91.01", 7), ("91.02", 8)]\nD = {"91.01": 1, "91.02": 2}\n', tested) == []
    assert version_lists('"""Read on 91.01 and 91.02."""\nX = ["91.01", "90.11"]\n', tested) == []
    assert shell_version_lists('# e.g. 91.01 91.02\nTEST ?= 91.01 91.02\nV ?= 91.02\n', tested) == [2]


# --- CLI modules: all in slurmx/cli/, and library packages never import them ---------------------------------------
# A CLI module parses arguments and prints: every module of `slurmx.cli`. Outside it, a module named `cli`,
# `cli_*` or `*_cli`, or one that defines a click command or group (`@click.command`, `@x.group()` ...), is a CLI
# module in the wrong place. A library package is any other subpackage of slurmx (`slurmx.daemon`, `slurmx.sim` ...):
# what it imports must serve a caller that is not a command line, so it imports nothing from `slurmx.cli` (a helper
# a library needs, such as an error type or a formatter, lives in the library and the CLI imports it from there).
CLI_PACKAGE = "slurmx.cli"
_CLICK_DECORATOR = re.compile(r"^\s*@\w+\.(?:command|group)\b", re.MULTILINE)


def in_cli(module: str) -> bool:
    return module == CLI_PACKAGE or module.startswith(f"{CLI_PACKAGE}.")


def is_cli(module: str, source: str = "") -> bool:
    """Whether `module` is a command line: inside slurmx.cli, named like one, or defining a click command."""
    last = module.rsplit(".", 1)[-1]
    return (in_cli(module) or last == "cli" or last.startswith("cli_") or last.endswith("_cli")
            or bool(_CLICK_DECORATOR.search(source)))


def cli_imports(graph: Mapping[str, set[str]]) -> dict[str, list[str]]:
    """Module outside slurmx.cli -> the slurmx.cli modules it imports."""
    return {module: sorted(t for t in targets if in_cli(t)) for module, targets in sorted(graph.items())
            if not in_cli(module) and any(in_cli(t) for t in targets)}


def cli_outside(modules: Mapping[str, str]) -> list[str]:
    """The CLI modules (name -> source) that are not in slurmx.cli."""
    return sorted(m for m, source in modules.items() if not in_cli(m) and is_cli(m, source))


def test_library_packages_import_no_cli_module() -> None:
    found = cli_imports(import_graph())
    assert not found, ("library packages import CLI modules (move the command into slurmx/cli/, or the helper it "
                       "needs out of the CLI into the library):\n" + "\n".join(
                           f"  {m} imports {', '.join(t)}" for m, t in found.items()))


def test_every_cli_module_is_in_the_cli_package() -> None:
    sources = {name: path.read_text(encoding="utf-8") for name, path in _modules().items()}
    found = cli_outside(sources)
    assert not found, ("CLI modules outside slurmx/cli/ (move each there; its library keeps the work):\n"
                       + "\n".join(f"  {m}" for m in found))


def test_the_cli_check_sees_an_import() -> None:
    graph = {"slurmx.daemon.loop": {"slurmx.cli.output", "slurmx.core.model"}, "slurmx.cli.app": {"slurmx.daemon.loop"},
             "slurmx.cli": {"slurmx.cli.app"}, "slurmx.core.model": set(), "slurmx.demo": {"slurmx.cli"}}
    assert cli_imports(graph) == {"slurmx.daemon.loop": ["slurmx.cli.output"], "slurmx.demo": ["slurmx.cli"]}
    assert cli_outside({"slurmx.sim.whatif_cli": "", "slurmx.cli_context": "", "slurmx.fidelity.cli": "",
                        "slurmx.sim.client": "", "slurmx.cli.sim": "@click.group()\n",
                        "slurmx.daemon.tool": "import click\n\n@click.command()\ndef run() -> None: ...\n",
                        "slurmx.sim.report": "@group.command('x')\n", "slurmx.daemon.main": "click.echo('x')\n"}) == [
        "slurmx.cli_context", "slurmx.daemon.tool", "slurmx.fidelity.cli", "slurmx.sim.report", "slurmx.sim.whatif_cli"]


# --- Policy names: only the policies and the registry switch on them -------------------------------------------------
# Knowledge of a policy lives on its class (`Capabilities`, slurmx/policies/base.py); the rest of slurmx asks the
# declaration. So a registered policy's name is no string literal in slurmx outside slurmx/policies/ (the policies
# and the registry), except in the places below, each of which names a policy to *run* it, as a site config does,
# never to tell policies apart. In tests, a name may be data (`make_policy("fifo")`), but no comparison
# (`policy == "x"`, `policy in {...}`) switches on one. Docstrings are prose.
NAMES_ALLOWED = {
    "slurmx/core/config.py": {"fifo"},  # the site schema's default `policy.name`
    "slurmx/cycle/handover.py": {"fifo"},  # EASY backfill takes the groups a policy cannot place
    "slurmx/cycle/isolate.py": {"fifo"},  # strict FIFO decides a cycle whose policy failed
    "slurmx/cli/demo.py": {"allox", "fitgpp"},  # the demo's two daemon runs
}
TESTS_NAMING_POLICIES = ("tests/sim/test_reproduce_",)  # a reproduction's tests pick its specs by policy, as it does
NAMES_ALLOWED_UNDER = (
    "slurmx/policies/",  # the policies and the registry
    "slurmx/reproduce/",  # each reproduction runs the policies its paper compares
    "slurmx/sim/workloads/",  # workloads carry their paper's name (the allox workload), not a policy choice
)


def _docstrings(tree: ast.AST) -> set[int]:
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body
            and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}


def named_policies(source: str, names: AbstractSet[str]) -> list[tuple[int, str]]:
    """(line, name) of every string literal in `source` that is one of `names`, docstrings aside."""
    tree = ast.parse(source)
    prose = _docstrings(tree)
    return sorted((node.lineno, node.value) for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names
                  and id(node) not in prose)


def _subject(node: ast.expr) -> str:
    """The last identifier of a name or attribute chain (`site.policy.name` -> 'name'), else ''."""
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""


def switches_on_policies(source: str, names: AbstractSet[str]) -> list[tuple[int, str]]:
    """(line, name) of every comparison outside an `assert` between a policy (a variable or attribute called
    `policy`, `name` or ending in 'policy', any case) and one of `names`, alone or in a collection literal. An
    assert states what a test expects; a named pipe called "fifo" is no policy."""
    tree = ast.parse(source)
    asserted = {id(n) for a in ast.walk(tree) if isinstance(a, ast.Assert) for n in ast.walk(a)}
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare) or id(node) in asserted:
            continue
        sides = [node.left, *node.comparators]
        if not any(_subject(side).lower() in {"policy", "name"} or _subject(side).lower().endswith("policy")
                   for side in sides):
            continue
        for side in sides:
            items = side.elts if isinstance(side, ast.List | ast.Tuple | ast.Set) else [side]
            found += [(node.lineno, e.value) for e in items
                      if isinstance(e, ast.Constant) and isinstance(e.value, str) and e.value in names]
    return sorted(found)


def test_no_policy_name_outside_the_policies() -> None:
    from slurmx.policies import available_policies

    names = set(available_policies())
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        relative = path.relative_to(REPO).as_posix()
        if relative.startswith(NAMES_ALLOWED_UNDER):
            continue
        allowed = NAMES_ALLOWED.get(relative, set())
        found += [f"  {relative}:{line}: {name!r}" for line, name in
                  named_policies(path.read_text(encoding="utf-8"), names) if name not in allowed]
    for path in sorted((REPO / "tests").rglob("*.py")):
        if path.relative_to(REPO).as_posix().startswith(TESTS_NAMING_POLICIES):
            continue
        found += [f"  {path.relative_to(REPO).as_posix()}:{line}: {name!r} (a comparison)" for line, name in
                  switches_on_policies(path.read_text(encoding="utf-8"), names)]
    assert not found, ("policy names outside slurmx/policies/: ask the policy's declaration "
                       "(slurmx.policies.base.Capabilities) instead:\n" + "\n".join(found))


def test_the_policy_name_check_sees_a_name() -> None:
    names = {"fifo", "fitgpp"}
    source = ('"""Runs fifo."""\nimport x\n\ndef f(site):\n    """fitgpp only."""\n'
              '    return 0.3 if site.policy.name == "fitgpp" else make("fifo")\n')
    assert named_policies(source, names) == [(6, "fifo"), (6, "fitgpp")]
    assert switches_on_policies(source, names) == [(6, "fitgpp")]
    assert switches_on_policies('k = [n for n in names if name not in {"fifo", "x"}]\n', names) == [(1, "fifo")]
    assert switches_on_policies('if self.POLICY == "fitgpp": pass\n', names) == [(1, "fitgpp")]
    assert switches_on_policies('make_policy("fifo")\nassert site.policy.name == "fifo"\n', names) == []
    assert switches_on_policies('os.mkfifo(p) if kind == "fifo" else p.mkdir()\n', names) == []


# The adapters that wrap another adapter (counting, leases): the enforcer calls down into them, so they import
# nothing of the daemon's enforcement, backend or loop (issue 35: the Slurm wrappers below the enforcer).
SLURM_WRAPPERS = ("slurmx.slurm.wrappers", "slurmx.slurm.recording", "slurmx.daemon.lease")


def test_the_slurm_wrappers_sit_below_the_enforcer() -> None:
    graph = import_graph()
    above = {m: sorted(t for t in graph.get(m, set()) if t.startswith("slurmx.daemon.")) for m in SLURM_WRAPPERS}
    assert all(m in graph for m in SLURM_WRAPPERS), f"a wrapper module is gone: {SLURM_WRAPPERS}"
    assert not any(above.values()), f"Slurm wrappers import the daemon above them: {above}"


# A dry run (`--dry-run`, `--shadow`) is the same daemon on a recording adapter and a scratch store, assembled where
# the daemon is built (issue 35: shadow mode as a recording adapter, the same enforcer, no flag branches): no other
# daemon module reads `dry_run`.
DRY_RUN_ASSEMBLY = {"slurmx/daemon/loop.py", "slurmx/daemon/main.py", "slurmx/daemon/shadow.py"}


def uses_of(source: str, name: str) -> list[int]:
    """Lines where `name` is a variable, an attribute, a parameter or a keyword argument (not words in a string)."""
    lines = set()
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Name) and node.id == name) or (isinstance(node, ast.Attribute) and node.attr == name) \
                or (isinstance(node, ast.arg | ast.keyword) and node.arg == name):
            lines.add(getattr(node, "lineno", 0) or getattr(getattr(node, "value", None), "lineno", 0))
    return sorted(lines)


def test_only_the_daemons_assembly_knows_a_dry_run() -> None:
    found = [f"  {relative}:{line}" for path in sorted((ROOT / "daemon").rglob("*.py"))
             if (relative := path.relative_to(REPO).as_posix()) not in DRY_RUN_ASSEMBLY
             for line in uses_of(path.read_text(encoding="utf-8"), "dry_run")]
    assert not found, ("`dry_run` read outside the daemon's assembly: give the code a recording adapter or a scratch "
                       "store where the daemon is built (daemon/loop.py) instead of a flag:\n" + "\n".join(found))


def test_the_dry_run_check_sees_a_use() -> None:
    assert uses_of("if self.dry_run:\n    pass\n", "dry_run") == [1]
    assert uses_of("def f(*, dry_run=False):\n    g(\n      dry_run=dry_run)\n", "dry_run") == [1, 3]
    assert uses_of("@dataclass\nclass E:\n    dry_run: bool = False\n", "dry_run") == [3]
    assert uses_of('"""A dry run: no dry_run flag."""\nx = "dry_run"\n', "dry_run") == []
