"""normalize: comment / blank / docstring removal, helpers moved up, the program unchanged (SPEC §3)."""

from __future__ import annotations

import ast

import pytest

from codethinker.contra.normalize import NormalizeError, normalize_source


def run(text: str, *args):
    ns: dict = {}
    exec(compile(text, "<normalized>", "exec"), ns)
    return ns["f"](*args)


def same_program(before: str, after: str) -> None:
    """The normalized text defines the same functions (docstrings aside) as the original."""
    strip = lambda t: [  # noqa: E731
        ast.dump(n) for n in ast.parse(t).body if not isinstance(n, ast.FunctionDef)
    ]
    assert sorted(strip(before)) == sorted(strip(after))


def test_comments_blank_lines_docstring_removed():
    src = (
        '# header\n\ndef f(x):\n    """Doc\n\n    string."""\n\n'
        "    y = x + 1  # trailing comment stays\n    # a comment\n\n    return y\n"
    )
    n = normalize_source(src)
    assert n.lines == ("def f(x):", "    y = x + 1  # trailing comment stays", "    return y")
    assert n.text == "\n".join(n.lines) + "\n"
    assert n.entry == "f"
    assert run(n.text, 1) == 2


def test_blank_and_comment_lines_inside_strings_are_kept():
    src = 'def f(x):\n    s = """a\n\n    # not a comment\nb"""\n\n    return s + x\n'
    n = normalize_source(src)
    assert n.lines == ("def f(x):", '    s = """a', "", "    # not a comment", 'b"""', "    return s + x")
    assert run(n.text, "!") == run(src, "!") == "a\n\n    # not a comment\nb!"


def test_blank_line_inside_f_string_is_kept():
    src = 'def f(x):\n\n    return f"""<\n\n{x}>"""\n'
    n = normalize_source(src)
    assert n.lines == ("def f(x):", '    return f"""<', "", '{x}>"""')
    assert run(n.text, 1) == "<\n\n1>"


def test_trailing_spaces_inside_a_string_are_kept():
    src = 'def f(x):\n    s = """a   \nb"""\n    return s\n'
    n = normalize_source(src)
    assert run(n.text, 0) == "a   \nb"


def test_docstring_only_removed_when_it_stands_alone():
    # a docstring that is the only statement, or shares a line, is program text: kept
    assert normalize_source('def f(x):\n    """only"""\n').lines == ("def f(x):", '    """only"""')
    n = normalize_source('def f(x):\n    "doc"; y = 1\n    return y\n')
    assert n.lines == ("def f(x):", '    "doc"; y = 1', "    return y")


def test_docstring_of_helper_is_kept():
    src = 'def g():\n    """helper doc"""\n    return 1\ndef f(x):\n    """entry doc"""\n    return g()\n'
    assert normalize_source(src).lines == (
        "def g():",
        '    """helper doc"""',
        "    return 1",
        "def f(x):",
        "    return g()",
    )


def test_module_level_lines_above_f_are_kept_in_place():
    src = "import math\n\nK = 3  # const\n\ndef f(x):\n    return math.floor(x) + K\n"
    n = normalize_source(src)
    assert n.lines == ("import math", "K = 3  # const", "def f(x):", "    return math.floor(x) + K")
    assert run(n.text, 2.5) == 5


def test_helpers_below_f_move_above_it():
    src = "def f(x):\n    return helper(x) + C\n\n# helper\ndef helper(z):\n    return z * 2\nC = 1\n"
    n = normalize_source(src)
    assert n.lines == ("def helper(z):", "    return z * 2", "C = 1", "def f(x):", "    return helper(x) + C")
    assert run(n.text, 3) == run(src, 3) == 7
    same_program(src, n.text)


def test_decorated_helper_below_f_moves_with_its_decorator():
    src = "import functools\ndef f(x):\n    return g(x)\n@functools.cache\ndef g(x):\n    return x + 1\n"
    n = normalize_source(src)
    assert n.lines == (
        "import functools",
        "@functools.cache",
        "def g(x):",
        "    return x + 1",
        "def f(x):",
        "    return g(x)",
    )


def test_moving_lines_never_breaks_the_program():
    src = "def f(x):\n    return x\nalias = f\n"
    try:
        n = normalize_source(src)
    except NormalizeError:
        return  # refusing is fine
    run(n.text, 1)


def test_decorated_entry_keeps_decorator_in_first_lines():
    src = "def deco(g):\n    return g\n\n@deco\ndef f(x):\n    return x\n"
    n = normalize_source(src)
    assert n.lines == ("def deco(g):", "    return g", "@deco", "def f(x):", "    return x")


def test_last_definition_of_f_is_the_entry():
    src = "def f(x):\n    return 1\ndef f(x):\n    return 2\n"
    n = normalize_source(src)
    assert run(n.text, 0) == 2


def test_other_entry_name():
    src = "def has_close_elements(xs, t):\n    '''doc'''\n    return t\n"
    n = normalize_source(src, "has_close_elements")
    assert n.lines == ("def has_close_elements(xs, t):", "    return t")
    assert n.entry == "has_close_elements"


def test_backslash_continuation_and_bracket_blank_lines():
    src = "def f(x):\n    y = (1,\n\n         2)\n    return x \\\n        + y[0]\n"
    n = normalize_source(src)
    assert n.lines == ("def f(x):", "    y = (1,", "         2)", "    return x \\", "        + y[0]")
    assert run(n.text, 1) == 2


def test_tabs_and_trailing_white_space():
    n = normalize_source("def f(x):   \n\treturn x   \n")
    assert n.lines == ("def f(x):", "\treturn x")


def test_idempotent():
    src = '# c\nimport os\ndef f(x):\n    """d"""\n\n    return g(x)\ndef g(y):\n    # c\n    return y\n'
    once = normalize_source(src)
    assert normalize_source(once.text) == once


@pytest.mark.parametrize(
    ("src", "match"),
    [
        ("def g(x):\n    return x\n", "does not define a function 'f'"),
        ("def f(x:\n", "syntax error"),
        ("def f(x):\n    return x\nprint(f(1))\n", "module-level code runs after"),
        ("def f(x):\n    return x\nfor i in []:\n    pass\n", "module-level code runs after"),
        ("class f:\n    pass\n", "does not define"),
        ("f = lambda x: x\n", "does not define"),
        ("\x00", "syntax error"),
    ],
)
def test_errors(src, match):
    with pytest.raises(NormalizeError, match=match):
        normalize_source(src)


def test_normalize_error_is_a_value_error():
    assert issubclass(NormalizeError, ValueError)


@pytest.mark.needs_shared
def test_cruxeval_programs_normalize_and_compile(cruxeval_path):
    import json

    rows = [json.loads(ln) for ln in cruxeval_path.read_text().splitlines() if ln.strip()]
    assert len(rows) == 800
    for row in rows:
        n = normalize_source(row["code"])
        assert all(ln.strip() for ln in n.lines[:1])
        compile(n.text, row["id"], "exec")


@pytest.mark.parametrize(
    "src",
    [
        'def f(x):\n    """doc"""\n    """doc"""\n    x = 1\n    return x\n',
        "def f(x):\n    'a'\n    'b'\n    'c'\n    return x\n",
        'def f(x):\n    """doc"""\n    """only strings"""\n',
    ],
)
def test_normalize_is_idempotent_with_several_leading_strings(src):
    once = normalize_source(src).text
    assert normalize_source(once).text == once
    assert "return x" in once or "only strings" in once
