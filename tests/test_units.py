import pytest

from ccarena.scenario.units import UnitError, parse_buffer, parse_duration, parse_rate, parse_size


@pytest.mark.parametrize("text,ns", [("82ms", 82_000_000), ("1.5s", 1_500_000_000), ("200us", 200_000), ("2min", 120_000_000_000), (0, 0), ("0", 0)])
def test_durations(text, ns):
    assert parse_duration(text) == ns


@pytest.mark.parametrize("text,bps", [("400Mbps", 400_000_000), ("1Gbps", 10**9), ("100mbit", 10**8), ("2.5kbps", 2500)])
def test_rates(text, bps):
    assert parse_rate(text) == bps


@pytest.mark.parametrize("text,b", [("2MB", 2_000_000), ("64MiB", 64 << 20), ("1500B", 1500), (1500, 1500), ("1.5KB", 1500)])
def test_sizes(text, b):
    assert parse_size(text) == b


def test_buffers():
    assert parse_buffer("200p") == ("packets", 200)
    assert parse_buffer("2.8kp") == ("packets", 2800)
    assert parse_buffer("2MB") == ("bytes", 2_000_000)
    assert parse_buffer("1.5bdp") == ("bdp", 1.5)


@pytest.mark.parametrize(
    "fn,value,fragment",
    [
        (parse_duration, "82", "no unit"),
        (parse_duration, 82, "no unit"),
        (parse_duration, "82 parsecs", "unknown time unit"),
        (parse_rate, "-5Mbps", "negative"),
        (parse_rate, "400MBps", "bits per second"),
        (parse_rate, "fast", "such as '400Mbps'"),
        (parse_size, "2 furlongs", "allowed: B, KB"),
        (parse_buffer, "lots", "in packets"),
    ],
)
def test_bad_units_say_what_is_allowed(fn, value, fragment):
    with pytest.raises(UnitError, match=fragment):
        fn(value)
