"""Every shipped preset is valid and runs: each grid point of its sweep for a
couple of simulated seconds. Algorithms the engine does not have yet are
replaced by cubic (and said so); once they land, these tests run them as
written without any change here."""

import pytest

from ccarena.scenario.units import parse_duration

import ccarena
from ccarena.experiments.catalogue import missing_features, preset_catalogue
from ccarena.experiments.sweep import expand, parse_sweep
from ccarena.scenario.catalogue import cca_catalogue
from ccarena.scenario.presets import preset_doc, preset_names

AVAILABLE = {c["name"] for c in cca_catalogue()}
SHORT = "2s"


def _substitute(doc: dict) -> tuple[dict, set]:
    """The document with unavailable algorithms replaced by cubic, and the names replaced."""
    replaced = set()

    def fix(v):
        if isinstance(v, str) and v not in AVAILABLE and v in KNOWN_FUTURE:
            replaced.add(v)
            return "cubic"
        return v

    import copy

    d = copy.deepcopy(doc)
    for f in d.get("flows", []):
        f["cca"] = fix(f["cca"])
    sw = d.get("sweep", {})
    for key, val in list(sw.items()):
        if key in ("repetitions", "seeds", "quick"):
            continue
        if key == "zip":
            for z in val:
                for k, col in z.items():
                    if k.endswith("cca"):
                        z[k] = [fix(x) for x in col]
        elif key.endswith("cca"):
            sw[key] = list(dict.fromkeys(fix(x) for x in val))
    return d, replaced


# Algorithms other issues are adding; a preset naming anything else is a typo.
from ccarena.experiments.sweep import PLANNED_CCAS as KNOWN_FUTURE  # noqa: E402


def test_every_preset_has_description_and_source():
    cat = preset_catalogue()
    assert len(cat) >= 20
    for p in cat:
        assert p["description"].strip(), p["name"]
        assert p["source"].strip(), p["name"]
        if p["requires"]:
            assert p["notes"].strip(), f"{p['name']} needs features the engine lacks: its notes must say how it runs without"


def test_presets_name_only_known_algorithms():
    for name in preset_names():
        doc = preset_doc(name)
        sw = parse_sweep(doc)
        names = {f["cca"] for f in doc["flows"]}
        if sw:
            for a in sw.axes:
                for field, col in zip(a.fields, zip(*a.values)):
                    if field.endswith(".cca"):
                        names |= set(col)
        assert names <= AVAILABLE | KNOWN_FUTURE, f"{name}: unknown algorithms {names - AVAILABLE - KNOWN_FUTURE}"


@pytest.mark.parametrize("name", preset_names())
def test_preset_runs_every_grid_point(name, capsys):
    doc, replaced = _substitute(preset_doc(name))
    if replaced:
        print(f"{name}: {', '.join(sorted(replaced))} not in the engine yet; ran cubic in their place")
    missing = [m for m in missing_features(doc) if not m.startswith("cca:")]
    if missing:
        print(f"{name}: runs without {', '.join(missing)}")
    doc.setdefault("run", {})
    doc["run"]["duration"] = SHORT
    if doc.get("background", "none") != "none":
        # The flows under study start once the background is established.
        doc["run"]["duration"] = f"{parse_duration(SHORT) / 1e9 + 5}s"
    doc["run"].pop("warmup", None)
    specs = expand(doc, repetitions=1)
    assert specs and all(s.skip_reason is None for s in specs)
    for spec in specs:
        r = ccarena.run(spec.doc)
        assert not r.invariant_violations, (name, spec.params, r.invariant_violations[:1])
        assert len(r.flows) >= 1
        assert r.summary["aggregate_throughput_mbps"] > 0, (name, spec.params)


def test_quick_modes_are_shorter():
    from ccarena.experiments.sweep import apply_quick

    for name in preset_names():
        doc = preset_doc(name)
        sw = parse_sweep(doc)
        if sw and sw.quick:
            q = parse_sweep(apply_quick(doc))
            assert q.repetitions <= sw.repetitions
