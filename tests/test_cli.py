import json
import shutil

import pytest

from conftest import cli


def test_run_prints_a_table_and_saves(small_scenario, tmp_path):
    out = tmp_path / "res"
    p = cli("run", str(small_scenario), "--out", str(out), check=True)
    assert "cubic" in p.stdout and "utilisation" in p.stdout
    assert (out / "result.json").exists()


def test_run_json_has_the_documented_fields(small_scenario):
    p = cli("run", str(small_scenario), "--json", "--no-save", check=True)
    doc = json.loads(p.stdout)
    for key in ("flows", "utilization", "jain_index", "throughput_ratio"):
        assert key in doc
    for f in doc["flows"]:
        for key in ("cca", "rtt_ms", "throughput_mbps", "retransmissions", "rtos"):
            assert key in f
    assert doc["flows"][0]["rtt_ms"] == 20.0


def test_overrides_on_the_command_line(small_scenario):
    p = cli("run", str(small_scenario), "--json", "--no-save", "--set", "flows[0].cca=reno", "--set", "run.duration=2s", check=True)
    doc = json.loads(p.stdout)
    assert {f["cca"] for f in doc["flows"]} == {"reno"}
    assert doc["duration_s"] == 2.0


@pytest.mark.parametrize(
    "toml,fragment",
    [
        ('[network]\nbottleneck_rate="10Mbps"\nbuffer="10p"\n[[flows]]\ncca="cubc"\nrtt="10ms"\n[run]\nduration="1s"\n', "flows[0].cca: unknown congestion control 'cubc'; allowed:"),
        ('[network]\nbottleneck_rate="-10Mbps"\nbuffer="10p"\n[[flows]]\ncca="reno"\nrtt="10ms"\n[run]\nduration="1s"\n', "network.bottleneck_rate: must not be negative"),
        ('[network]\nbottleneck_rate="10Mbps"\nbuffer="10p"\n[[flows]]\ncca="reno"\nrtt="10 lightyears"\n[run]\nduration="1s"\n', "flows[0].rtt: unknown time unit"),
        ('[network]\nbuffer="10p"\n[[flows]]\ncca="reno"\nrtt="10ms"\n[run]\nduration="1s"\n', "network.bottleneck_rate: missing required field"),
        ('[network\n', "not valid TOML"),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path, toml, fragment):
    f = tmp_path / "bad.toml"
    f.write_text(toml)
    p = cli("run", str(f))
    assert p.returncode == 2, p.stderr
    assert fragment in p.stderr
    assert "Traceback" not in p.stderr and "panicked" not in p.stderr
    assert len([line for line in p.stderr.splitlines() if line.strip()]) == 1, p.stderr


def test_missing_file_and_bad_option():
    p = cli("run", "no-such-file.toml")
    assert p.returncode == 2 and "no such file" in p.stderr and "Traceback" not in p.stderr
    p = cli("run", "quickstart", "--set", "nonsense")
    assert p.returncode == 2 and "FIELD=VALUE" in p.stderr
    p = cli("run", "quickstart", "--backend", "ns3")
    assert p.returncode == 2 and "allowed: sim" in p.stderr


def test_list_and_version():
    p = cli("list", "ccas", check=True)
    assert "cubic" in p.stdout and "reno" in p.stdout and "tcp_cubic.c" in p.stdout
    cat = json.loads(cli("list", "ccas", "--json", check=True).stdout)
    assert all(c["description"] and c["source"] for c in cat)
    p = cli("list", "experiments", check=True)
    assert "quickstart" in p.stdout
    assert cli("version", check=True).stdout.startswith("ccarena ")


def test_bench_json():
    p = cli("bench", "--json", "--repeat", "1", "--scenario", "quickstart", check=True)
    r = json.loads(p.stdout)
    for key in ("wall_s", "sim_s_per_wall_s", "events_per_s", "packets_per_s"):
        assert r[key] > 0


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_bench_counts_the_engines_instructions(tmp_path):
    sc = tmp_path / "small.toml"
    sc.write_text('name = "small"\n[network]\nbottleneck_rate = "10Mbps"\nbuffer = "50KB"\n[[flows]]\ncca = "reno"\nrtt = "20ms"\n[run]\nduration = "2s"\n')
    r = json.loads(cli("bench", "--json", "--repeat", "1", "--instructions", "--scenario", str(sc), check=True).stdout)
    # Only the run loop is counted: a 2 s run of one flow at 10 Mbit/s is a few
    # million instructions, far below the ~100 M an interpreter's start costs.
    assert 1_000_000 < r["instructions"] < 50_000_000
    assert r["instructions_per_packet"] == r["instructions"] / r["packets"]


def test_list_ccas_says_which_backends_run_each_algorithm():
    cat = json.loads(cli("list", "ccas", "--json", check=True).stdout)
    by_name = {c["name"]: c["backends"] for c in cat}
    assert all(b["sim"] == "engine" for b in by_name.values())
    # Algorithms no kernel ships, whatever this machine is.
    assert by_name["fast"]["linux"] == by_name["cubic-2008"]["linux"] == "not available"
    for name in ("fast", "cdg", "lp", "nv"):
        assert name in by_name
    tsv = cli("list", "ccas", "--format", "tsv", check=True).stdout.splitlines()
    assert tsv[0].split("\t")[-1] == "backends (here)"
    assert any(line.startswith("fast\t") and line.endswith("\tsim; linux: not available") for line in tsv)


def test_linux_availability_is_probed(tmp_path):
    from ccarena.backends.linux.host import kernel_modules, linux_availability

    ipv4 = tmp_path / "6.1.0" / "kernel" / "net" / "ipv4"
    ipv4.mkdir(parents=True)
    for f in ("tcp_cdg.ko", "tcp_nv.ko.xz", "tcp_lp.ko.zst", "udp_diag.ko"):
        (ipv4 / f).write_text("")
    assert kernel_modules("6.1.0", root=tmp_path) == {"cdg", "nv", "lp"}
    assert kernel_modules("none", root=tmp_path) == set()
    got = linux_availability(["reno", "newreno", "cubic", "bic", "cdg", "fast", "vegas"], available=["reno", "cubic"],
                             bpf={"bic": tmp_path / "bic.bpf.o"}, modules={"cdg", "vegas"})
    assert got["reno"] == got["cubic"] == "kernel"
    assert got["newreno"] == "kernel (reno, SACK off)"
    assert got["bic"].startswith("BPF struct_ops (project)")
    assert got["cdg"] == "kernel module tcp_cdg, not loaded (modprobe it)"
    assert got["fast"] == "not available"
    # Loaded beats the project's BPF version, as the backend chooses.
    assert linux_availability(["bic"], available=["bic"], bpf={"bic": tmp_path}, modules=set()) == {"bic": "kernel"}


def test_a_goodput_above_the_links_capacity_is_explained(small_scenario):
    # One second after a 1 s warm-up, bench's slow-start losses are still
    # being recovered: the window's goodput includes data that crossed the
    # bottleneck before it (113 % of the link on 2026-11-28, 104.5 % since the
    # receivers send their held ACKs before a third SACK block), while the
    # link itself carried no more than its rate.
    p = cli("run", "bench", "--no-save", "--set", "run.duration=2s", "--set", "run.warmup=1s", check=True)
    assert "utilisation above 100 %" in " ".join(p.stdout.split())
    doc = json.loads(cli("run", "bench", "--no-save", "--json", "--set", "run.duration=2s", "--set", "run.warmup=1s", check=True).stdout)
    # The link counts an skb's bytes when its last byte leaves, so a window
    # may hold up to one 64 KB skb more than its rate carried (1.00011 here).
    assert doc["utilization"] > 1.02 and doc["link_utilization"] <= 1 + 65536 / (400e6 / 8)
    p = cli("run", str(small_scenario), "--no-save", check=True)
    assert "utilisation above 100 %" not in " ".join(p.stdout.split())
