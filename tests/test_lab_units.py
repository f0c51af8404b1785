"""The lab's systemd units (lab/systemd/, docs/LAB.md): `systemd-analyze verify` has nothing to say of them;
the nightly refuses rather than waits for a run that holds the machine and refuses to start without a store; the
server listens on loopback alone and is sandboxed; the timer skips a missed night rather than catch it up. The
command lines the units run, expanded from the example environment files as systemd expands them, are parsed
by mosbench's own command line, so an option renamed there breaks here."""

from __future__ import annotations

import datetime as dt
import ipaddress
import itertools
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest

from mosbench import cli
from tests.conftest import ROOT

UNITS = ROOT / "lab" / "systemd"
NIGHTLY, TIMER, SERVE = "mosbench-nightly.service", "mosbench-nightly.timer", "mosbench-serve.service"
INSTALLED = "/opt/mosbench/.venv/bin/mosbench"  # where docs/LAB.md installs mosbench
ANALYZE = shutil.which("systemd-analyze")
needs_analyze = pytest.mark.skipif(ANALYZE is None, reason="no systemd-analyze (Debian's systemd package)")
# What systemd puts for the specifiers the units use: %H host name, %v kernel release, %d credentials
# directory, %t runtime directory, %C cache directory.
SPECIFIERS = {"H": "box4s", "v": "6.18.3-amd64", "d": "/run/credentials/mosbench-serve.service", "t": "/run",
              "C": "/var/cache", "%": "%"}

Unit = dict[str, dict[str, list[str]]]  # section -> key -> its values, in order


def read_unit(name: str) -> Unit:
    """A unit file's settings (a key set twice keeps both values, as systemd lists do)."""
    unit: Unit = {}
    section: dict[str, list[str]] = {}
    text = re.sub(r"\\\n", " ", (UNITS / name).read_text())
    for line in (raw.strip() for raw in text.splitlines()):
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            section = unit.setdefault(line.strip("[]"), {})
        else:
            key, _, value = line.partition("=")
            section.setdefault(key.strip(), []).append(value.strip())
    return unit


def read_env(name: str) -> dict[str, str]:
    """An EnvironmentFile's assignments (the examples use no quotes)."""
    lines = (line.strip() for line in (UNITS / name).read_text().splitlines())
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def expand(command: str, env: dict[str, str], may_be_unset: frozenset[str] = frozenset()) -> list[str]:
    """A command line as systemd runs it: specifiers, then `$VAR` (a word of its own) split into any number of
    words (at whitespace, quotes respected) and `${VAR}` put in its word whole; a variable the environment lacks
    is an error here unless it may be unset (systemd would put nothing)."""
    def value(var: str) -> str:
        if var not in env and var not in may_be_unset:
            raise KeyError(f"{var} is in the unit's command but not in its example environment")
        return env.get(var, "")

    command = re.sub(r"%(.)", lambda m: SPECIFIERS[m.group(1)], command)
    argv: list[str] = []
    for word in shlex.split(command):
        if (whole := re.fullmatch(r"\$([A-Za-z_]\w*)", word)) is not None:
            argv += shlex.split(value(whole.group(1)))
        else:
            argv.append(re.sub(r"\$\{(\w+)\}", lambda m: value(m.group(1)), word))
    return argv


def parsed(argv: list[str]) -> click.Context:
    """mosbench's own parse of `mosbench COMMAND ...` (no command runs)."""
    assert argv[0] == INSTALLED
    command = cli.cli.commands.get(argv[1])
    assert command is not None, f"mosbench has no command {argv[1]!r}"
    return command.make_context(argv[1], argv[2:])


@pytest.fixture(scope="module")
def runnable_units(tmp_path_factory) -> Path:
    """The units with ExecStart's mosbench at one that exists here (verify checks that it is executable)."""
    here = ROOT / ".venv" / "bin" / "mosbench"
    binary = here if os.access(here, os.X_OK) else Path(sys.executable)
    out = tmp_path_factory.mktemp("units")
    for name in (NIGHTLY, TIMER, SERVE):
        text = (UNITS / name).read_text()
        assert name == TIMER or f"ExecStart={INSTALLED} " in text
        (out / name).write_text(text.replace(INSTALLED, str(binary)))
    return out


def analyze(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    assert ANALYZE is not None
    return subprocess.run([ANALYZE, *args], cwd=cwd, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "TZ": "UTC", "SYSTEMD_COLORS": "0"})


@needs_analyze
def test_systemd_analyze_verify_says_nothing(runnable_units):
    r = analyze("verify", f"./{NIGHTLY}", f"./{TIMER}", f"./{SERVE}", cwd=runnable_units)
    # An unknown key or a bad value is only a warning to verify: any line about our units fails.
    ours = [line for line in (r.stdout + r.stderr).splitlines() if "mosbench" in line]
    assert (r.returncode, ours) == (0, [])


@needs_analyze
def test_verify_sees_what_is_wrong(runnable_units, tmp_path):
    """The check above can fail: verify reads these units' settings and their ExecStart's binary."""
    text = (runnable_units / SERVE).read_text()
    (tmp_path / SERVE).write_text(re.sub(r"(?m)^ExecStart=\S+", "ExecStart=/nonexistent/mosbench", text))
    (tmp_path / NIGHTLY).write_text((runnable_units / NIGHTLY).read_text().replace("KillMode=mixed", "KillMod=mixed"))
    missing = analyze("verify", f"./{SERVE}", cwd=tmp_path)
    assert missing.returncode != 0 and "/nonexistent/mosbench" in missing.stderr
    misspelt = analyze("verify", f"./{NIGHTLY}", cwd=tmp_path)
    assert "KillMod" in misspelt.stderr


