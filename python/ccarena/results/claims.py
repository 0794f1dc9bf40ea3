"""Claims: which process computes which run of a results directory.

Two sweeps into one directory must not both compute a run. Before it starts a
run, a sweep claims it: it creates ``DIR/claims/<run id>`` exclusively
(O_CREAT | O_EXCL, atomic on a local file system) holding its pid. A run
claimed by a live process is left to that process; a claim whose process is
gone (killed sweep) is stale and taken over. The claim is removed once the
run is stored (or failed), and every claim still held when the sweep ends.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["Claims"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Claims:
    """The claims of this process in results directory `directory`."""

    def __init__(self, directory: str | Path):
        self.dir = Path(directory) / "claims"
        self.pid = os.getpid()
        self.held: set[str] = set()

    def owner(self, run_id: str) -> int | None:
        """The live process that holds `run_id` (None: nobody, or a dead one)."""
        try:
            pid = int((self.dir / run_id).read_text().strip() or 0)
        except (OSError, ValueError):
            return None
        return pid if pid > 0 and _alive(pid) else None

    def claim(self, run_id: str) -> bool:
        """Claims `run_id`; False if another live process holds it."""
        if run_id in self.held:
            return True
        self.dir.mkdir(parents=True, exist_ok=True)
        path = self.dir / run_id
        for _ in range(3):
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                owner = self.owner(run_id)
                if owner is not None and owner != self.pid:
                    return False
                # Stale (its process is gone) or half-written: take it over.
                try:
                    path.unlink()
                except FileNotFoundError:
                    pass
                continue
            with os.fdopen(fd, "w") as f:
                f.write(f"{self.pid}\n")
            self.held.add(run_id)
            return True
        return False

    def release(self, run_id: str) -> None:
        if run_id in self.held:
            self.held.discard(run_id)
            try:
                (self.dir / run_id).unlink()
            except FileNotFoundError:
                pass

    def release_all(self) -> None:
        for rid in list(self.held):
            self.release(rid)
