"""The program of a code-generation completion, and the format check.

* :func:`extract_program`: the LAST non-blank fenced block tagged python/py/python3/py3 or untagged
  (an unterminated last block counts; the fences are read by
  :func:`codethinker.evaluation.codegen.fenced_blocks`, as for HumanEval and MBPP); with no fence line
  at all, the whole text when it parses as Python; else "" (no program). The last block, because a
  completion that reasons in prose and drafts code ends with its final answer.
* :func:`check_format`: the completion is well formed when it holds exactly one fenced block (of any
  language), that block is Python that parses, and it defines the entry point's class at module
  level with the method in its body. The reason of a failure is one of :data:`REASONS`.

>>> extract_program("Idea.\\n```python\\nx = 1\\n```\\nBetter:\\n```python\\nx = 2\\n```")
'x = 2\\n'
>>> check_format("```python\\nclass Solution:\\n    def f(self):\\n        return 1\\n```", "Solution().f")
(True, None)
>>> check_format("```python\\nclass Solution:\\n    def g(self):\\n        return 1\\n```", "Solution().f")
(False, 'no_entry_point')
"""

from __future__ import annotations

import ast
import re
import warnings

from codethinker.codegen.task import parse_entry
from codethinker.evaluation.codegen import PY_TAGS, fenced_blocks

__all__ = ["REASONS", "check_format", "defines_entry", "extract_program", "parses"]

REASONS = ("no_block", "several_blocks", "not_python", "syntax_error", "no_entry_point")
_FENCE_LINE = re.compile(r"^[ \t]*```")


def parses(code: str) -> bool:
    """``code`` is Python that compiles to an AST (no SyntaxError, no NUL byte, not too deep)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def extract_program(text: str) -> str:
    """The program of ``text`` (see the module docstring); "" when there is none."""
    blocks = [code for tag, code in fenced_blocks(text) if tag in PY_TAGS and code.strip()]
    if blocks:
        return blocks[-1]
    if any(_FENCE_LINE.match(line) for line in text.splitlines()):
        return ""  # only empty blocks, or blocks of other languages
    return text if text.strip() and parses(text) else ""


def defines_entry(code: str, entry_point: str) -> bool:
    """``code`` defines the entry point's class at module level, with the method in its body."""
    cls, method = parse_entry(entry_point)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    for node in tree.body:
        methods = node.body if isinstance(node, ast.ClassDef) and node.name == cls else []
        if any(isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and m.name == method for m in methods):
            return True
    return False


def check_format(text: str, entry_point: str) -> tuple[bool, str | None]:
    """``(True, None)`` when ``text`` is well formed, else ``(False, reason)`` (one of :data:`REASONS`)."""
    blocks = fenced_blocks(text)
    if not blocks:
        return False, "no_block"
    if len(blocks) > 1:
        return False, "several_blocks"
    tag, code = blocks[0]
    if tag not in PY_TAGS:
        return False, "not_python"
    if not code.strip() or not parses(code):
        return False, "syntax_error"
    if not defines_entry(code, entry_point):
        return False, "no_entry_point"
    return True, None
