"""Shipped scenario files. Each preset is a TOML scenario whose `name`,
`description` and `source` say what it shows and where it comes from;
`ccarena list experiments` lists them and any command that takes a scenario
file also takes a preset name.

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


def preset_names() -> list[str]:
    return sorted(p.stem for p in _DIR.glob("*.toml"))


def preset_path(name: str) -> Path | None:
    p = _DIR / f"{name}.toml"
    return p if p.exists() else None


def preset_doc(name: str) -> dict:
    doc = tomllib.loads((_DIR / f"{name}.toml").read_text())
    doc.setdefault("name", name)
    return doc


def preset_catalogue() -> list[dict]:
    """Name, description, source, notes, run counts and what the engine lacks for every preset."""
    from ...experiments.runner import missing_features
    from ...experiments.sweep import parse_sweep, _available_ccas, _SHORTHANDS_CCA_FIELDS

    available = _available_ccas()
    out = []
    for name in preset_names():
        doc = preset_doc(name)
        sw = parse_sweep(doc)
        ccas = {f.get("cca") for f in doc.get("flows", []) if isinstance(f, dict)}
        if sw is not None:
            for a in sw.axes:
                for field, col in zip(a.fields, zip(*a.values)):
                    if field.endswith(_SHORTHANDS_CCA_FIELDS):
                        ccas |= set(col)
        missing = [f"cca:{c}" for c in sorted(c for c in ccas if isinstance(c, str) and c not in available)]
        missing += missing_features(doc)
        if sw is None:
            runs = "1"
        else:
            runs = f"{sw.points} x {sw.repetitions}"
            q = sw.quick
            if q:
                runs += f" (quick: x {q.get('repetitions', sw.repetitions)}"
                dur = q.get("run.duration", q.get("duration"))
                runs += f", {dur})" if dur else ")"
        out.append({
            "name": name,
            "description": doc.get("description", ""),
            "source": doc.get("source", ""),
            "notes": doc.get("notes", ""),
            "requires": doc.get("requires", []),
            "missing": missing,
            "runs": runs,
        })
    return out
