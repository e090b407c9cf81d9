"""The generated parts of the documentation match their generators, and the docs point at what exists.

* docs/options.md is `python scripts/options_table.py --out docs/options.md`;
* README.md's block between the `benchmarks:headline` markers is `python benchmarks/report.py
  --readme README.md` (BENCHMARKS.md's headline: a measured number lives only there);
* every relative link of README.md and docs/*.md names an existing file (and heading);
* every repository path quoted in them exists;
* every environment variable a recipe reads is in the README's knob table.
"""

import importlib.util
import re
import sys
from pathlib import Path

import pytest

from helpers import REPO

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
#: paths quoted in the docs that are not this repository's (fairseq's own files)
FOREIGN_PATHS = {"examples/roberta/README.glue.md"}


def _module(path: Path, name: str):
    sys.path.insert(0, str(path.parent))
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(path.parent))


def test_options_page_is_the_generators_output():
    render = _module(REPO / "scripts" / "options_table.py", "options_table").render
    assert (REPO / "docs" / "options.md").read_text(encoding="utf-8") == render(), (
        "docs/options.md differs from the code's options: run "
        "`python scripts/options_table.py --out docs/options.md`")


def test_readme_benchmark_block_is_the_generators_output():
    report = _module(REPO / "benchmarks" / "report.py", "report")
    text = (REPO / "README.md").read_text(encoding="utf-8")
    start, end = text.find(report.README_START), text.find(report.README_END)
    assert 0 <= start < end, "README.md lost its benchmarks:headline markers"
    assert text[start:end + len(report.README_END)] == report.readme_headline(), (
        "README.md's benchmark block differs from BENCHMARKS.md's headline: run "
        "`python benchmarks/report.py --readme README.md`")


def github_anchor(heading: str) -> str:
    """The id GitHub gives a markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path):
    found = set()
    in_code = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and line.startswith("#"):
            found.add(github_anchor(line.lstrip("#")))
    return found


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_links_resolve(doc):
    text = doc.read_text(encoding="utf-8")
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+://", target):
            continue
        file_part, _, anchor = target.partition("#")
        dest = (doc.parent / file_part).resolve() if file_part else doc
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no such heading in {dest.name}")
    assert not broken, f"{doc.name}: " + "; ".join(broken)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_quoted_repository_paths_exist(doc):
    text = doc.read_text(encoding="utf-8")
    quoted = set(re.findall(
        r"(?<![\w/.-])((?:tests|scripts|benchmarks|fairseq_clear|preprocess|examples|docs)/[\w./-]*\w/?)", text))
    missing = sorted(p for p in quoted - FOREIGN_PATHS if not (REPO / p).exists())
    assert not missing, f"{doc.name} names paths that do not exist: {missing}"


def test_every_recipe_variable_is_in_the_readme_knob_table():
    scripts = [*REPO.glob("examples/*.sh"), *REPO.glob("examples/*/*.sh"), *REPO.glob("examples/*/*.sbatch"),
               REPO / "preprocess" / "prepare.sh"]
    read = set()
    for script in scripts:
        read |= set(re.findall(r"\$\{([A-Z_]+):[-?=]", script.read_text(encoding="utf-8")))
    read |= set(re.findall(r"^([A-Z_]+) \?=", (REPO / "Makefile").read_text(encoding="utf-8"), re.M))
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    table = readme[readme.index("## Recipe knobs"):readme.index("## Benchmarks")]
    rows = " ".join(line.split("|")[1] for line in table.splitlines() if line.startswith("| `"))
    missing = sorted(v for v in read if f"`{v}`" not in rows)
    assert not missing, f"the README's knob table lacks {missing}"
