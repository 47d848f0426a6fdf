"""The docs, the README and the code's comments name only what is in the tree.

A path (`daemon/ingest.py`, docs/cluster.md, `sdk/llm/native.py`) must exist; a backticked code
name must be defined or used in the code: a private name (`_split_well_formed`) or a dotted name
rooted in the tree (`daemon.ingest.points_at_step`, `Emitter.scalar`) must be defined there, a
public one (`episode_scalars`, `RunConfig`, `max_concurrent_runs`) must at least appear in the
code (a library's class the code uses, a settings key it reads). What names an upstream library's
or a tool's own parts, which the tree never spells, is listed in ``ELSEWHERE`` with where it is from.
"""
from __future__ import annotations

import difflib
import fnmatch
import re
import subprocess
from functools import cache
from pathlib import Path

import pytest

from tests.helpers import ROOT

# What the docs and comments name of upstream libraries that reads like the tree's own (a private
# name, or a near miss of a word the code spells), and upstream paths outside an installed package.
ELSEWHERE = {
    "_parse_extended_key",                                 # textual's xterm parser (docs/play.md)
    "_version",                                            # NLE's task registry (its nethack/__init__.py)
    "_optimizers",                                         # XuanCe's agents (docs/envs.md)
    "_timestamp",                                          # W&B's history rows (docs/mirrors.md)
    "_max", "_N",                                          # name suffixes: eval/episode_return_max, agent_N
    "_max_episode_steps",                                  # gymnasium's TimeLimit
    "NormalizeObservation",                                # gymnasium's wrapper
    "n_atoms",                                             # CleanRL's C51 argument
    "qf_loss",                                             # RLlib's SAC metric
    "OnlineTrainerParams",                                 # Tianshou's trainer
    "pursuer_0",                                           # PettingZoo SISL's agent
    "purple_0",                                            # MOSAIC MultiGrid collect's third agent
    "Node.kill_all_processes",                             # Ray's node (ray/_private/node.py)
    "ppo/classic_control/Pendulum-v1.yaml",                # XuanCe's configs folder
}
# upstream repositories' files, not in an installed package: BALROG's (the LLM layer follows it) and
# Tianshou's and RLlib's tests and examples
ELSEWHERE_FOLDERS = ("balrog/", "test/", "examples/")

# where comments are read (docs are read whole)
COMMENTED = (".py", ".tcss", ".toml", ".cfg", ".sh", ".txt")
TOP_PACKAGES = ("daemon", "workers", "mosaic_tui", "tests", "bench", "scripts")
TOP_DIRS = (*TOP_PACKAGES, "docs", ".ci")
# a path a comment gives is a file of the tree when it ends so (runtime files, .json, are not)
SOURCE_EXT = (".py", ".md", ".tcss", ".toml", ".yaml", ".yml", ".txt", ".sh", ".cfg")

THIS = "tests/test_doc_references.py"    # its examples are stale on purpose
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_DOTTED = re.compile(rf"{_IDENT}(?:\.{_IDENT})+")
_REL_PATH = re.compile(r"(?<![\w./$<>`-])((?:[\w*-]+/)+[\w*.-]*\.(?:py|tcss|md|toml|sh))\b")
_PATH = re.compile(r"[\w.*-]+(?:/[\w.*-]+)+/?|[\w*-]+/")
_SPAN = re.compile(r"(?<!`)(``?)([^`\n]+?)\1(?!`)")
# a path in running text: a top-level folder of the tree, then more of it
_TREE_PATH = re.compile(r"(?<![\w./$<>-])((?:daemon|workers|mosaic_tui|docs|tests|bench|scripts|\.ci)/[\w./*-]*[\w*/])")


@cache
def tracked() -> tuple[str, ...]:
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    return tuple(p for p in out.splitlines() if (ROOT / p).exists())


@cache
def tracked_dirs() -> frozenset[str]:
    dirs = set()
    for path in tracked():
        parts = path.split("/")[:-1]
        dirs.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
    return frozenset(dirs)


_DEFS = re.compile(r"^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+(\w+)"
                   r"|^[ \t]*(\w+)[ \t]*(?::[^=\n]+)?=(?!=)"
                   r"|\bself\.(\w+)[ \t]*(?::[^=\n]+)?=(?!=)"
                   r"|^[ \t]*(?:from[ \t]+\S+[ \t]+)?import[ \t]+(.+)", re.M)


