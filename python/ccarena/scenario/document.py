"""Scenario documents as written: where one comes from (a TOML file, a preset
name, TOML text), dotted-field overrides (``--set run.duration=10s``), and
writing a document back as TOML. Documents are plain dicts; checking them is
``model``'s work.
"""

from __future__ import annotations

import copy
import json
import re
import tomllib
from pathlib import Path
from typing import Any

from ..errors import ScenarioError
from .presets import preset_path

__all__ = ["read_document", "parse_toml", "check_depth", "apply_overrides", "parse_override", "dump_toml", "expand_star"]


# What a scenario document may be: its size, and how deeply its tables, arrays
# and dotted keys nest (the deepest shipped one nests 4 levels). Both are
# checked before parsing: TOML's parser recurses into nested arrays and takes
# time quadratic in a dotted key's length.
MAX_DOCUMENT_BYTES = 1 << 20
MAX_DEPTH = 32
_DEEP_DOTTED = re.compile(r"(?:[\w\"'-]+\s*\.\s*){%d,}" % MAX_DEPTH)
_DEEP_BRACKETS = re.compile(r"(?:[\[{]\s*){%d,}" % MAX_DEPTH)


def parse_toml(text: str, path: str | None = None) -> dict:
    where = path or "scenario"
    if len(text) > MAX_DOCUMENT_BYTES:
        raise ScenarioError("", f"{where}: {len(text)} characters; a scenario may have at most {MAX_DOCUMENT_BYTES // 1024} KiB")
    if _DEEP_DOTTED.search(text) or _DEEP_BRACKETS.search(text):
        raise ScenarioError("", f"{where}: keys or values nest more than {MAX_DEPTH} levels deep")
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError("", f"{where}: not valid TOML: {_escaped(str(e))}") from None
    except RecursionError:
        raise ScenarioError("", f"{where}: keys or values nest more than {MAX_DEPTH} levels deep") from None
    check_depth(doc, where)
    return doc


def _escaped(text: str) -> str:
    return text.encode("ascii", "backslashreplace").decode("ascii")[:200]


def check_depth(doc: Any, where: str = "scenario") -> None:
    """Refuses a document whose tables and arrays nest more than MAX_DEPTH levels
    (checked without recursion, so any input is safe to check)."""
    stack = [(doc, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ScenarioError("", f"{where}: keys or values nest more than {MAX_DEPTH} levels deep")
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)


def read_document(source: str | Path) -> tuple[dict, str | None]:
    """The document `source` names and the file it came from (None for text):
    TOML text (it has a newline), a file path, or a preset name."""
    text = str(source)
    if "\n" in text:
        return parse_toml(text), None
    if "\0" in text or len(text) > 4096:
        raise ScenarioError("", "not a scenario file, preset name or TOML text")
    p = Path(text)
    try:
        is_file = p.is_file()
    except OSError:
        is_file = False
    if not is_file:
        preset = preset_path(text)
        if preset is None:
            if p.suffix == ".toml" or p.exists():
                raise ScenarioError("", f"{text}: no such file")
            raise ScenarioError("", f"{text}: no such file or preset; see `ccarena list experiments`")
        p = preset
    try:
        if p.stat().st_size > MAX_DOCUMENT_BYTES:
            raise ScenarioError("", f"{p.name}: a scenario may have at most {MAX_DOCUMENT_BYTES // 1024} KiB")
        text = p.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise ScenarioError("", f"{p.name}: not a TOML scenario (the file is not UTF-8 text)") from None
    except OSError as e:
        raise ScenarioError("", f"{p.name}: cannot read: {e.strerror or e}") from None
    return parse_toml(text, str(p)), str(p)


_PATH_PART = re.compile(r"([A-Za-z_][\w-]*)(?:\[(\d+)\])?")


def expand_star(path: str, doc: dict, where: str | None = None) -> list[str]:
    """`path` with a `list[*]` part (e.g. `flows[*].rtt`) as one concrete
    path per table of that list: every table that is not a background one
    (background tables keep their values; name them by index, e.g.
    `flows[2].cca`, to change them too), or every table when all are
    background. Paths without `[*]` are returned as they are."""
    if "[*]" not in path:
        return [path]
    head, _, tail = path.partition("[*]")
    seq = doc.get(head) if "." not in head else None
    if not isinstance(seq, list) or not seq:
        raise ScenarioError(where or path, f"{head}[*]: the scenario has no {head} list")
    studied = [i for i, t in enumerate(seq) if not (isinstance(t, dict) and t.get("background") is True)]
    return [f"{head}[{i}]{tail}" for i in (studied or range(len(seq)))]


def apply_overrides(doc: dict, overrides: dict[str, Any]) -> dict:
    """Sets dotted fields, e.g. {'run.duration': '10s', 'flows[0].cca': 'reno',
    'flows[*].rtt': '30ms'} (`[*]`: see `expand_star`)."""
    doc = copy.deepcopy(doc)
    expanded: dict[str, Any] = {}
    for dotted, value in overrides.items():
        for path in expand_star(dotted, doc):
            expanded[path] = value
    for dotted, value in expanded.items():
        parts = dotted.split(".")
        node: Any = doc
        for k, part in enumerate(parts):
            m = _PATH_PART.fullmatch(part)
            if not m:
                raise ScenarioError(dotted, "not a field path such as run.duration or flows[0].cca")
            key, index = m.group(1), m.group(2)
            last = k == len(parts) - 1
            if index is not None:
                seq = node.get(key) if isinstance(node, dict) else None
                if not isinstance(seq, list) or int(index) >= len(seq):
                    raise ScenarioError(dotted, f"{key}[{index}] does not exist")
                if last:
                    seq[int(index)] = value
                else:
                    node = seq[int(index)]
            else:
                if not isinstance(node, dict):
                    raise ScenarioError(dotted, f"{part} is not inside a table")
                if last:
                    node[key] = value
                else:
                    node = node.setdefault(key, {})
    return doc


def parse_override(text: str) -> tuple[str, Any]:
    """'run.duration=10s' -> ('run.duration', '10s'); values use TOML syntax when they can."""
    if "=" not in text:
        raise ScenarioError(text, "expected FIELD=VALUE, e.g. run.duration=10s")
    key, raw = text.split("=", 1)
    key, raw = key.strip(), raw.strip()
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    return key, value


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _toml_key(k: str) -> str:
    """A key as TOML needs it: bare when it can be, else quoted (e.g. "flows[1].rtt")."""
    return k if _BARE_KEY.fullmatch(k) else json.dumps(k)


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"cannot write {v!r} as TOML")


def dump_toml(doc: dict) -> str:
    """Writes a scenario document back as TOML (tables, arrays of tables, inline values)."""
    lines: list[str] = []
    scalars = {k: v for k, v in doc.items() if not isinstance(v, (dict, list)) or (isinstance(v, list) and not all(isinstance(x, dict) for x in v))}
    for k, v in scalars.items():
        lines.append(f"{_toml_key(k)} = {_toml_value(v)}")
    for k, v in doc.items():
        if isinstance(v, dict):
            lines.append(f"\n[{_toml_key(k)}]")
            for kk, vv in v.items():
                lines.append(f"{_toml_key(kk)} = {_toml_value(vv)}")
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            for item in v:
                lines.append(f"\n[[{_toml_key(k)}]]")
                for kk, vv in item.items():
                    lines.append(f"{_toml_key(kk)} = {_toml_value(vv)}")
    return "\n".join(lines).lstrip() + "\n"
