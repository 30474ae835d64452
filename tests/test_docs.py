"""The project states what is true now: no file narrates its history by work sessions, rounds of work or
issue numbers (git log holds the history), and the README stays a front page."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ORDINAL = (
    r"(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|thirteenth|"
    r"fourteenth|fifteenth|sixteenth|\d+(?:st|nd|rd|th))"
)
HISTORY = re.compile(
    "|".join(
        (
            rf"\b{ORDINAL}(?:\s+work)?\s+session",
            r"\b(?:this|last|next|previous|earlier|later|that|the same)\s+(?:work\s+)?session\b",
            r"\bissues?\s+#?\d+",
            r"\brounds?\s+(?:\d+\s+)?of\s+work\b|\bwork\s+rounds?\b",
        )
    ),
    re.IGNORECASE,
)
TEXT = {".md", ".py", ".yaml", ".yml", ".toml", ".txt", ".cfg", ".sh", ".ini", ".j2", ".jinja", ""}


def tracked_files() -> list[Path]:
    """The project's files: git's list where this is a checkout, else every file outside build folders."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, text=True).stdout
        files = [ROOT / f for f in out.split("\0") if f]
    except (OSError, subprocess.CalledProcessError):
        skip = {".git", ".venv", "data", "models", "mlruns", ".dvc", "node_modules", "__pycache__"}
        files = [p for p in ROOT.rglob("*") if p.is_file() and not skip & set(p.relative_to(ROOT).parts)]
    return [f for f in files if f.suffix in TEXT and f.is_file() and f != Path(__file__).resolve()]


def history_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if HISTORY.search(line)]


@pytest.mark.parametrize(
    "line",
    [
        "measured in the ninth session",
        "the twelfth session's checkpoint",
        "Table 2 in miniature (issue 10)",
        "see issues 3 and 4",
        "fixed in round 2 of work",
        "the numbered rounds of work",
        "this round of work",
        "as the previous session found",
        "the 14th work session",
    ],
)
def test_the_history_pattern_finds_each_way_of_narrating(line: str) -> None:
    assert history_lines(line) == [line]


@pytest.mark.parametrize(
    "line",
    [
        '@pytest.fixture(scope="session")',
        'args += ["--die-with-parent", "--new-session"]',
        "github.com/volcengine/verl/issues/7495",
        "a requests.Session keeps the connection",
        "the first round trip",
        "bench_judge.py [--rounds 3]",
        "# round 1: every beam, round 2: the best",
    ],
)
def test_the_history_pattern_leaves_technical_words_alone(line: str) -> None:
    assert history_lines(line) == []


def test_no_file_narrates_the_project_history() -> None:
    found = {
        str(f.relative_to(ROOT)): lines
        for f in tracked_files()
        if (lines := history_lines(f.read_text(encoding="utf-8", errors="replace")))
    }
    assert not found, f"history belongs in git log, not in the files: {found}"


def test_the_readme_is_a_front_page() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 150
    for term in ("ConTra", "CRM", "RCS", "DBS"):  # the glossary spells each out
        assert re.search(rf"^\|?\s*\**{term}\**\s*\|", readme, re.MULTILINE), term
    assert "source .venv/bin/activate" in readme