# a Python file's strings, comments and names, in one scan (tokenize takes seconds for the tree)
_TOKENS = re.compile(r"""(?P<str>(?<![\w])[rbuRBUfF]{0,2}(?:\"\"\"[\s\S]*?\"\"\"|'''[\s\S]*?'''"""
                     r"""|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'))|(?P<com>\#[^\n]*)|(?P<name>[A-Za-z_]\w*)""")


@cache
def python_file(path: str) -> tuple[str, set[str], set[str]]:
    """One pass over a Python file: its comments and docstrings, the names it defines (functions,
    classes, assigned names and attributes, imports, arguments) and the words its code spells
    (names and the words of its strings)."""
    text = (ROOT / path).read_text(errors="replace")
    comments: list[str] = []
    words: set[str] = set()
    for match in _TOKENS.finditer(text):
        kind = match.lastgroup
        if kind == "name":
            words.add(match.group())
        elif kind == "com":
            comments.append(match.group())
        else:
            string = match.group()
            line_start = text.rfind("\n", 0, match.start()) + 1
            if string.lstrip("rbuRBUfF")[:3] in ('"""', "'''") and not text[line_start:match.start()].strip():
                comments.append(string)       # a docstring, or a bare string that reads as one
            else:
                words.update(re.findall(r"[\w.-]+", string))
                words.update(re.findall(r"\w+", string))
    defined: set[str] = set()
    for match in _DEFS.finditer(text):
        name = match.group(1) or match.group(2) or match.group(3)
        if name:
            defined.add(name)
        elif match.group(4):
            defined.update(re.findall(r"\w+", match.group(4)))
    for args in re.findall(r"\bdef[ \t]+\w+\(([^)]*)\)", text):
        defined.update(re.findall(r"(\w+)[ \t]*[:=,]", args + ","))
    return "\n".join(comments), defined, words | defined


@cache
def code_index() -> tuple[dict[str, set[str]], set[str], set[str]]:
    """Each .py file's defined names, the names defined anywhere, and every word the code spells
    (its names and strings, and the other files of the tree that are not docs)."""
    defined_in: dict[str, set[str]] = {}
    words: set[str] = set()
    for path in tracked():
        if path == THIS:
            continue
        if path.endswith(".py"):
            _, defined, spelled = python_file(path)
            defined_in[path] = defined
            words |= spelled
        elif not path.endswith(".md") and not path.startswith(("docs/", "tests/app/__snapshots__")):
            words.update(re.findall(r"\w+", (ROOT / path).read_text(errors="replace")))
    everywhere = set().union(*defined_in.values())
    return defined_in, everywhere, words


def module_file(dotted: list[str]) -> tuple[str, int] | None:
    """The longest prefix of a dotted name that is a module of the tree: its file, and how many parts it took."""
    for n in range(len(dotted), 0, -1):
        base = "/".join(dotted[:n])
        for candidate in (f"{base}.py", f"{base}/__init__.py"):
            if (ROOT / candidate).is_file():
                return candidate, n
        if n > 1 and base in tracked_dirs():
            return base, n
    return None


@cache
def site_packages() -> Path | None:
    found = sorted((ROOT / ".venv" / "lib").glob("python3*/site-packages"))
    return found[0] if found else None


def upstream_path(ref: str) -> bool | None:
    """True/False: whether a path inside an installed package (`textual/events.py`) exists; None
    when its first part is no installed package (nothing to check it against)."""
    site = site_packages()
    top = ref.split("/")[0]
    if site is None or not top or not (site / top).is_dir():
        return None
    return any(site.glob(ref)) if "*" in ref else (site / ref.rstrip("/")).exists()


