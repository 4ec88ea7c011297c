"""House rules for the project's own text: no tracker issue numbers.

The project's issue tracker is not part of the repository, so a reader cannot look an issue number up: code,
comments, docs, reports and settings say what they refer to in words instead. Links to an external project's
GitHub issues (``github.com/OWNER/REPO/issues/N``) are fine: anyone can follow them.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SUFFIXES = (".py", ".md", ".yaml", ".yml", ".toml", ".sh")

#: "issue" or "issues", an optional "#", then a number; or a bare "(#N)" as GitHub writes a pull request
TRACKER_REFERENCE = re.compile(r"\bissues?\s*#?\s*\d+\b|\(#\d+\)", re.IGNORECASE)
#: an external project's issue or pull request, by URL
EXTERNAL_LINK = re.compile(r"\S*github\.com/[\w.-]+/[\w.-]+/(?:issues|pull)/\d+\S*", re.IGNORECASE)


def project_text_files() -> list[Path]:
    """Every file git knows of (tracked, and new files not ignored) with a text suffix of the project."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout.split("\0")
    return sorted({REPO / name for name in listed if name.endswith(SUFFIXES) and (REPO / name).is_file()})


def tracker_references(text: str) -> list[tuple[int, str]]:
    """(line number, line) of each line naming a tracker issue, external links left out."""
    return [(number, line.strip()) for number, line in enumerate(text.splitlines(), start=1)
            if TRACKER_REFERENCE.search(EXTERNAL_LINK.sub("", line))]


def test_the_pattern_finds_issue_numbers_and_spares_external_links():
    assert tracker_references("see " + "issue" + " 15 for the speech")
    assert tracker_references("Issue" + "s 23 and 32")
    assert tracker_references("a fix " + "(#" + "31)")
    assert tracker_references("the " + "issue #" + "4 variants")
    assert not tracker_references("https://github.com/pytorch/pytorch/" + "issues/" + "1234 (a known bug)")
    assert not tracker_references("the issues of a run; 15 issues; tissue 3")


def test_no_tracker_issue_numbers_in_the_project():
    files = project_text_files()
    assert any(path.name == "params.yaml" for path in files)
    found = [f"{path.relative_to(REPO)}:{number}: {line}"
             for path in files
             for number, line in tracker_references(path.read_text(encoding="utf-8", errors="replace"))]
    assert not found, "tracker issue numbers (say what they refer to instead):\n" + "\n".join(found)
