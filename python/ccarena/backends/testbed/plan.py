"""A scenario mapped onto an inventory: which host runs which flow, and every
shell command each host runs, phase by phase. Pure: the same plan is printed
by ``--dry-run`` (without connecting anywhere) and executed by a run.

Placement: the flows under study go round-robin to the ``sender`` hosts,
background flows to the ``background`` hosts (or the senders when there are
none). Receivers: the flows under study take the receivers in order, round
robin; background flows the receivers those left over (all of them when none
is left). Flow i's iperf3 server listens on port 5201 + i of its receiver.

What each host does (docs/testbed-backend.md has the walk-through):

* every host: a scratch directory ``WORKDIR/ccarena-testbed-TAG-HOST`` with
  ``lib.sh`` (the helpers below), ``restore.sh`` (one line per setting
  changed, written *before* the change and run in reverse at the end) and a
  watchdog that runs the teardown by itself should the controller vanish;
  offloads of the inventory interfaces as the scenario's ``[linux] offloads``;
* bottleneck router: ``tbf`` as the root qdisc of its interface (rate, burst,
  limit as the linux backend), random loss as an iptables ``statistic`` rule,
  a ``tc -s`` sampler;
* receivers: one iperf3 server per flow, and each flow's two-way delay on its
  ACK path (the receiver's interface): netem (one qdisc, or an htb class per
  flow matched by its server port), else the project's delay program
  (NFQUEUE; its source copied and built there) with one queue per flow;
* senders: the flows' TCP sysctls, the algorithm (loaded with modprobe where
  the inventory allows it; ``net.ipv4.tcp_congestion_control`` when the
  host's flows share one) and iperf3 ``-C``; an ``ss -ti`` sampler and the
  TCP counters (/proc/net/snmp, netstat) at the start, the warm-up's end and
  the end.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import ScenarioError
from ...scenario.model import Scenario
from ..linux.mapping import (
    launch_lead_ns,
    PORT, iperf3_cca, iperf3_client_args, iperf3_server_args, loss_match, receiver_sysctls, sender_sysctls, tbf_args,
    tbf_limit_bytes,
)
from .inventory import Host, Inventory

__all__ = ["FlowPlace", "HostPlan", "Plan", "make_plan", "LIB", "delay_source", "MODULES"]

#: Kernel module of each algorithm the kernel may lack (``modprobe tcp_NAME``).
MODULES = {name: f"tcp_{name}" for name in (
    "bic", "highspeed", "htcp", "hybla", "illinois", "scalable", "vegas", "veno", "westwood", "yeah", "lp", "dctcp", "bbr", "cdg", "nv",
    "cubic",
)}
#: TCP options that would change the hosts' routes (the linux backend sets
#: them as route attributes); the testbed backend leaves routes alone.
ROUTE_OPTIONS = ("initial_cwnd", "rto_min_us", "mss", "delayed_ack")
_HEREDOC = "CCARENA_EOF"

# The helpers every phase script sources. Changes are undone by restore.sh,
# whose lines are written before each change and run last-first.
LIB = r"""# ccarena testbed helpers (sourced by every phase on this host)
say_restore() { echo "$*" >> "$D/restore.sh"; }
set_sysctl() {  # KEY VALUE: keeps the current value for the restore, then sets it
    [ -e "$D/saved/$1" ] || { sysctl -n "$1" > "$D/saved/$1"; say_restore "sysctl -qw \"$1=\$(cat $D/saved/$1)\""; }
    sysctl -qw "$1=$2"
}
root_qdisc() {  # IF: the root qdisc, as tc prints it
    tc qdisc show dev "$1" root | head -n 1
}
set_root_qdisc() {  # IF QDISC...: replaces the kernel's default root qdisc; the restore deletes it (the default comes back)
    dev=$1; shift
    [ -e "$D/saved/qdisc.$dev" ] || { root_qdisc "$dev" > "$D/saved/qdisc.$dev"; say_restore "tc qdisc del dev $dev root 2>/dev/null || true"; }
    tc qdisc replace dev "$dev" root "$@"
}
set_offloads() {  # IF on|off: TSO, GSO, GRO; the restore sets them back as they were
    if [ ! -e "$D/saved/offloads.$1" ]; then
        ethtool -k "$1" | awk '/^tcp-segmentation-offload:/{t=$2} /^generic-segmentation-offload:/{g=$2} /^generic-receive-offload:/{r=$2} END{print "tso " t " gso " g " gro " r}' > "$D/saved/offloads.$1"
        say_restore "ethtool -K $1 \$(cat $D/saved/offloads.$1) 2>/dev/null || true"
    fi
    ethtool -K "$1" tso "$2" gso "$2" gro "$2" 2>/dev/null || true
}
add_rule() {  # TABLE-ARGS: an iptables rule appended here and deleted by the restore
    chain=$1; shift
    say_restore "$IPT -D $chain $*"
    $IPT -A "$chain" "$@"
}
start() {  # NAME COMMAND...: in its own session; pid in NAME.pid, output in NAME.out and NAME.err
    name=$1; shift
    setsid sh -c 'echo $$ > "$0.pid"; exec "$@"' "$D/$name" "$@" > "$D/$name.out" 2> "$D/$name.err" < /dev/null &
    n=0; while [ ! -s "$D/$name.pid" ] && [ $n -lt 500 ]; do sleep 0.01; n=$((n + 1)); done
}
stop_all() {  # every process started here (the watchdog aside): TERM, then KILL what is left
    for f in "$D"/*.pid; do [ -e "$f" ] && [ "$f" != "$D/watchdog.pid" ] && { kill -TERM "-$(cat "$f")" 2>/dev/null || true; }; done
    n=0; while [ $n -lt 50 ]; do
        alive=0; for f in "$D"/*.pid; do [ -e "$f" ] && [ "$f" != "$D/watchdog.pid" ] && kill -0 "-$(cat "$f")" 2>/dev/null && alive=1; true; done
        [ $alive = 0 ] && break; sleep 0.1; n=$((n + 1))
    done
    for f in "$D"/*.pid; do [ -e "$f" ] && [ "$f" != "$D/watchdog.pid" ] && { kill -KILL "-$(cat "$f")" 2>/dev/null || true; }; done
    return 0
}
restore_all() {  # every change, last first; then the scratch directory goes
    [ -e "$D/restore.sh" ] && tac "$D/restore.sh" | sh
    cd / && rm -rf "$D"
}
IPT=$(command -v iptables-legacy || command -v iptables || echo iptables)
"""

# Samples at the run's ticks (T0 + k x INTERVAL on this host's clock), skipping
# ticks it fell behind on; each sample is "@ K NOW_NS" and the command's output.
SAMPLER = r"""# sampler: T0_NS INTERVAL_NS TICKS NETSTAT_TICK COMMAND...
T0=$1; I=$2; N=$3; W=$4; shift 4
k=1; snap=0
while [ $k -le $N ]; do
    due=$((T0 + k * I)); now=$(date +%s%N)
    if [ $now -lt $due ]; then d=$((due - now)); sleep "$((d / 1000000000)).$(printf %09d $((d % 1000000000)))"
    elif [ $((now - due)) -gt $I ]; then k=$(( (now - T0) / I )); fi
    echo "@ $k $(date +%s%N)"
    "$@"
    if [ $W -gt 0 ] && [ $k -ge $W ] && [ $snap = 0 ]; then echo "@netstat"; cat /proc/net/snmp /proc/net/netstat; echo "@end"; snap=1; fi
    k=$((k + 1))
done
"""

WATCHDOG = r"""# watchdog: after LIMIT seconds, tear down as the controller would (it kills this first when it does)
sleep "$1"
. "$D/lib.sh"
stop_all
restore_all
"""


def delay_source() -> Path | None:
    """The delay program's C source: beside the built helpers, or in the source tree."""
    here = Path(__file__).resolve()
    for p in (here.parents[1] / "linux" / "bin" / "delay.c", here.parents[4] / "linux" / "delay.c"):
        if p.is_file():
            return p
    return None


@dataclass
class FlowPlace:
    index: int
    sender: str
    receiver: str
    address: str
    port: int
    rtt_ns: int
    cca: str
    background: bool
    start_ns: int


@dataclass
class HostPlan:
    host: Host
    dir: str
    #: Roles this run gives the host (sender, receiver, bottleneck, router).
    roles: list[str] = field(default_factory=list)
    #: Shell lines, by phase.
    setup: list[str] = field(default_factory=list)
    start: list[str] = field(default_factory=list)
    #: (seconds after the run's start, flow, line) of the iperf3 clients.
    launches: list[tuple[float, int, str]] = field(default_factory=list)
    stop: list[str] = field(default_factory=list)
    teardown: list[str] = field(default_factory=list)
    #: Files collected after the run (name in the scratch directory).
    collect: list[str] = field(default_factory=list)
    #: What the run sets, read back after setup.
    sysctls: dict[str, str] = field(default_factory=dict)
    delay: str = ""
    modules: list[str] = field(default_factory=list)
    flows: list[int] = field(default_factory=list)

    def preamble(self) -> str:
        return f"D={shlex.quote(self.dir)}\n. \"$D/lib.sh\"\n"


@dataclass
class Plan:
    scenario: Scenario
    inventory: Inventory
    tag: str
    flows: list[FlowPlace]
    hosts: dict[str, HostPlan]
    notes: list[str]
    t0_placeholder: str = "T0"

    @property
    def duration_ns(self) -> int:
        return self.scenario.engine["run"]["duration"]

    @property
    def interval_ns(self) -> int:
        return self.scenario.engine["run"]["sample_interval"]

    @property
    def ticks(self) -> int:
        return int(self.duration_ns // self.interval_ns)

    def format(self, abbreviate: bool = True) -> str:
        """Every command per host, phase by phase (the dry run's output)."""
        out = [f"# {self.scenario.name} on {self.inventory.name}: {len(self.flows)} flows, run tag {self.tag}"]
        out += [f"# note: {n}" for n in self.notes]
        out.append("# flows: " + "; ".join(f"{f.index}: {f.cca} {f.sender} -> {f.receiver}:{f.port} rtt {f.rtt_ns / 1e6:g} ms"
                                          + (" (background)" if f.background else "") for f in self.flows))
        out.append("# T0_NS: the run's start on the host's clock (ns since the epoch; the controller's start plus the host's measured offset)")
        out.append("# every phase runs as `sh -s` on the host (under `sudo -n` where the inventory says so), after:")
        out += ["#   " + line for line in self.hosts[next(iter(self.hosts))].preamble().splitlines()]
        out.append("# lib.sh, written to the scratch directory at set-up:")
        out += ["#   " + line for line in LIB.strip().splitlines()]
        for name, hp in self.hosts.items():
            out.append("")
            out.append(f"== {hp.host.where}: {', '.join(hp.roles) or 'not used by this run (its settings are only read back)'}; interface {hp.host.interface}")
            if not hp.setup:
                continue
            for phase, lines in (("set-up", hp.setup), ("start", hp.start)):
                out.append(f"-- {phase}")
                out += [_show(line, abbreviate) for line in lines]
            if hp.launches:
                out.append("-- flows (seconds after the start T0)")
                out += [f"[t={t:g}s] {_show(line, abbreviate)}" for t, _, line in hp.launches]
            out.append("-- after the run")
            out += [_show(line, abbreviate) for line in hp.stop]
            if hp.collect:
                out.append("-- collected: " + ", ".join(f"$D/{c}" for c in hp.collect))
            out.append("-- teardown (also on error and Ctrl-C)")
            out += [_show(line, abbreviate) for line in hp.teardown]
        return "\n".join(out) + "\n"


def _show(line: str, abbreviate: bool) -> str:
    """A line as the dry run prints it: long here-documents cut to their first lines."""
    if not abbreviate or f"<<'{_HEREDOC}'" not in line:
        return line
    lines = line.splitlines()
    if len(lines) <= 12:
        return line
    return "\n".join(lines[:4] + [f"    ... ({len(lines) - 5} more lines)", lines[-1]])


def _heredoc(path: str, text: str) -> str:
    if _HEREDOC in text:
        raise ValueError(f"the text for {path} contains the here-document marker")
    return f"cat > {path} <<'{_HEREDOC}'\n{text.rstrip()}\n{_HEREDOC}"


def _place(sc: Scenario, inv: Inventory) -> list[FlowPlace]:
    e = sc.engine
    senders = inv.by_role("sender")
    bg_senders = inv.by_role("background") or senders
    receivers = inv.by_role("receiver")
    n_main = sum(1 for f in e["flows"] if not f.get("background"))
    bg_receivers = receivers[min(n_main, len(receivers)):] or receivers
    out: list[FlowPlace] = []
    k_main = k_bg = 0
    # Each flow starts at its `start` plus its draw of run.start_jitter, the
    # simulator's own instants for the same seed.
    for i, (f, rtt, start) in enumerate(zip(e["flows"], sc.flow_rtts(), sc.flow_starts())):
        if f.get("background"):
            s, r = bg_senders[k_bg % len(bg_senders)], bg_receivers[k_bg % len(bg_receivers)]
            k_bg += 1
        else:
            s, r = senders[k_main % len(senders)], receivers[k_main % len(receivers)]
            k_main += 1
        assert r.address is not None
        out.append(FlowPlace(i, s.name, r.name, r.address, PORT + i, rtt, f["cca"], bool(f.get("background")), start))
    return out


def _merged(flows: list[int], values: list[dict[str, str]], host: str, e: dict) -> dict[str, str]:
    """The sysctls a host's flows need; flows that need different values cannot share it."""
    out: dict[str, str] = {}
    first: dict[str, int] = {}
    for i, vals in zip(flows, values):
        for k, v in vals.items():
            if k in out and out[k] != v:
                raise ScenarioError(f"flows[{i}].tcp", f"needs {k} = {v!r} but flows[{first[k]}] on the same host {host} needs {out[k]!r}; "
                                    "give the testbed one host per setting (sysctls are per host)")
            out.setdefault(k, v)
            first.setdefault(k, i)
    return out


def check_testbed_scenario(sc: Scenario) -> None:
    """What the testbed backend refuses beyond the kernel's limits."""
    for i, f in enumerate(sc.engine["flows"]):
        for opt in ROUTE_OPTIONS:
            if opt in f["tcp"] and not (opt == "delayed_ack" and f["tcp"][opt]) and not (opt == "mss" and f["tcp"][opt] == 1448):
                name = "rto_min" if opt == "rto_min_us" else opt
                raise ScenarioError(f"flows[{i}].tcp.{name}", "the testbed backend leaves the hosts' routes as they are (the linux backend sets this "
                                    "as a route attribute); allowed here: sack, frto, tlp, ecn, slow_start_after_idle, sndbuf, rcvbuf, pacing")


def make_plan(sc: Scenario, inv: Inventory, tag: str, delay_modes: dict[str, str] | None = None,
              available: dict[str, list[str]] | None = None) -> Plan:
    """The plan of one run. `delay_modes` (receiver -> "netem" or "program")
    and `available` (sender -> its kernel's algorithms) come from probing the
    hosts; without them (a dry run) "auto" hosts are shown with netem and every
    algorithm outside the engine's usual built-ins with its modprobe."""
    check_testbed_scenario(sc)
    e = sc.engine
    opts = sc.meta.linux
    flows = _place(sc, inv)
    notes: list[str] = []
    hosts: dict[str, HostPlan] = {}
    for h in inv.hosts:
        hosts[h.name] = HostPlan(host=h, dir=f"{h.workdir.rstrip('/')}/ccarena-testbed-{tag}-{h.name}")
    for f in flows:
        hosts[f.sender].flows.append(f.index)
        hosts[f.receiver].flows.append(f.index)
    duration = e["run"]["duration"]
    interval = e["run"]["sample_interval"]
    ticks = int(duration // interval)
    warm_tick = max(1, -(-e["run"]["warmup"] // interval)) if e["run"]["warmup"] > 0 else 0
    limit_s = int(duration / 1e9) + 300  # the watchdog's patience: the run, set-up, collection, and margin
    offload_state = "on" if opts.get("offloads") else "off"

    for name, hp in hosts.items():
        h = hp.host
        q = shlex.quote
        my = [flows[i] for i in hp.flows]
        sending = [f for f in my if f.sender == name]
        receiving = [f for f in my if f.receiver == name]
        if not (sending or receiving or h.role == "router"):
            continue  # a host this run does not use is left alone (its settings are only read back)
        hp.setup += [
            "umask 077",
            f"mkdir -p {q(hp.dir)}/saved && cd {q(hp.dir)}",
            _heredoc("$D/lib.sh", LIB),
            ". \"$D/lib.sh\"",
            _heredoc("$D/watchdog.sh", WATCHDOG),
            f"start watchdog env D={q(hp.dir)} sh \"$D/watchdog.sh\" {limit_s}",
            f"set_offloads {h.interface} {offload_state}",
        ]
        hp.stop.append("stop_all")
        hp.teardown += ["kill -TERM \"-$(cat \"$D/watchdog.pid\")\" 2>/dev/null || true", "restore_all"]
        if h.bottleneck:
            hp.roles.append("bottleneck")
            hp.setup.append(f"set_root_qdisc {h.interface} {tbf_args(e['network']['bottleneck_rate'], opts['tbf_burst'], tbf_limit_bytes(e['network']['buffer']))}")
            match = loss_match(e["network"]["loss"])
            if match:
                hp.setup.append(f"add_rule FORWARD -o {h.interface} {match}")
            hp.setup.append(_heredoc("$D/sample.sh", SAMPLER))
            hp.start.append(f"start tc sh \"$D/sample.sh\" T0_NS {interval} {ticks} 0 tc -s -j qdisc show dev {h.interface}")
            hp.stop += [f"tc -s -j qdisc show dev {h.interface} > \"$D/tc.final\""]
            hp.collect += ["tc.out", "tc.final"]
            if match:
                hp.stop.append(f"$IPT -L FORWARD -v -x -n > \"$D/loss.count\"")
                hp.collect.append("loss.count")
        elif h.role == "router":
            hp.roles.append("router")
        if sending:
            hp.roles.append("sender")
            sysctls = _merged([f.index for f in sending], [sender_sysctls(e["flows"][f.index]) for f in sending], name, e)
            ccas = sorted({iperf3_cca(f.cca) for f in sending})
            have = set(available.get(name, [])) if available is not None else {"reno", "cubic"}
            for cca in ccas:
                if cca not in have and cca in MODULES:
                    hp.setup.append(f"grep -qw {cca} /proc/sys/net/ipv4/tcp_available_congestion_control || modprobe {MODULES[cca]}")
                    hp.modules.append(MODULES[cca])
            hp.sysctls.update(sysctls)
            hp.setup += [f"set_sysctl {k} {q(v)}" for k, v in sysctls.items()]
            if len(ccas) == 1:
                # The host's default too (iperf3 -C sets each flow's own): where the kernel refuses it (a
                # container may set only the allowed algorithms), the flows still run theirs.
                hp.sysctls["net.ipv4.tcp_congestion_control"] = ccas[0]
                hp.setup.append(f"set_sysctl net.ipv4.tcp_congestion_control {ccas[0]} 2>/dev/null || true")
            hp.setup.append("cat /proc/net/snmp /proc/net/netstat > \"$D/netstat.start\"")
            if not any(line.startswith("cat > $D/sample.sh") for line in hp.setup):
                hp.setup.append(_heredoc("$D/sample.sh", SAMPLER))
            ports = " or ".join(f"dport = :{f.port}" for f in sending)
            hp.start.append(f"start ss sh \"$D/sample.sh\" T0_NS {interval} {ticks} {warm_tick} ss -tinHO state established {q('( ' + ports + ' )')}")
            for f in sending:
                args = iperf3_client_args(e["flows"][f.index], f.address, f.port, duration)
                # Launched iperf3's start-up early unless the flow starts as an iperf3 test (mapping.launch_lead_ns).
                t_launch = (f.start_ns - launch_lead_ns(e["flows"][f.index])) / 1e9
                hp.launches.append((t_launch, f.index, f"start client{f.index} {' '.join(q(a) for a in args)}"))
            hp.stop.append("cat /proc/net/snmp /proc/net/netstat > \"$D/netstat.end\"")
            hp.collect += ["ss.out", "netstat.start", "netstat.end"] + [f"client{f.index}.out" for f in sending] + [f"client{f.index}.err" for f in sending]
        if receiving:
            hp.roles.append("receiver")
            sysctls = _merged([f.index for f in receiving], [receiver_sysctls(e["flows"][f.index]) for f in receiving], name, e)
            for k, v in sysctls.items():
                if k in hp.sysctls and hp.sysctls[k] != v:
                    raise ScenarioError(f"flows[{receiving[0].index}].tcp", f"host {name} both sends and receives flows that need different {k}")
            hp.sysctls.update(sysctls)
            hp.setup += [f"set_sysctl {k} {q(v)}" for k, v in sysctls.items() if not any(line.startswith(f"set_sysctl {k} ") for line in hp.setup)]
            mode = (delay_modes or {}).get(name) or ("netem" if h.delay == "auto" else h.delay)
            hp.delay = mode
            for f in receiving:
                hp.start.append(f"start server{f.index} {' '.join(iperf3_server_args(f.port))}")
                hp.collect.append(f"server{f.index}.out")
            hp.start.append("n=0; for p in " + " ".join(str(f.port) for f in receiving)
                            + "; do until ss -tlnH \"( sport = :$p )\" | grep -q .; do n=$((n + 1)); [ $n -lt 500 ] || exit 1; sleep 0.01; done; done")
            if mode == "netem":
                rtts = {f.rtt_ns for f in receiving}
                if len(rtts) == 1:
                    hp.setup.append(f"set_root_qdisc {h.interface} netem delay {receiving[0].rtt_ns // 1000}us limit 1000000")
                else:
                    hp.setup += [
                        f"set_root_qdisc {h.interface} handle 1: htb default 1",
                        f"tc class add dev {h.interface} parent 1: classid 1:1 htb rate 100gbit",
                    ]
                    for k, f in enumerate(receiving, start=2):
                        hp.setup += [
                            f"tc class add dev {h.interface} parent 1: classid 1:{k:x} htb rate 100gbit",
                            f"tc qdisc add dev {h.interface} parent 1:{k:x} handle {k:x}: netem delay {f.rtt_ns // 1000}us limit 1000000",
                            f"tc filter add dev {h.interface} parent 1: protocol ip prio 1 u32 match ip sport {f.port} 0xffff flowid 1:{k:x}",
                        ]
            else:
                src = delay_source()
                text = src.read_text() if src is not None else "/* the delay program's source (linux/delay.c) */"
                queues = " ".join(f"{f.index}:{f.rtt_ns // 1000}" for f in receiving)
                hp.setup += [
                    _heredoc("$D/delay.c", text),
                    "gcc -O2 -o \"$D/ccarena-delay\" \"$D/delay.c\" $(pkg-config --cflags --libs libnetfilter_queue) -lm",
                ]
                hp.start += [
                    f"start delay \"$D/ccarena-delay\" {queues}",
                    "n=0; until grep -q ready \"$D/delay.out\"; do n=$((n + 1)); [ $n -lt 500 ] || { cat \"$D/delay.err\" >&2; exit 1; }; sleep 0.01; done",
                ] + [f"add_rule OUTPUT -o {h.interface} -p tcp --sport {f.port} -j NFQUEUE --queue-num {f.index}" for f in receiving]
                hp.collect.append("delay.err")
    return Plan(scenario=sc, inventory=inv, tag=tag, flows=flows, hosts=hosts, notes=notes)
