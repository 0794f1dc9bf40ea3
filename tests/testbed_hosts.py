"""Testbed hosts emulated on this machine, for the testbed backend's end-to-end
tests: one network namespace per host, each running its own OpenSSH server
(Debian's openssh-server) on a control link, key-based login with a key made
for the test, and the experiment links wired as a dumbbell (the routes set as
a real testbed would have them):

    s0 ─┐                       ┌─ r0       control: each host's ctl0 <-> the
    s1 ─┤ L ══ btl ══> R ───────┤           controller namespace (198.19.200.x/30),
        └(bottleneck: L's btl)  └─ r1       where ccarena runs

The controller is a namespace too, so nothing of the test touches the
machine's own network. Namespaces are named ``ccarena-<pid>-tb<host>``: the
CI's check that no ``ccarena-*`` namespace is left covers them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

SSHD = "/usr/sbin/sshd"
HOSTS = ["s0", "s1", "L", "R", "r0", "r1"]
# What the backend may change on a host, compared before and after (namespaced sysctls).
SYSCTLS = [
    "net.ipv4.tcp_wmem", "net.ipv4.tcp_rmem", "net.ipv4.tcp_sack", "net.ipv4.tcp_frto", "net.ipv4.tcp_early_retrans", "net.ipv4.tcp_ecn",
    "net.ipv4.tcp_slow_start_after_idle", "net.ipv4.tcp_no_metrics_save", "net.ipv4.tcp_congestion_control",
]


def unavailable() -> str | None:
    """Why the emulated testbed cannot run here (None: it can)."""
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    if not Path(SSHD).exists():
        return "needs Debian's openssh-server (apt-get install openssh-server)"
    for tool in ("ip", "tc", "ss", "iperf3", "ssh-keygen", "ethtool", "gcc", "pkg-config"):
        if shutil.which(tool) is None:
            return f"needs {tool}"
    if subprocess.run(["pkg-config", "--exists", "libnetfilter_queue"]).returncode != 0:
        return "needs libnetfilter-queue-dev (the delay program is built on the hosts)"
    if shutil.which("iptables-legacy") is None and shutil.which("iptables") is None:
        return "needs iptables"
    try:
        import asyncssh  # noqa: F401
    except ImportError:
        return "needs asyncssh"
    probe = f"ccarena-{os.getpid()}-tbprobe"
    p = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if p.returncode != 0:
        return f"cannot create a network namespace: {p.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def _run(*args: str, input: str | None = None) -> str:
    p = subprocess.run(list(args), capture_output=True, text=True, input=input, timeout=60)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {p.stderr.strip()}")
    return p.stdout


def _ns_sh(ns: str, script: str) -> str:
    return _run("ip", "netns", "exec", ns, "sh", "-ec", script)


class EmulatedTestbed:
    def __init__(self, workdir: Path):
        self.dir = workdir
        self.prefix = f"ccarena-{os.getpid()}-tb"
        self.ctl = self.prefix + "ctl"
        self.created: list[str] = []
        self.sshd_pids: dict[str, int] = {}

    def ns(self, host: str) -> str:
        return self.prefix + host

    def ctl_addr(self, k: int) -> str:
        return f"198.19.200.{4 * k + 2}"

    @property
    def inventory(self) -> Path:
        return self.dir / "inventory.toml"

    # ---- build ----
    def start(self) -> "EmulatedTestbed":
        try:
            self._build()
        except BaseException:
            self.stop()
            raise
        return self

    def _build(self) -> None:
        d = self.dir
        for name in [self.ctl] + [self.ns(h) for h in HOSTS]:
            _run("ip", "netns", "add", name)
            self.created.append(name)
        links = []
        for k, h in enumerate(HOSTS):
            links.append(f"link add c{k} netns {self.ctl} type veth peer name ctl0 netns {self.ns(h)}")
        for i in (0, 1):
            links.append(f"link add s{i} netns {self.ns('L')} type veth peer name eth1 netns {self.ns(f's{i}')}")
            links.append(f"link add r{i} netns {self.ns('R')} type veth peer name eth1 netns {self.ns(f'r{i}')}")
        links.append(f"link add btl netns {self.ns('L')} type veth peer name btl netns {self.ns('R')}")
        _run("ip", "-batch", "-", input="\n".join(links) + "\n")
        ctl = ["ip link set lo up"] + [f"ip link set c{k} up && ip addr add 198.19.200.{4 * k + 1}/30 dev c{k}" for k in range(len(HOSTS))]
        _ns_sh(self.ctl, "\n".join(ctl))
        for k, h in enumerate(HOSTS):
            _ns_sh(self.ns(h), f"ip link set lo up\nip link set ctl0 up\nip addr add {self.ctl_addr(k)}/30 dev ctl0")
        for i in (0, 1):
            _ns_sh(self.ns(f"s{i}"), f"ip link set eth1 up\nip addr add 198.18.{i}.1/24 dev eth1\nip route add default via 198.18.{i}.254 dev eth1")
            _ns_sh(self.ns(f"r{i}"), f"ip link set eth1 up\nip addr add 198.19.{i}.1/24 dev eth1\nip route add default via 198.19.{i}.254 dev eth1")
        _ns_sh(self.ns("L"), "sysctl -qw net.ipv4.ip_forward=1\nip link set btl up\nip addr add 198.18.255.1/24 dev btl\n"
               "ip link set s0 up\nip link set s1 up\nip addr add 198.18.0.254/24 dev s0\nip addr add 198.18.1.254/24 dev s1\n"
               "ip route add 198.19.0.0/24 via 198.18.255.2\nip route add 198.19.1.0/24 via 198.18.255.2")
        _ns_sh(self.ns("R"), "sysctl -qw net.ipv4.ip_forward=1\nip link set btl up\nip addr add 198.18.255.2/24 dev btl\n"
               "ip link set r0 up\nip link set r1 up\nip addr add 198.19.0.254/24 dev r0\nip addr add 198.19.1.254/24 dev r1\n"
               "ip route add 198.18.0.0/24 via 198.18.255.1\nip route add 198.18.1.0/24 via 198.18.255.1")
        # A throwaway client key and host key; the known_hosts file pins the host key.
        _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "id"))
        _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "hostkey"))
        shutil.copy(d / "id.pub", d / "authorized_keys")
        os.chmod(d / "authorized_keys", 0o600)
        hostkey = (d / "hostkey.pub").read_text().split()[:2]
        (d / "known_hosts").write_text("".join(f"{self.ctl_addr(k)} {' '.join(hostkey)}\n" for k in range(len(HOSTS))))
        Path("/run/sshd").mkdir(parents=True, exist_ok=True)  # sshd's privilege-separation directory
        for k, h in enumerate(HOSTS):
            cfg = d / f"sshd-{h}.conf"
            cfg.write_text(
                f"ListenAddress {self.ctl_addr(k)}\nPort 22\nHostKey {d / 'hostkey'}\nPidFile {d / f'sshd-{h}.pid'}\n"
                f"AuthorizedKeysFile {d / 'authorized_keys'}\nPermitRootLogin prohibit-password\nPasswordAuthentication no\n"
                "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nMaxSessions 100\nMaxStartups 100\n"
            )
            _run("ip", "netns", "exec", self.ns(h), SSHD, "-f", str(cfg), "-E", str(d / f"sshd-{h}.log"))
            pidfile = d / f"sshd-{h}.pid"
            for _ in range(200):
                if pidfile.exists() and pidfile.read_text().strip():
                    break
                time.sleep(0.02)
            self.sshd_pids[h] = int(pidfile.read_text())
        self.inventory.write_text(self.inventory_text())

    def inventory_text(self, **overrides) -> str:
        d = self.dir
        lines = [
            'name = "emulated-dumbbell"',
            "[defaults]",
            'user = "root"',
            f'key = "{d / "id"}"',
            f'known_hosts = "{d / "known_hosts"}"',
            'interface = "eth1"',
            f'workdir = "{d}"',
            'connect_timeout = "5s"',
        ]
        roles = {"s0": 'role = "sender"\naddress = "198.18.0.1"', "s1": 'role = "sender"\naddress = "198.18.1.1"',
                 "L": 'role = "router"\nbottleneck = true\ninterface = "btl"', "R": 'role = "router"\ninterface = "btl"',
                 "r0": 'role = "receiver"\naddress = "198.19.0.1"', "r1": 'role = "receiver"\naddress = "198.19.1.1"'}
        for k, h in enumerate(HOSTS):
            host = overrides.get(h, {}).get("host", self.ctl_addr(k))
            lines += ["[[hosts]]", f'name = "{h}"', f'host = "{host}"', roles[h]]
            for key, v in overrides.get(h, {}).items():
                if key != "host":
                    lines.append(f"{key} = {v}")
        return "\n".join(lines) + "\n"

    # ---- what the hosts hold ----
    def state(self) -> dict[str, dict]:
        """Per host: root qdiscs, iptables rules, the sysctls the backend may set,
        offloads, processes other than its sshd, scratch directories."""
        out = {}
        for h in HOSTS:
            ns = self.ns(h)
            devs = ["btl"] if h == "L" else ["btl", "r0", "r1"] if h == "R" else ["eth1"]
            qd = {dev: _run("tc", "-n", ns, "qdisc", "show", "dev", dev, "root").strip() for dev in devs}
            ipt = shutil.which("iptables-legacy") or "iptables"
            rules = [r for r in _run("ip", "netns", "exec", ns, ipt, "-S").splitlines() if not r.startswith("-P")]
            sysctls = {k: _run("ip", "netns", "exec", ns, "sysctl", "-n", k).strip() for k in SYSCTLS}
            offl = {dev: _run("ip", "netns", "exec", ns, "ethtool", "-k", dev) for dev in devs}
            offl = {dev: sorted(line for line in text.splitlines() if line.split(":")[0] in (
                "tcp-segmentation-offload", "generic-segmentation-offload", "generic-receive-offload")) for dev, text in offl.items()}
            pids = set(int(x) for x in _run("ip", "netns", "pids", ns).split())
            others = sorted(pids - {self.sshd_pids[h]})
            procs = [_run("ps", "-o", "pid=,args=", "-p", str(p)).strip() for p in others if Path(f"/proc/{p}").exists()]
            out[h] = {"qdiscs": qd, "iptables": rules, "sysctls": sysctls, "offloads": offl, "processes": [p for p in procs if p]}
        out["scratch"] = sorted(str(p) for p in self.dir.glob("ccarena-testbed-*"))
        return out

    def settled_state(self, timeout: float = 10.0) -> dict[str, dict]:
        """The state once the SSH sessions of a finished run have gone (sshd's session processes exit just after)."""
        deadline = time.monotonic() + timeout
        while True:
            st = self.state()
            if all(not st[h]["processes"] for h in HOSTS) or time.monotonic() > deadline:
                return st
            time.sleep(0.2)

    def ccarena(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        """The ccarena CLI run in the controller namespace."""
        env = {**os.environ, "COLUMNS": "200"}
        return subprocess.run(["ip", "netns", "exec", self.ctl, sys.executable, "-m", "ccarena.cli", *args],
                              capture_output=True, text=True, timeout=timeout, env=env, cwd=self.dir)

    # ---- teardown ----
    def stop(self) -> None:
        from ccarena.backends.linux.cleanup import remove_namespace

        for pid in self.sshd_pids.values():
            try:
                os.kill(pid, 15)
            except ProcessLookupError:
                pass
        for ns in reversed(self.created):
            remove_namespace(ns)
        self.created.clear()
