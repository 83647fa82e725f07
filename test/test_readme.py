"""The README's Python examples run as written and paste into the REPL: each ```python block, on its own, in a fresh
namespace (a reader copies one block, not the page). They use example-robot-data's robots."""

from __future__ import annotations

import codeop
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"^```python\n(.*?)^```", README.read_text(), re.S | re.M)


def test_readme_has_python_examples():
    assert len(BLOCKS) >= 3


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_python_block_runs_as_written(code, capsys):
    exec(compile(code, f"README.md python block starting {code.splitlines()[0]!r}", "exec"), {"__name__": "readme"})


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_python_block_pastes_into_the_repl(code):
    """Fed line by line as the interactive interpreter reads a paste: an indented block followed
    by dedented code needs a blank line in between, else SyntaxError (and NameErrors after)."""
    pending: list[str] = []
    for number, line in enumerate([*code.splitlines(), ""], start=1):
        pending.append(line)
        try:
            complete = codeop.compile_command("\n".join(pending), "<stdin>", "single")
        except SyntaxError as err:
            pytest.fail(f"README block starting {code.splitlines()[0]!r}, line {number} {line!r}: {err.msg}")
        if complete is not None:
            pending = []
    assert pending == [], "the paste ends inside an unfinished statement"
