"""Congestion control written in Python, for prototyping without touching Rust.

Subclass ``CongestionControl``, give it a ``name``, and define the hooks you
need; they mirror Linux's ``struct tcp_congestion_ops`` and the engine calls
them exactly where the kernel would. Each hook receives ``tp``, the socket
(cwnd, ssthresh, cwnd_cnt, snd_una, snd_nxt, packets_out, delivered, srtt_us,
min_rtt_us, ca_state, mss, jiffies, hz, mstamp_us, pacing_rate, ... plus
Linux's helpers ``slow_start(acked)``, ``cong_avoid_ai(w, acked)``,
``is_cwnd_limited()``, ``in_slow_start()``, ``packets_in_flight()``). Assign
to ``tp.cwnd`` / ``tp.ssthresh`` / ``tp.cwnd_cnt`` / ``tp.pacing_rate`` to act.

Hooks (define what you need; ``ssthresh`` and ``undo_cwnd`` default to Reno's):

    init(tp)                          connection established
    ssthresh(tp) -> int               slow-start threshold after a loss
    cong_avoid(tp, ack, acked)        grow cwnd; `acked` packets newly delivered
    cong_control(tp, rs)              or: own cwnd/pacing on every ACK (rate sample `rs`)
    undo_cwnd(tp) -> int              cwnd to restore after a spurious reduction
    set_state(tp, state)              "open", "disorder", "cwr", "recovery", "loss"
    cwnd_event(tp, event)             "tx_start", "cwnd_restart", "complete_cwr", "loss", ...
    in_ack_event(tp, flags)           every ACK (CA_ACK_* bit flags)
    pkts_acked(tp, sample)            sample.pkts_acked, sample.rtt_us (-1: none), sample.in_flight

Parameters are class attributes listed in ``params``; scenarios set them with
``cca_params``. Use a class in a scenario by registering it
(``ccarena.register_cca(MyCca)``) or by listing its file in the scenario's
top-level ``cca_files``. A hook call costs about half a microsecond, so a
Python algorithm runs a few times slower than a built-in one (a Reno in Python:
about 2x on the quickstart scenario); results are deterministic all the same.
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
from pathlib import Path
from typing import Any, Iterable

from ..errors import ScenarioError
from ..scenario.catalogue import engine_cca_names

__all__ = [
    "CongestionControl",
    "register_cca",
    "registered_ccas",
    "load_cca_file",
    "load_cca_files",
    "unregister_cca",
    "python_classes",
    "check_params",
]


class CongestionControl:
    #: The name scenarios use (required, unique).
    name: str = ""
    #: One line for `ccarena list ccas`.
    description: str = ""
    #: Where the algorithm comes from.
    source: str = ""
    #: Ask the sender to pace (as Linux does for BBR).
    wants_pacing: bool = False
    #: Tunable parameters and their defaults; become attributes of the instance.
    params: dict[str, Any] = {}

    def __init__(self, **overrides: Any):
        for key, value in self.params.items():
            setattr(self, key, value)
        for key, value in overrides.items():
            if key not in self.params:
                allowed = ", ".join(sorted(self.params)) or "none"
                raise TypeError(f"unknown parameter {key!r} for {self.name}; allowed: {allowed}")
            setattr(self, key, value)

    def ssthresh(self, tp) -> int:
        return max(tp.cwnd >> 1, 2)

    def undo_cwnd(self, tp) -> int:
        return max(tp.cwnd, tp.prior_cwnd)


_REGISTRY: dict[str, type[CongestionControl]] = {}


def register_cca(cls: type[CongestionControl]) -> type[CongestionControl]:
    """Makes a Python algorithm available to scenarios under ``cls.name``. Usable as a decorator.

    A class that is not a usable algorithm (not a subclass, no name, no
    cong_avoid or cong_control) is a programming error: ``TypeError``. A name
    that a built-in algorithm has is a ``ScenarioError`` (scenarios could not
    tell the two apart)."""
    if not (inspect.isclass(cls) and issubclass(cls, CongestionControl)):
        raise TypeError(f"{cls!r} is not a subclass of ccarena.CongestionControl")
    if not cls.name or not isinstance(cls.name, str):
        raise TypeError(f"{cls.__name__} needs a `name`")
    if not (hasattr(cls, "cong_avoid") or hasattr(cls, "cong_control")):
        raise TypeError(f"{cls.name} must define cong_avoid or cong_control")
    if cls.name in engine_cca_names():
        raise ScenarioError("cca", f"{cls.name!r} is the name of a built-in algorithm; choose another")
    _REGISTRY[cls.name] = cls
    return cls


def unregister_cca(name: str) -> None:
    _REGISTRY.pop(name, None)


def registered_ccas() -> dict[str, type[CongestionControl]]:
    return dict(_REGISTRY)


def python_classes(names: Iterable[str]) -> dict[str, type[CongestionControl]]:
    """The registered classes of `names` (what the engine is handed to run them)."""
    missing = [n for n in names if n not in _REGISTRY]
    if missing:
        raise ScenarioError("cca", f"Python algorithm {', '.join(missing)} is not registered here; "
                            "list its file in the scenario's cca_files (or register it before running)")
    return {n: _REGISTRY[n] for n in names}


def check_params(name: str, params: dict) -> None:
    """Raises TypeError when the registered algorithm `name` does not take `params`."""
    _REGISTRY[name](**params)


def load_cca_file(path: str | Path) -> list[str]:
    """Imports a Python file and registers every CongestionControl subclass defined in it."""
    p = Path(path)
    if not p.is_file():
        raise ScenarioError("cca_files", f"{path}: no such file")
    module_name = f"ccarena_user_cca_{abs(hash(str(p.resolve())))}"
    if module_name in sys.modules:
        module = sys.modules[module_name]
    else:
        spec = importlib.util.spec_from_file_location(module_name, p)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except KeyboardInterrupt:
            del sys.modules[module_name]
            raise
        except BaseException as e:  # the user's error (sys.exit() included) as a scenario error
            del sys.modules[module_name]
            detail = f"{type(e).__name__}: {e}".splitlines()[0][:200] if str(e) else type(e).__name__
            raise ScenarioError("cca_files", f"{path}: {detail}") from None
    names = []
    for obj in vars(module).values():
        if inspect.isclass(obj) and issubclass(obj, CongestionControl) and obj is not CongestionControl and obj.name:
            try:
                register_cca(obj)
            except TypeError as e:  # a mistake in the user's file, reported like a scenario error
                raise ScenarioError("cca_files", f"{path}: {e}") from None
            names.append(obj.name)
    if not names:
        raise ScenarioError("cca_files", f"{path}: defines no ccarena.CongestionControl subclass with a name")
    return names


def load_cca_files(paths: Iterable[str | Path]) -> list[str]:
    """Loads every file of `paths` (``load_cca_file``); returns the names registered."""
    return [name for p in paths for name in load_cca_file(p)]
