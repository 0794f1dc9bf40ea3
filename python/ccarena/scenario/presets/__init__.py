"""Shipped scenario files. Each preset is a TOML scenario whose `name`,
`description` and `source` say what it shows and where it comes from;
`ccarena list experiments` lists them (``experiments.catalogue``) and any
command that takes a scenario file also takes a preset name.

A preset may carry `requires` (features it needs that the engine may not
have yet, e.g. "traffic:udp", "path:rate-step"; algorithms it sweeps over are
checked automatically) and `notes` (how it runs until then). Presets are
written with the algorithms and conditions the original experiment used;
runs whose algorithm the engine lacks are skipped with a reason and happen
automatically once it is there.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

_DIR = Path(__file__).parent


__all__ = ["preset_names", "preset_path", "preset_doc"]


def preset_names() -> list[str]:
    return sorted(p.stem for p in _DIR.glob("*.toml"))


def preset_path(name: str) -> Path | None:
    p = _DIR / f"{name}.toml"
    return p if p.exists() else None


def preset_doc(name: str) -> dict:
    doc = tomllib.loads((_DIR / f"{name}.toml").read_text())
    doc.setdefault("name", name)
    return doc
