"""The linux backend: the same scenario on this machine's kernel TCP, in
network namespaces (docs/linux-backend.md). `run_linux(scenario)` returns a
`RunResult` like `ccarena.run`; `cleanup()` removes leftovers of killed runs."""

from .cleanup import cleanup
from .host import LinuxBackendUnavailable, check_host, linux_cca_names

__all__ = ["run_linux", "cleanup", "LinuxBackendUnavailable", "check_host", "linux_cca_names"]


def run_linux(*args, **kwargs):
    from .backend import run_linux as _run

    return _run(*args, **kwargs)
