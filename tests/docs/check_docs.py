#!/usr/bin/env python3
"""The documentation's own checks:
- no dangling links: every relative markdown link in the repository's .md files, and every
  `docs/<page>.md` a source file, script or build file names, points at a file that exists (web
  links and links within a page are not checked; a link's #anchor is dropped before the lookup);
- the README's tables stay readable: no cell is over 300 characters.

    python3 tests/docs/check_docs.py <repository root>

Exits 1 listing each finding as file:line: what.
"""

import os
import re
import sys

SKIPPED_DIRS = {".git", "node_modules", "__pycache__"}
SOURCE_SUFFIXES = (".cpp", ".hpp", ".cu", ".cuh", ".h", ".py", ".cmake", ".txt", ".sh", ".md", ".toml", ".cfg")
# [text](target) and ![alt](target); the target ends at whitespace (a title may follow) or ')'.
MARKDOWN_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
DOCS_PAGE = re.compile(r"(?<![\w/.-])docs/[\w./-]+\.md\b")


def repository_files(root):
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs
                            if d not in SKIPPED_DIRS and not d.startswith("build")
                            and not os.path.exists(os.path.join(directory, d, "CMakeCache.txt")))
        for name in sorted(files):
            if name.endswith(SOURCE_SUFFIXES) or name == "CMakeLists.txt":
                yield os.path.join(directory, name)


def dangling(root):
    found = []
    for path in repository_files(root):
        try:
            with open(path, encoding="utf-8") as f:
                lines = f.read().splitlines()
        except UnicodeDecodeError:
            continue
        here = os.path.dirname(path)
        in_fence = False
        for number, line in enumerate(lines, 1):
            targets = []
            if path.endswith(".md"):
                if line.lstrip().startswith("```"):
                    in_fence = not in_fence
                if not in_fence:
                    for target in MARKDOWN_LINK.findall(line):
                        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                            continue
                        targets.append(os.path.join(here, target.split("#", 1)[0]))
            for page in DOCS_PAGE.findall(line):
                targets.append(os.path.join(root, page))
            for target in targets:
                if not os.path.exists(target):
                    found.append(f"{os.path.relpath(path, root)}:{number}: {os.path.relpath(target, root)}")
    return found


MAX_README_CELL = 300


def long_readme_cells(root):
    found = []
    with open(os.path.join(root, "README.md"), encoding="utf-8") as f:
        for number, line in enumerate(f.read().splitlines(), 1):
            if not line.startswith("|"):
                continue
            for cell in line.strip().strip("|").split("|"):
                if len(cell.strip()) > MAX_README_CELL:
                    found.append(f"README.md:{number}: a table cell of {len(cell.strip())} characters "
                                 f"(at most {MAX_README_CELL}): {cell.strip()[:60]}...")
    return found


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    root = os.path.abspath(sys.argv[1])
    links = dangling(root)
    for line in links:
        print(f"dangling: {line}")
    cells = long_readme_cells(root)
    for line in cells:
        print(line)
    print(f"docs: {len(links)} dangling links, {len(cells)} README cells over {MAX_README_CELL} characters")
    return 1 if links or cells else 0


if __name__ == "__main__":
    sys.exit(main())
