"""The package's version: stored with every run (run ids hash it) and shown by
`ccarena version`."""

from importlib.metadata import PackageNotFoundError, version as _pkg_version

__all__ = ["__version__"]

try:
    __version__ = _pkg_version("ccarena")
except PackageNotFoundError:  # running from a source tree
    __version__ = "0.0.0+local"
