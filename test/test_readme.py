"""The code in README.md and docs/*.md works as written.

Each ```python block runs on its own, in a fresh namespace (a reader copies one block, not the
page), and pastes into the REPL. Blocks in other languages are not run, and each says which it is:
`bash` (commands that need ROS 2, a recording or minutes: their liedyn-replay and liedyn-fleet
options must exist), `yaml` (must parse), `sql`, `text`. A fence without a language is refused, so
no block is skipped silently. The Python examples use example-robot-data's robots."""

from __future__ import annotations

import codeop
import io
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```", re.S | re.M)
NOT_RUN = {"bash", "yaml", "sql", "text"}


def _blocks(language: str) -> list[tuple[str, str]]:
    return [(f"{page.relative_to(ROOT)}:{page.read_text()[:m.start()].count(chr(10)) + 1}", m.group(2))
            for page in PAGES for m in FENCE.finditer(page.read_text()) if m.group(1).strip() == language]


PYTHON = _blocks("python")
IDS = [where for where, _ in PYTHON]


def test_every_block_says_its_language():
    for page in PAGES:
        for m in FENCE.finditer(page.read_text()):
            language = m.group(1).strip()
            line = page.read_text()[:m.start()].count("\n") + 1
            assert language == "python" or language in NOT_RUN or language.startswith("{"), (
                f"{page.relative_to(ROOT)}:{line}: a code block in {language or 'no language'}; "
                f"use python (run by this test) or one of {sorted(NOT_RUN)} (not run)")


def test_readme_and_docs_have_python_examples():
    assert any(where.startswith("README.md") for where in IDS)
    assert len(PYTHON) >= 8


@pytest.mark.parametrize("code", [code for _, code in PYTHON], ids=IDS)
def test_python_block_runs_as_written(code, capsys):
    exec(compile(code, f"python block starting {code.splitlines()[0]!r}", "exec"), {"__name__": "readme"})


@pytest.mark.parametrize("code", [code for _, code in PYTHON], ids=IDS)
def test_python_block_pastes_into_the_repl(code):
    """Fed line by line as the interactive interpreter reads a paste: an indented block followed
    by dedented code needs a blank line in between, else SyntaxError (and NameErrors after)."""
    pending: list[str] = []
    for number, line in enumerate([*code.splitlines(), ""], start=1):
        pending.append(line)
        try:
            complete = codeop.compile_command("\n".join(pending), "<stdin>", "single")
        except SyntaxError as err:
            pytest.fail(f"block starting {code.splitlines()[0]!r}, line {number} {line!r}: {err.msg}")
        if complete is not None:
            pending = []
    assert pending == [], "the paste ends inside an unfinished statement"


@pytest.mark.parametrize("code", [code for _, code in _blocks("yaml")], ids=[w for w, _ in _blocks("yaml")])
def test_yaml_block_parses(code):
    from ruamel.yaml import YAML

    assert YAML(typ="safe").load(io.StringIO(code)) is not None


def _command_options(program: str) -> list[tuple[str, str]]:
    """(where, --option) for every option the bash blocks pass to `program`."""
    found = []
    for where, code in _blocks("bash"):
        for command in re.sub(r"\\\n", " ", code).splitlines():
            words = shlex.split(command, comments=True)
            if program in words:
                found += [(where, w.split("=")[0]) for w in words[words.index(program):] if w.startswith("--")]
    return found


@pytest.mark.parametrize("program, module", [("liedyn-replay", "liedyn_ros.replay.cli"),
                                             ("liedyn-fleet", "liedyn_ros.fleet.cli")])
def test_bash_blocks_use_existing_options(program, module):
    import importlib

    parser = importlib.import_module(module).build_parser()
    known = {option for action in parser._actions for option in action.option_strings}
    unknown = [(where, option) for where, option in _command_options(program) if option not in known]
    assert not unknown, f"{program} has no such options: {unknown}"


def test_ci_runs_the_readmes_test_command_itself():
    """The README's test command is a line of .ci/run, word for word: what a new user types is
    what CI proves."""
    readme = (ROOT / "README.md").read_text()
    first_block = readme.split("```bash\n", 1)[1].split("```", 1)[0]
    commands = [line for line in first_block.splitlines() if line and not line.startswith("#")]
    assert "bash scripts/test.sh" in commands, commands
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert "bash scripts/test.sh" in ci
