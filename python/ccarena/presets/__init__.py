"""Shipped scenario files. Each preset is a TOML scenario whose `name`,
`description` and `source` say what it shows and where it comes from;
`ccarena list experiments` lists them and any command that takes a scenario
file also takes a preset name.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

_DIR = Path(__file__).parent


def preset_names() -> list[str]:
    return sorted(p.stem for p in _DIR.glob("*.toml"))


def preset_path(name: str) -> Path | None:
    p = _DIR / f"{name}.toml"
    return p if p.exists() else None


def preset_catalogue() -> list[dict]:
    """Name, description and source of every preset."""
    out = []
    for name in preset_names():
        doc = tomllib.loads((_DIR / f"{name}.toml").read_text())
        out.append({"name": name, "description": doc.get("description", ""), "source": doc.get("source", "")})
    return out
