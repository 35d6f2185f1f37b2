"""Cache keys of builds hash the code that makes them. They hash its syntax tree, not its
text: reformatting or recommenting that code (ruff format) must not rebuild a kernel."""

from __future__ import annotations

import ast
import hashlib
import inspect
import textwrap


def code_sha256(*functions) -> str:
    """sha256 of the functions' syntax trees (names, code and constants; docstrings too,
    as constants; not layout or comments)."""
    h = hashlib.sha256()
    for f in functions:
        tree = ast.parse(textwrap.dedent(inspect.getsource(f)))
        h.update(ast.dump(tree, annotate_fields=False, include_attributes=False).encode())
    return h.hexdigest()
