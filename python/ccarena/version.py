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
import os
import sys
from pathlib import Path

__all__ = ["__version__", "build_id", "engine_build", "python_build", "UNKNOWN_BUILD"]

#: The version when no installed metadata names one (running from a source tree).
LOCAL_VERSION = "0.0.0+local"


def _metadata_version() -> str:
    """The installed distribution's version as ``importlib.metadata.version``
    reads it."""
    from importlib.metadata import PackageNotFoundError, version  # only where the direct read does not apply

    try:
        return version("ccarena")
    except PackageNotFoundError:
        return LOCAL_VERSION


def _read_version() -> str:
    """The installed version, read the way ``importlib.metadata`` finds it
    (the first directory on ``sys.path`` holding a ccarena-*.dist-info) but
    without importing it (a noticeable share of a short run's start-up).
    Anything this does not cover (a zip archive on the path, an egg, two
    candidates in one directory, other metadata finders) is left to
    ``importlib.metadata`` itself."""
    if any(hasattr(f, "find_distributions") and f.__name__ != "PathFinder" for f in map(_finder_type, sys.meta_path)):
        return _metadata_version()
    for entry in sys.path:
        root = entry or "."
        try:
            names = os.listdir(root)
        except NotADirectoryError:  # a zip archive: importlib.metadata reads those
            return _metadata_version()
        except OSError:
            continue
        found = [n for n in names if _names_ccarena(n)]
        if not found:
            continue
        if len(found) != 1 or not found[0].lower().endswith(".dist-info"):
            return _metadata_version()
        try:
            with open(os.path.join(root, found[0], "METADATA"), encoding="utf-8") as fh:
                for line in fh:
                    if not line.strip():
                        break
                    key, sep, value = line.partition(":")
                    if sep and key.strip().lower() == "version":
                        return value.strip()
        except OSError:
            pass
        return _metadata_version()
    return LOCAL_VERSION


def _finder_type(finder: object) -> type:
    return finder if isinstance(finder, type) else type(finder)


def _names_ccarena(name: str) -> bool:
    """Whether a directory entry is metadata of a distribution named ccarena
    (as importlib.metadata matches names: the part before the first '-',
    case and '-'/'_'/'.' folded)."""
    low = name.lower()
    base, ext = os.path.splitext(low)
    if ext not in (".dist-info", ".egg-info", ".egg"):
        return False
    return base.partition("-")[0].replace("-", "_").replace(".", "_") == "ccarena"


__version__ = _read_version()

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
