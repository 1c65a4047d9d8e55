"""The project's docs stand on their own (issue 31.15): README.md, BENCHMARKS.md and docs/*.md
name no file outside the repository (a clone has nothing beside it, such as ../shared/), and
each relative link points at a file the repository has."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", ROOT / "BENCHMARKS.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")
# a path that climbs out of the file's folder, as a link target or in code spans
CLIMB = re.compile(r"(?<![\w.])(?:\.\./)+[\w.-]+")


def test_no_doc_names_a_path_outside_the_repository() -> None:
    found = []
    for doc in DOCS:
        for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            for m in CLIMB.finditer(line):
                # read from the doc's folder or from the repository's root: either must be a file here
                here = [(base / m.group(0)).resolve() for base in (doc.parent, ROOT)]
                if not any(t.is_relative_to(ROOT) and t.exists() for t in here):
                    found.append(f"{doc.relative_to(ROOT)}:{n}: {m.group(0)}")
    assert not found, "docs name files outside the repository:\n" + "\n".join(found)


def test_every_relative_link_resolves_inside_the_repository() -> None:
    broken = []
    for doc in DOCS:
        for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            for m in LINK.finditer(line):
                href = m.group(1)
                if re.match(r"^[a-z]+:", href):
                    continue  # http(s), mailto
                target = (doc.parent / href).resolve()
                if not target.is_relative_to(ROOT) or not target.exists():
                    broken.append(f"{doc.relative_to(ROOT)}:{n}: {href}")
    assert not broken, "links that a clone cannot follow:\n" + "\n".join(broken)
