"""The shipped experiments as `ccarena list experiments` shows them: each
preset's description, source and notes, how many runs its sweep has, and
what this engine does not provide for it yet (``missing_features``)."""

from __future__ import annotations

from ..errors import ScenarioError
from ..scenario.catalogue import engine_cca_names
from ..scenario.presets import preset_doc, preset_names
from .sweep import CCA_FIELD_SUFFIX, parse_sweep

__all__ = ["preset_catalogue", "missing_features"]


def missing_features(doc: dict) -> list[str]:
    """Entries of the scenario's `requires` list this engine does not provide yet.

    `cca:NAME` entries are checked against the engine's catalogue; every other
    entry (traffic models, path dynamics) names a feature the scenario format
    does not have yet, so it is missing until the preset is updated to use it
    (and the entry removed)."""
    req = doc.get("requires", [])
    if not isinstance(req, list):
        raise ScenarioError("requires", "must be a list of features such as [\"traffic:udp\", \"path:rate-step\"]")
    names = engine_cca_names()
    out = []
    for r in req:
        if not isinstance(r, str):
            raise ScenarioError("requires", f"entries must be strings, got {r!r}")
        if r.startswith("cca:"):
            if r[4:] not in names:
                out.append(r)
        else:
            out.append(r)
    return out


def preset_catalogue() -> list[dict]:
    """Name, description, source, notes, run counts and what the engine lacks for every preset."""
    available = engine_cca_names()
    out = []
    for name in preset_names():
        doc = preset_doc(name)
        sw = parse_sweep(doc)
        ccas = {f.get("cca") for f in doc.get("flows", []) if isinstance(f, dict)}
        if sw is not None:
            for a in sw.axes:
                for field, col in zip(a.fields, zip(*a.values)):
                    if field.endswith(CCA_FIELD_SUFFIX):
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
