"""Digests of every shipped preset's run record, to prove that a change to the
code leaves results bit-identical (or to show exactly which presets it moves).

Each preset's base scenario (its sweep table ignored) runs for at most
`--duration` simulated seconds, alone and, for the CUBIC figures, with each
background set-up; the digest is the SHA-256 of the engine's record JSON.

    python tools/preset_digests.py              # print digests
    python tools/preset_digests.py --write F    # store them in F (JSON)
    python tools/preset_digests.py --check F    # compare with F; exit 1 on a difference

tests/test_digests.py checks tests/data/preset_digests.json this way; a change
that moves results on purpose rewrites that file in its own commit, saying why.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys

import ccarena
from ccarena.scenario.presets import preset_names

BACKGROUND_PRESETS = ("cubic-fig8-intra-fairness", "cubic-fig9-inter-rtt-fairness")


def cases() -> list[tuple[str, str, dict]]:
    """(case name, preset, extra overrides) for every digest."""
    out = [(name, name, {}) for name in preset_names()]
    for name in BACKGROUND_PRESETS:
        for bg in ("paper", "testbed"):
            out.append((f"{name}+{bg}", name, {"background": bg}))
    return out


def digest(preset: str, extra: dict, duration_s: float) -> str:
    overrides = {"run.duration": f"{duration_s}s", "run.warmup": "0s", **extra}
    record = ccarena.run(preset, overrides=overrides).record
    text = json.dumps(record, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def compute(duration_s: float) -> dict[str, str]:
    return {case: digest(preset, extra, duration_s) for case, preset, extra in cases()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=10.0, help="simulated seconds per run (default 10)")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--write", metavar="FILE")
    g.add_argument("--check", metavar="FILE")
    args = ap.parse_args()
    got = compute(args.duration)
    if args.write:
        with open(args.write, "w") as f:
            json.dump({"duration_s": args.duration, "digests": got}, f, indent=1, sort_keys=True)
            f.write("\n")
        return 0
    if args.check:
        with open(args.check) as f:
            want = json.load(f)["digests"]
        diff = sorted(k for k in set(want) | set(got) if want.get(k) != got.get(k))
        for k in diff:
            print(f"{k}: {want.get(k, '-')[:12]} -> {got.get(k, '-')[:12]}")
        print(f"{len(got) - len(diff)} of {len(got)} digests unchanged")
        return 1 if diff else 0
    for k, v in got.items():
        print(f"{v[:16]}  {k}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
