"""The testbed's inventory: a TOML file naming the hosts, their roles, how to
reach them over SSH and which interface of each carries the experiment
(docs/testbed-backend.md). Checked like a scenario: an error names the field
(``hosts[2].role``) and what is allowed, and the CLI exits with status 2.

    name = "my-testbed"
    [defaults]                 # any host field below, for every host
    user = "root"
    key = "~/.ssh/id_ed25519"

    [[hosts]]
    name = "client1"           # how commands, records and errors name it
    role = "sender"            # sender | background | receiver | router
    host = "pc1.example.net"   # SSH address (default: the name)
    interface = "eth1"         # the experiment interface
    address = "10.10.1.1"      # its experiment address (receivers: what senders connect to)

    [[hosts]]
    name = "router1"
    role = "router"
    bottleneck = true          # exactly one router: tbf goes on its interface
    interface = "eth2"         # towards the receivers
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import re
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ...errors import ScenarioError
from ...scenario.checks import check_keys, excerpt
from ...scenario.units import UnitError, parse_duration

__all__ = ["Host", "Inventory", "InventoryError", "load_inventory", "ROLES", "DELAY_MODES"]

ROLES = ("sender", "background", "receiver", "router")
DELAY_MODES = ("auto", "netem", "program")
# SSH and control fields any host may set, and [defaults] may set for all.
_SSH_KEYS = {"user", "port", "key", "jump", "known_hosts", "sudo", "modprobe", "connect_timeout", "delay", "workdir"}
_HOST_KEYS = _SSH_KEYS | {"name", "role", "host", "interface", "address", "bottleneck"}
_TOP_KEYS = {"name", "description", "defaults", "hosts"}
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
# An interface name as the kernel allows it (IFNAMSIZ - 1), without what a shell would read.
_IFNAME_RE = re.compile(r"^[A-Za-z0-9_.:@-]{1,15}$")
_USER_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}$")
_SSH_HOST_RE = re.compile(r"^[A-Za-z0-9_.:%-]{1,253}$")


class InventoryError(ScenarioError):
    """An invalid inventory: ``field`` is the dotted path of the offending field."""


@dataclass(frozen=True)
class Host:
    """One machine of the testbed."""

    name: str
    role: str
    host: str
    interface: str
    address: str | None = None
    bottleneck: bool = False
    user: str = "root"
    port: int = 22
    key: str | None = None
    #: "user@host:port" of a jump host (SSH's ProxyJump), or None.
    jump: str | None = None
    #: known_hosts file to check host keys against; None: the SSH library's default; "" (false): no check.
    known_hosts: str | None = None
    #: Run commands under ``sudo -n`` (default: when the user is not root).
    sudo: bool = False
    #: May load kernel modules (``modprobe tcp_<name>``) for algorithms the kernel lacks.
    modprobe: bool = False
    connect_timeout_s: float = 10.0
    #: How receivers delay the ACK path: netem, the project's delay program, or auto (netem where the kernel has it).
    delay: str = "auto"
    #: Where the run's scratch directories go on the host.
    workdir: str = "/tmp"

    @property
    def where(self) -> str:
        """How messages name the host: its name and SSH address."""
        return f"{self.name} ({self.user}@{self.host}:{self.port})" if self.host != self.name else f"{self.name} (port {self.port})"


@dataclass(frozen=True)
class Inventory:
    name: str
    hosts: tuple[Host, ...]
    description: str = ""
    path: str | None = None

    def by_role(self, role: str) -> list[Host]:
        return [h for h in self.hosts if h.role == role]

    @property
    def bottleneck(self) -> Host:
        return next(h for h in self.hosts if h.bottleneck)

    def host(self, name: str) -> Host:
        return next(h for h in self.hosts if h.name == name)

    @property
    def digest(self) -> str:
        """What identifies the testbed in run ids: hosts, roles, interfaces and
        addresses (not the credentials, which do not change what runs)."""
        key = [{"name": h.name, "role": h.role, "host": h.host, "interface": h.interface, "address": h.address,
                "bottleneck": h.bottleneck, "delay": h.delay} for h in self.hosts]
        return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        """The inventory as stored with a run's record (without key paths)."""
        return {"name": self.name, "digest": self.digest,
                "hosts": [{k: v for k, v in asdict(h).items() if k not in ("key", "known_hosts")} for h in self.hosts]}


