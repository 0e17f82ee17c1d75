"""Official prompts as data: a benchmark's own judge prompt, read from its source file at a
pinned commit and turned into the project's prompt format, never copied into this repository.

Why: a paper config should be able to run a benchmark's official judge prompt (IBM's MTRAG
scorer keeps its prompts inside Python functions: an f-string per row, or a Jinja template),
while the repository ships only its own wording. The workflow downloads the official file at the
benchmark's pinned commit (checked by its git blob id); ``adapt`` finds the prompt's assignment
in the file's syntax tree and maps each of its fields onto the project's placeholders:

- an f-string (``f"...{row['response']}..."``): each replacement field's expression, as source
  text, must be a key of ``fields`` (``"row['response']" -> "response"``);
- a plain string with Jinja fields (``{{ response }}``): each name must be a key of ``fields``.

Every other brace is escaped, so the result formats with ``str.format`` like the project's own
templates. The official prompt is one user message with its examples inline: the adapted file has
an empty ``system`` and no ``examples``. A field the map does not name, a missing function or
variable, or an unused placeholder is an error naming the file, the prompt and the field.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

from convrag.errors import ConfigError

_JINJA = re.compile(r"\{\{\s*([A-Za-z_]\w*)\s*\}\}")


@dataclass(frozen=True)
class OfficialPrompt:
    """Where one official prompt lives in its repository and how its fields map onto ours."""

    file: str  # path in the repository
    variable: str  # the name the prompt text is assigned to
    fields: dict[str, str] = field(default_factory=dict)  # field expression (or Jinja name) -> our placeholder
    function: str | None = None  # the function that assigns it (None: module level)


def _escape(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def _assignment(tree: ast.AST, spec: OfficialPrompt, where: str) -> ast.expr:
    scope = tree
    if spec.function:
        scope = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == spec.function), None)
        if scope is None:
            raise ConfigError(f"{where}: no function '{spec.function}'")
    for node in ast.walk(scope):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == spec.variable
                                                  for t in node.targets):
            return node.value
    raise ConfigError(f"{where}: no assignment to '{spec.variable}'"
                      + (f" in function '{spec.function}'" if spec.function else ""))


def _field(name: str, spec: OfficialPrompt, where: str) -> str:
    if name not in spec.fields:
        raise ConfigError(f"{where}: field {name!r} of '{spec.variable}' has no placeholder "
                          f"(mapped: {', '.join(sorted(spec.fields)) or 'none'})")
    return "{" + spec.fields[name] + "}"


def extract_template(source: str, spec: OfficialPrompt, where: str = "official prompt") -> str:
    """The prompt's text with our placeholders (``{response}``), every other brace escaped."""
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        raise ConfigError(f"{where}: not Python source ({e})") from e
    value = _assignment(tree, spec, where)
    if isinstance(value, ast.Constant) and isinstance(value.value, str):  # a Jinja template
        text, out, pos = value.value, [], 0
        for m in _JINJA.finditer(text):
            out += [_escape(text[pos:m.start()]), _field(m.group(1), spec, where)]
            pos = m.end()
        template = "".join(out + [_escape(text[pos:])])
    elif isinstance(value, ast.JoinedStr):  # an f-string
        parts = []
        for v in value.values:
            if isinstance(v, ast.Constant):
                parts.append(_escape(v.value))
            elif isinstance(v, ast.FormattedValue):
                if v.conversion != -1 or v.format_spec is not None:
                    raise ConfigError(f"{where}: field {ast.unparse(v.value)!r} has a conversion or format spec")
                parts.append(_field(ast.unparse(v.value), spec, where))
        template = "".join(parts)
    else:
        raise ConfigError(f"{where}: '{spec.variable}' is not a string or an f-string")
    used = set(re.findall(r"(?<!\{)\{(\w+)\}(?!\})", template))
    unused = sorted(set(spec.fields.values()) - used)
    if unused:
        raise ConfigError(f"{where}: the official prompt has no field for {', '.join(unused)}")
    return template


def adapt(path: str | Path, spec: OfficialPrompt, source: str = "") -> dict:
    """The project's prompt dict for one official prompt file (``source``: where it came from,
    kept in the file so a table can say which prompt ran)."""
    where = f"{path}: {spec.function + '.' if spec.function else ''}{spec.variable}"
    template = extract_template(Path(path).read_text(encoding="utf-8"), spec, where)
    return {"system": "", "examples": [], "user": template.strip("\n"),
            "official": {"source": source or str(path), "file": spec.file, "variable": spec.variable,
                         **({"function": spec.function} if spec.function else {})}}
