"""The package's version and build identity.

``__version__`` is stored with every run (run ids hash it) and shown by
`ccarena version`. ``build_id()`` says what computed a run: the engine's
source hash (``_engine.ENGINE_BUILD``, made by ``crates/py/build.rs``) and a
hash of the Python sources that shape a run's input, record and metrics
(the ``scenario``, ``backends`` and ``results`` wings). Every stored run
carries it, so a sweep recognises runs an older build computed
(docs/results.md, "Builds").
"""

import functools
import hashlib
from importlib.metadata import PackageNotFoundError, version as _pkg_version
from pathlib import Path

__all__ = ["__version__", "build_id", "engine_build", "python_build", "UNKNOWN_BUILD"]

try:
    __version__ = _pkg_version("ccarena")
except PackageNotFoundError:  # running from a source tree
    __version__ = "0.0.0+local"

#: The build of runs stored before builds were recorded.
UNKNOWN_BUILD = "unknown"

# The wings whose sources decide what a run computes; presentation and the CLI do not.
_RESULT_WINGS = ("scenario", "backends", "results")


@functools.lru_cache(maxsize=None)
def engine_build() -> str:
    """The engine's source hash (12 hex digits), or "unknown" for an engine
    built before it had one."""
    try:
        from . import _engine  # the compiled extension: imported here so that reading the version needs no engine
    except ImportError:
        return UNKNOWN_BUILD
    return str(getattr(_engine, "ENGINE_BUILD", UNKNOWN_BUILD))[:12]


@functools.lru_cache(maxsize=None)
def python_build() -> str:
    """A hash (8 hex digits) of the package's Python sources and data in the
    wings that shape results, computed once per process."""
    root = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for wing in _RESULT_WINGS:
        files = sorted(p for p in (root / wing).rglob("*") if p.is_file() and p.suffix in (".py", ".toml", ".trace"))
        for p in files:
            h.update(p.relative_to(root).as_posix().encode() + b"\0")
            h.update(p.read_bytes())
            h.update(b"\0")
    return h.hexdigest()[:8]


def build_id() -> str:
    """'<engine>-<python>': the build identity stored with every run."""
    return f"{engine_build()}-{python_build()}"