def _keys(table: Any, allowed: set[str], where: str) -> dict:
    try:
        return check_keys(table, allowed, where)
    except InventoryError:
        raise
    except ScenarioError as e:
        raise InventoryError(e.field, e.message) from None


def _string(value: Any, where: str, pattern: re.Pattern | None = None, what: str = "") -> str:
    if not isinstance(value, str) or not value:
        raise InventoryError(where, f"must be a non-empty string, got {excerpt(value)}")
    if pattern is not None and not pattern.match(value):
        raise InventoryError(where, f"must be {what}, got {excerpt(value)}")
    return value


def _bool(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise InventoryError(where, f"must be true or false, got {excerpt(value)}")
    return value


def _port(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        raise InventoryError(where, f"must be a port number in 1..65535, got {excerpt(value)}")
    return value


def _jump(value: Any, where: str) -> str:
    text = _string(value, where)
    m = re.match(r"^(?:([A-Za-z0-9_][A-Za-z0-9_.-]*)@)?([A-Za-z0-9_.%-]+|\[[0-9A-Fa-f:.]+\])(?::(\d+))?$", text)
    if not m or (m.group(3) and not 1 <= int(m.group(3)) <= 65535):
        raise InventoryError(where, f"must be [user@]host[:port], got {excerpt(value)}")
    return text


def _host(table: Any, k: int, defaults: dict) -> Host:
    where = f"hosts[{k}]"
    _keys(table, _HOST_KEYS, where)
    merged = {**defaults, **table}
    for req in ("name", "role", "interface"):
        if req not in table and not (req == "interface" and req in defaults):
            raise InventoryError(f"{where}.{req}", "missing; every host needs name, role and interface")
    src = lambda key: f"{where}.{key}" if key in table else f"defaults.{key}"  # noqa: E731 - where a merged value came from
    name = _string(merged["name"], f"{where}.name", _NAME_RE, "a host name: letters, digits, '_', '.', '-' (at most 63)")
    role = merged["role"]
    if role not in ROLES:
        raise InventoryError(f"{where}.role", f"unknown role {excerpt(role)}; allowed: {', '.join(ROLES)}")
    out: dict[str, Any] = {"name": name, "role": role}
    out["host"] = _string(merged.get("host", name), src("host"), _SSH_HOST_RE, "a host name or IP address")
    out["interface"] = _string(merged["interface"], src("interface"), _IFNAME_RE, "an interface name (at most 15 characters: letters, digits, '_', '.', ':', '@', '-')")
    if "address" in merged:
        addr = _string(merged["address"], src("address"))
        try:
            ipaddress.ip_address(addr)
        except ValueError:
            raise InventoryError(src("address"), f"must be an IP address, got {excerpt(addr)}") from None
        out["address"] = addr
    elif role == "receiver":
        raise InventoryError(f"{where}.address", "missing; a receiver needs its experiment address (the senders connect to it)")
    if "bottleneck" in table:
        out["bottleneck"] = _bool(table["bottleneck"], f"{where}.bottleneck")
        if out["bottleneck"] and role != "router":
            raise InventoryError(f"{where}.bottleneck", f"only a router can be the bottleneck; this host's role is {role!r}")
    if "user" in merged:
        out["user"] = _string(merged["user"], src("user"), _USER_RE, "a user name")
    if "port" in merged:
        out["port"] = _port(merged["port"], src("port"))
    if "key" in merged:
        out["key"] = str(Path(_string(merged["key"], src("key"))).expanduser())
    if "jump" in merged:
        out["jump"] = _jump(merged["jump"], src("jump"))
    if "known_hosts" in merged:
        v = merged["known_hosts"]
        if v is False:
            out["known_hosts"] = ""
        elif isinstance(v, str) and v:
            out["known_hosts"] = str(Path(v).expanduser())
        else:
            raise InventoryError(src("known_hosts"), f"must be a file path or false (no host-key check), got {excerpt(v)}")
    out["sudo"] = _bool(merged["sudo"], src("sudo")) if "sudo" in merged else out.get("user", "root") != "root"
    if "modprobe" in merged:
        out["modprobe"] = _bool(merged["modprobe"], src("modprobe"))
    if "connect_timeout" in merged:
        try:
            t = parse_duration(merged["connect_timeout"])
        except UnitError as e:
            raise InventoryError(src("connect_timeout"), str(e)) from None
        if t <= 0:
            raise InventoryError(src("connect_timeout"), "must be positive")
        out["connect_timeout_s"] = t / 1e9
    if "delay" in merged:
        if merged["delay"] not in DELAY_MODES:
            raise InventoryError(src("delay"), f"unknown delay mode {excerpt(merged['delay'])}; allowed: {', '.join(DELAY_MODES)}")
        out["delay"] = merged["delay"]
    if "workdir" in merged:
        wd = _string(merged["workdir"], src("workdir"), re.compile(r"^/[A-Za-z0-9_./-]*$"), "an absolute path (letters, digits, '_', '.', '/', '-')")
        out["workdir"] = wd.rstrip("/") or "/"
    return Host(**out)


def parse_inventory(doc: Any, path: str | None = None) -> Inventory:
    """The inventory of a parsed TOML document, checked."""
    _keys(doc, _TOP_KEYS, "")
    defaults = _keys(doc.get("defaults", {}), _SSH_KEYS | {"interface"}, "defaults")
    hosts_doc = doc.get("hosts")
    if not isinstance(hosts_doc, list) or not hosts_doc:
        raise InventoryError("hosts", "missing; list the machines as [[hosts]] tables (name, role, interface, ...)")
    hosts = [_host(t, k, defaults) for k, t in enumerate(hosts_doc)]
    seen: dict[str, int] = {}
    for k, h in enumerate(hosts):
        if h.name in seen:
            raise InventoryError(f"hosts[{k}].name", f"{h.name!r} is already the name of hosts[{seen[h.name]}]")
        seen[h.name] = k
    for role in ("sender", "receiver"):
        if not any(h.role == role for h in hosts):
            raise InventoryError("hosts", f"no host with role {role!r}; a run needs at least one sender, one receiver and one bottleneck router")
    bottlenecks = [k for k, h in enumerate(hosts) if h.bottleneck]
    if not bottlenecks:
        routers = [k for k, h in enumerate(hosts) if h.role == "router"]
        where = f"hosts[{routers[0]}].bottleneck" if routers else "hosts"
        raise InventoryError(where, "no bottleneck router: mark the router whose interface carries the bottleneck with bottleneck = true")
    if len(bottlenecks) > 1:
        raise InventoryError(f"hosts[{bottlenecks[1]}].bottleneck", f"only one router can be the bottleneck; hosts[{bottlenecks[0]}] is already")
    name = doc.get("name", Path(path).stem if path else "testbed")
    if not isinstance(name, str) or not name:
        raise InventoryError("name", f"must be a non-empty string, got {excerpt(name)}")
    description = doc.get("description", "")
    if not isinstance(description, str):
        raise InventoryError("description", f"must be a string, got {excerpt(description)}")
    return Inventory(name=name, hosts=tuple(hosts), description=description, path=path)


def load_inventory(source: str | Path | dict | Inventory) -> Inventory:
    """An inventory from a file path, TOML text, a dict or an Inventory."""
    if isinstance(source, Inventory):
        return source
    if isinstance(source, dict):
        return parse_inventory(source)
    text = str(source)
    path = None
    if "\n" not in text:
        p = Path(text)
        if not p.is_file():
            raise InventoryError("", f"{text}: no such inventory file")
        try:
            text = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise InventoryError("", f"{p.name}: cannot read the inventory: {getattr(e, 'strerror', None) or e}") from None
        path = str(p)
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise InventoryError("", f"{Path(path).name if path else 'inventory'}: not valid TOML: {e}") from None
    return parse_inventory(doc, path)
