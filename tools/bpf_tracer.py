"""Builds the BPF tracers in tools/bpf/ and runs one around a linux-backend run.

Each tracer is a program `tools/bpf/<name>.bpf.c` with a ring buffer map
`records` and a `dropped` counter; `loader.c`, built against the program's
bpftool skeleton, writes the ring's records to a file. Needs root, clang,
bpftool, gcc and libbpf-dev, and a kernel with BTF. The tools that use it
(`kernel_ack_causes.py`, `kernel_bottleneck_drops.py`) parse the records.
"""

from __future__ import annotations

import platform
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent / "bpf"
# The architecture name libbpf's headers expect, as the Makefile's BPF_ARCH.
BPF_ARCH = {"x86_64": "x86", "aarch64": "arm64"}.get(platform.machine(), platform.machine())


def build(into: Path, name: str) -> Path:
    """The loader for tracer `name`, built in `into` with the program as its skeleton."""
    vmlinux = into / "vmlinux.h"
    if not vmlinux.exists():
        with vmlinux.open("w") as f:
            subprocess.run(["bpftool", "btf", "dump", "file", "/sys/kernel/btf/vmlinux", "format", "c"], stdout=f,
                           check=True)
    obj = into / f"{name}.bpf.o"
    subprocess.run(["clang", "-O2", "-g", "-target", "bpf", f"-D__TARGET_ARCH_{BPF_ARCH}", f"-I{into}",
                    "-c", str(HERE / f"{name}.bpf.c"), "-o", str(obj)], check=True)
    with (into / f"{name}.skel.h").open("w") as f:
        subprocess.run(["bpftool", "gen", "skeleton", str(obj), "name", f"{name}_bpf"], stdout=f, check=True)
    loader = into / f"{name}_loader"
    subprocess.run(["gcc", "-O2", f"-DSKEL={name}", f'-DSKEL_HEADER="{name}.skel.h"', f"-I{into}",
                    str(HERE / "loader.c"), "-o", str(loader), "-lbpf", "-lelf", "-lz"], check=True)
    return loader


def traced(name: str, workdir: Path, work: Callable[[], Any]) -> tuple[Path, int | None, Any]:
    """Runs `work()` with tracer `name` attached: the records' file, how
    many records the ring had no room for, and what `work` returned."""
    loader = build(workdir, name)
    out = workdir / f"{name}.records"
    err_path = workdir / f"{name}.err"
    with err_path.open("w+") as err:
        proc = subprocess.Popen([str(loader), str(out)], stderr=err)
        deadline = time.monotonic() + 30
        while "attached" not in err_path.read_text():
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise SystemExit(f"the tracer did not start: {err_path.read_text()[-500:]}")
            time.sleep(0.1)
        try:
            result = work()
        finally:
            proc.send_signal(2)
            proc.wait()
    dropped = err_path.read_text().split("dropped")[-1].strip()
    return out, int(dropped) if dropped.isdigit() else None, result