def path_exists(ref: str, where: str) -> bool:
    """A path relative to the root, to the file naming it or a folder above that, or the end of a
    tracked path; ``dir/module.Name`` a name defined in that module."""
    ref = ref.rstrip(".,;:")
    if not ref or ref.startswith("/"):
        return True
    here = Path(where).parent
    files = set(tracked())
    for base in [here, *here.parents]:
        candidate = (base / ref).as_posix().rstrip("/") if str(base) != "." else ref.rstrip("/")
        if "*" in candidate:
            if any(fnmatch.fnmatch(p, candidate) or fnmatch.fnmatch(p, candidate + "/*") for p in files):
                return True
        elif candidate in files or candidate in tracked_dirs():
            return True
    tail = ref.rstrip("/")
    if "*" in tail:
        return any(fnmatch.fnmatch(p, "*/" + tail) for p in files)
    if any(p.endswith("/" + tail) for p in files) or any(d.endswith("/" + tail) for d in tracked_dirs()):
        return True
    module, _, name = tail.rpartition(".")
    if module and re.fullmatch(_IDENT, name) and f"{module}.py" in files:
        return name in python_file(f"{module}.py")[1]
    return False


def is_tree_path(ref: str) -> bool:
    """A path whose first folder is one of the tree's (any depth): it must exist."""
    first = ref.split("/")[0]
    return first in TOP_DIRS or any(d == first or d.endswith("/" + first) for d in tracked_dirs())


def check_path(ref: str, where: str, in_code: bool) -> str | None:
    if path_exists(ref, where) or ref in ELSEWHERE or ref.startswith(ELSEWHERE_FOLDERS) or ignored(ref):
        return None
    if is_tree_path(ref):
        return f"{ref}: no such path"
    upstream = upstream_path(ref)
    if upstream is not None:
        return None if upstream else f"{ref}: not in the installed package"
    if in_code and ref.rstrip("/").endswith(SOURCE_EXT):
        return f"{ref}: no such path"
    return None


def ignored(ref: str) -> bool:
    """A file the tree makes and git ignores (bench/results/*.json)."""
    return subprocess.run(["git", "check-ignore", "-q", "--no-index", ref], cwd=ROOT).returncode == 0


@cache
def classes() -> frozenset[str]:
    """The classes the tree defines (not the ones it imports)."""
    out: set[str] = set()
    for path in tracked():
        if path.endswith(".py"):
            out.update(re.findall(r"^[ \t]*class[ \t]+(\w+)", (ROOT / path).read_text(errors="replace"), re.M))
    return frozenset(out)


@cache
def near_words() -> dict[tuple[str, int], list[str]]:
    """The code's words by their first letter and length: where a renamed or mistyped name is looked for."""
    out: dict[tuple[str, int], list[str]] = {}
    for word in code_index()[2]:
        out.setdefault((word[:1].lower(), len(word)), []).append(word)
    return out


def near_miss(name: str) -> str | None:
    """A word of the code that ``name`` reads as a rename or a slip of (`_scalars_csv`: `scalars_csv`)."""
    stem = name.strip("_")
    candidates = [w for n in range(len(stem) - 2, len(stem) + 3)
                  for w in near_words().get((stem[:1].lower(), n), ())]
    close = difflib.get_close_matches(stem, candidates, n=1, cutoff=0.85)
    return close[0] if close else None


def check_name(span: str) -> str | None:
    """Why a backticked span that reads as a code name names nothing in the tree (None: it is fine,
    or it is no name). Private names and dotted names rooted in the tree must be defined there; a
    public name the code never spells is taken for an upstream library's unless it reads as a
    rename or a slip of one the code does spell."""
    name = re.sub(r"\(.*\)$", "", span.strip())
    if not name or name in ELSEWHERE:
        return None
    defined_in, everywhere, words = code_index()
    if _DOTTED.fullmatch(name):
        parts = name.split(".")
        if parts[0] in TOP_PACKAGES:
            found = module_file(parts)
            if found is None:
                return f"no module {name}"
            file, n = found
            rest = parts[n:]
            if rest and file.endswith(".py") and rest[0] not in defined_in.get(file, set()):
                return f"{rest[0]} is not defined in {file}"
            if any(part not in everywhere for part in rest[1:]):
                return "not defined in the tree"
            return None
        if parts[0] in classes():
            # a class of the tree, then what it defines
            if any(part not in everywhere and not part.startswith("__") for part in parts[1:]):
                return "not defined in the tree"
        return None
    if not re.fullmatch(_IDENT, name) or name.startswith("__"):
        return None
    if name.startswith("_"):
        return None if name in everywhere else "not defined in the tree"
    snake = "_" in name and name.lower() == name
    camel = re.fullmatch(r"[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+", name) is not None
    if (snake or camel) and name not in words:
        near = near_miss(name)
        if near:
            return f"the code never spells it (it has {near})"
    return None