def test_the_nightly_refuses_rather_than_waits():
    service = read_unit(NIGHTLY)["Service"]
    assert service["Type"] == ["oneshot"] and service["EnvironmentFile"][0] == "/etc/mosbench/lab.env"
    (exec_start,) = service["ExecStart"]
    assert "--no-wait" in shlex.split(exec_start)
    env = read_env("lab.env.example")
    argv = expand(exec_start, env, may_be_unset=frozenset({"MOSBENCH_KERNEL_OPTIONS"}))
    assert argv[1] == "run"
    params = parsed(argv).params
    assert params["no_wait"] is True
    assert params["store_url"] == env["MOSBENCH_STORE"] and params["store_url"].startswith("postgresql+psycopg://")
    assert list(params["selections"]) == env["MOSBENCH_SELECTIONS"].split()
    assert params["label"] == "nightly-box4s-6.18.3-amd64"
    # A kernel's commit, from its own optional file, reaches the run as --commit.
    with_commit = expand(exec_start, {**env, "MOSBENCH_KERNEL_OPTIONS": "--commit 0123456789ab"})
    assert parsed(with_commit).params["kernel_commit"] == "0123456789ab"
    # Exit 2 (refused, or misconfigured) and 3 (points failed) leave the unit failed; a stop is not a failure.
    assert service["SuccessExitStatus"] == ["130"] and service["KillMode"] == ["mixed"]


@pytest.mark.parametrize("store, status", [("", 2), ("postgresql+psycopg://box4s@db.lab.example/mosbench", 0)])
def test_the_nightly_needs_a_store(store, status):
    """Without MOSBENCH_STORE the run would fall back to root's own SQLite store: the unit refuses first."""
    (pre,) = read_unit(NIGHTLY)["Service"]["ExecStartPre"]
    argv = shlex.split(pre.replace("$$", "$"))  # `$$` is systemd's literal `$`: the shell expands it
    env = {"PATH": os.environ["PATH"], **({"MOSBENCH_STORE": store} if store else {})}
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=10)
    assert r.returncode == status
    assert r.stderr.splitlines() == (["mosbench-nightly: MOSBENCH_STORE is not set in /etc/mosbench/lab.env"]
                                     if status else [])


def test_the_timer_skips_a_missed_night():
    unit = read_unit(TIMER)
    timer = unit["Timer"]
    assert timer["Persistent"] == ["false"]
    assert "Unit" not in timer  # the service of the same name
    assert unit["Install"]["WantedBy"] == ["timers.target"]
    assert timer["FixedRandomDelay"] == ["true"] and timer["RandomizedDelaySec"] == ["30min"]


@needs_analyze
def test_the_timer_elapses_nightly(runnable_units):
    (calendar,) = read_unit(TIMER)["Timer"]["OnCalendar"]
    r = analyze("calendar", "--iterations=3", calendar, cwd=runnable_units)
    assert r.returncode == 0, r.stderr
    when = [dt.datetime.strptime(m, "%Y-%m-%d %H:%M:%S")
            for m in re.findall(r"(?:Next elapse|Iter\. #\d): \w+ (\S+ \S+) UTC", r.stdout)]
    assert len(when) == 3 and {b - a for a, b in itertools.pairwise(when)} == {dt.timedelta(days=1)}
    assert {w.hour for w in when} == {1}


def test_the_server_listens_on_loopback_alone(tmp_path):
    service = read_unit(SERVE)["Service"]
    (exec_start,) = service["ExecStart"]
    argv = expand(exec_start, read_env("serve.env.example"))
    assert argv[1] == "serve"
    bind = argv[argv.index("--bind") + 1]
    assert ipaddress.ip_address(bind).is_loopback
    # The tokens come from the credentials systemd hands the service, from a file only root reads.
    tokens = argv[argv.index("--tokens") + 1]
    assert tokens == f"{SPECIFIERS['d']}/tokens" and "tokens:/etc/mosbench/tokens" in service["LoadCredential"]
    assert service["DynamicUser"] == ["yes"] and service.get("User") != ["root"]
    # mosbench's own parse of it, with a tokens file where systemd would have put it.
    (tmp_path / "tokens").write_text("ci:a-secret-of-24-characters\n")
    params = parsed([str(tmp_path / "tokens") if a == tokens else a for a in argv]).params
    assert bind in params.values() and 8765 in params.values()


@needs_analyze
def test_the_server_is_sandboxed(runnable_units):
    """systemd's own measure of a unit's exposure (0 to 10; 10 for a root service with no sandbox, as the
    nightly is on purpose): the server's must stay at 2 or below."""
    serve = analyze("security", "--offline=true", "--threshold=20", f"./{SERVE}", cwd=runnable_units)
    assert serve.returncode == 0, serve.stdout.splitlines()[-1:]
    nightly = analyze("security", "--offline=true", "--threshold=20", f"./{NIGHTLY}", cwd=runnable_units)
    assert nightly.returncode != 0
    service = read_unit(SERVE)["Service"]
    for setting in ("NoNewPrivileges", "PrivateTmp", "ProtectHome", "PrivateDevices"):
        assert service[setting] == ["yes"], setting
    assert service["ProtectSystem"] == ["strict"]