def comment_text(path: str) -> str:
    """The comments (and, for Python, the docstrings) of a source file."""
    if path.endswith(".py"):
        return python_file(path)[0]
    text = (ROOT / path).read_text(errors="replace")
    if path.endswith(".tcss"):
        return "\n".join(re.findall(r"/\*.*?\*/", text, re.S))
    return "\n".join(line for line in text.splitlines() if line.lstrip().startswith("#"))


def sources() -> list[str]:
    out = []
    for path in tracked():
        # snapshots are the app's drawings; fixtures are old trees kept as they were
        if path.startswith(("tests/app/__snapshots__", "tests/fixtures/", "var/")) or path == THIS:
            continue
        if path.endswith(".md") or path.endswith(COMMENTED) or path in ("Makefile", ".ci/run"):
            out.append(path)
    return sorted(out)


def stale_references(path: str, text: str) -> list[str]:
    """What ``text`` (a doc's, or a source file's comments) names that the tree does not hold."""
    found = []
    in_code = not path.endswith(".md")
    prose = text if in_code else re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    for match in _TREE_PATH.finditer(text):
        ref = match.group(1)
        if "<" not in ref and "{" not in ref:
            why = check_path(ref, path, in_code)
            if why:
                found.append(f"{path}: {why}")
    if in_code:     # a comment names a file relative to itself, unquoted: `theme_files/*.tcss`
        for match in _REL_PATH.finditer(text):
            ref = match.group(1)
            if not _TREE_PATH.fullmatch(ref) and "<" not in ref:
                why = check_path(ref, path, in_code)
                if why:
                    found.append(f"{path}: {why}")
    for _, span in _SPAN.findall(prose):
        span = span.strip()
        if _PATH.fullmatch(span):
            if not _TREE_PATH.fullmatch(span) and (span.endswith(SOURCE_EXT) or span.endswith("/") or "*" in span):
                why = check_path(span, path, in_code)
                if why:
                    found.append(f"{path}: `{span}`: {why.split(': ', 1)[1]}")
            continue
        why = check_name(span)
        if why:
            found.append(f"{path}: `{span}`: {why}")
    return found


def all_stale() -> list[str]:
    found = []
    for path in sources():
        text = (ROOT / path).read_text(errors="replace")
        found += stale_references(path, text if path.endswith(".md") else comment_text(path))
    return found


def test_every_path_and_code_name_the_docs_and_comments_give_is_in_the_tree():
    stale = all_stale()
    assert not stale, f"{len(stale)} stale references:\n" + "\n".join(stale)


@pytest.mark.parametrize("where, text, says", [
    ("docs/cluster.md", "see `daemon/placement.py` for the backends", "daemon/placement.py"),
    ("docs/architecture.md", "the rows are cut by `_scalars_csv`", "_scalars_csv"),
    ("daemon/runs.py", "# how often they are read (daemon/placement.py)", "daemon/placement.py"),
    ("mosaic_tui/app.tcss", "/* colours come from the theme (themes/*.tcss). */", "themes/*.tcss"),
    ("docs/architecture.md", "`daemon.ingest.points_at_steps` reads back", "points_at_steps"),
    ("docs/architecture.md", "`RunTail.read_newest` takes the lines", "RunTail.read_newest"),
    ("README.md", "the `max_concurrent_runz` key", "max_concurrent_runz"),
    ("docs/architecture.md", "`workers/sdk/descriptor.WorkerDescription`", "WorkerDescription"),
])
def test_a_stale_reference_is_caught(where, text, says):
    stale = stale_references(where, text)
    assert len(stale) == 1 and says in stale[0], stale


@pytest.mark.parametrize("text", [
    "`daemon/placement/` and `daemon/ingest.py`", "`_split_well_formed`", "`daemon.ingest.points_at_step`",
    "`RunTail.read_new`", "`max_concurrent_runs`", "`episode_scalars`", "[the example](workers/example/)",
    "`Algorithm.state_dict`", "`np.fromiter`", "`ppo`", "`--seed random`", "`<home>/runs/<id>/`",
])
def test_what_is_in_the_tree_or_upstream_passes(text):
    assert stale_references("docs/architecture.md", text) == []


if __name__ == "__main__":
    print("\n".join(all_stale()))
