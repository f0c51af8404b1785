"""`mosbench mail`: two runs (or a history's change) as the kernel test robot's mail, read back as its readers
read it: the sections in the robot's order, every table row by a parser written to the robot's layout
(docs/MAIL.md), the mbox by Python's email package."""

import email
import email.policy
import mailbox
import re
import shlex
from pathlib import Path

import pytest

from mosbench.analysis import mailrows
from mosbench.report import mail as mailing
from mosbench.run.plan import Plan
from mosbench.store import db as store
from mosbench.testing.history_stores import Planted, fill
from tests.conftest import empty_commits
from tests.conftest import mosbench_here as mosbench
from tests.test_explain import LOCK, _rows

WIDTH = 72
GOOD, BAD = "1" * 40, "2" * 40  # the profiled store's commits, where no tree holds them

# The robot's sections, in its order (docs/MAIL.md), as each begins a line of mosbench's mail.
SECTIONS = ("Hello,", "mosbench noticed ", "testcase: ", "test machine: ", "parameters:",
            "If you fix the issue, kindly add following tag", "| Reported-by: ", "Details are as below:",
            "To reproduce:", "=" * WIDTH, "workload/test/variant/cores/trials/duration/warmup/placement/isolation:",
            "         %stddev     %change         %stddev", "             \\          |                \\",
            "Notes:", "-- ")

# A row as the robot lays it out: base [± N%], the change (a signed number, with % where relative), new [± N%],
# then the metric: one dotted token.
ROW = re.compile(r"^\s*(?P<base>\S+)(?: ±\s*(?P<base_sd>\d+)%)?\s+(?P<change>[+-]\S+?)(?P<relative>%?)"
                 r"\s+(?P<new>\S+)(?: ±\s*(?P<new_sd>\d+)%)?\s{2,}(?P<metric>\S+\.\S+)$")


def parsed(line: str) -> dict | None:
    """A table row read back as its three numbers, two spreads and metric; None for any other line."""
    m = ROW.match(line)
    if m is None:
        return None
    try:
        values = {k: float(m[k]) for k in ("base", "change", "new")}
    except ValueError:
        return None
    return {**values, "relative": m["relative"] == "%", "metric": m["metric"],
            "spreads": (m["base_sd"], m["new_sd"])}


def table_rows(body: str) -> list[dict]:
    return [r for line in body.splitlines() if (r := parsed(line))]


def body_of(text: str) -> str:
    assert text.startswith("Subject: ")
    return text.split("\n\n", 1)[1]


@pytest.fixture(scope="module")
def nights(tmp_path_factory) -> Path:
    """Ten nights of two micro tests at 1-8 cores: from night 7 (run #7) on, kernel 6.1.0-28 and t0 20% slower
    at 4 and 8 cores."""
    path = tmp_path_factory.mktemp("mail") / "nights.sqlite"
    fill(store.Store(str(path)), 10, [Planted(at=6, factor=0.8, cores=(4, 8), tests=("t0",))], seed=3, tests=2,
         kernel=lambda i: "6.1.0-26" if i < 6 else "6.1.0-28")
    return path


def _profiled(path: Path, envs: list[dict], planted: list[bool], commands: list[str] | None = None,
              label: str | None = None) -> list[int]:
    """test_explain's point (micro/getppid1 procs at 2 cores, three profiled trials): the lock's 1 µs an op
    planted where asked, one run per environment."""
    db = store.Store(str(path))
    plan = Plan([("micro", "getppid1")], {"micro": ["procs"]}, [2], trials=3, duration=3.0).to_json()
    ids = []
    for i, (env, lock) in enumerate(zip(envs, planted, strict=True)):
        command = commands[i] if commands else "mosbench run micro/getppid1 --cores 2"
        run_id = db.create_run(plan, {"hostname": "h", "topology_summary": "2 CPUs", **env}, command,
                               label=label or f"r{i}")
        for r in _rows(lock):
            db.add_point(run_id, **r)
        db.finish_run(run_id, "complete")
        ids.append(run_id)
    return ids


@pytest.fixture(scope="module")
def profiled(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("mail") / "profiled.sqlite"
    _profiled(path, [{"kernel": "6.8.0", "kernel_commit": GOOD}, {"kernel": "6.8.0", "kernel_commit": BAD}],
              [False, True])
    return path


def mail(*args: str) -> str:
    r = mosbench("mail", *args)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_every_section_is_there_in_the_robots_order(nights):
    text = mail("6", "7", "--store", str(nights))
    lines = body_of(text).splitlines()
    at = []
    for section in SECTIONS:
        found = [i for i, line in enumerate(lines) if line.startswith(section)]
        assert found, f"no {section!r} in\n{text}"
        at.append(found[0])
    assert at == sorted(at), [s for s, _ in sorted(zip(SECTIONS, at, strict=True), key=lambda x: x[1])]
    # The commit block names the kernels (the sides carry no commit), the sides' block and the environment too.
    assert "kernel 6.1.0-26 → 6.1.0-28" in lines
    assert lines.index("kernel:") < lines.index("environment (base → new):") < at[SECTIONS.index("Notes:") - 2]
    assert "  kernel: 6.1.0-26 → 6.1.0-28" in lines
    # The subject as the robot writes it: the new side, the metric, the signed change, its kind.
    subject = text.splitlines()[0]
    assert re.fullmatch(r"Subject: 6\.1\.0-28: micro\.t0\.procs\.[48]\.per_core_ops -\d+\.\d% regression", subject)


def test_every_row_reads_back_significant_first_with_the_head_first(nights):
    text = mail("6", "7", "--store", str(nights))
    body = body_of(text)
    rows = table_rows(body)
    db = store.Store(str(nights))
    a, b = (mailrows.load_side(db, [db.run(i)], db.run(i)) for i in (6, 7))
    expected = mailrows.table(a.rows, b.rows)
    # Every row the analysis made is in the mail, and nothing else reads as one.
    assert [r["metric"] for r in rows] == [r.metric for r in (*expected.significant, *expected.rest)]
    assert all(r["metric"].count(".") >= 4 for r in rows)
    # Significant rows before the line that says the rest are not; the head (in the subject) first.
    cut = body.index("These did not change significantly")
    significant = table_rows(body[:cut])
    assert len(significant) == len(expected.significant) and significant
    head = significant[0]
    assert head["metric"] in text.splitlines()[0] and head["metric"].endswith(".per_core_ops")
    moved = [r for r in significant if r["metric"].endswith(".per_core_ops")]
    assert head == max(moved, key=lambda r: abs(r["change"]))
    assert {r["metric"].split(".")[3] for r in moved} == {"4", "8"}  # the planted cores, t0 alone
    # The numbers are the stored ones: the head's per-core throughput, mean of each side's trials.
    cores = int(head["metric"].split(".")[3])
    for side, value in ((6, head["base"]), (7, head["new"])):
        trials = [p["throughput"] / cores for p in db.points(side) if p["test"] == "t0" and p["cores"] == cores]
        assert value == pytest.approx(sum(trials) / len(trials), abs=0.5)
    assert head["change"] == pytest.approx(100 * (head["new"] - head["base"]) / head["base"], abs=0.06)
    assert head["relative"] and head["spreads"][0] is not None  # ±7%: 10% noise a trial


def test_numbers_and_rows_are_laid_out_as_lkp_prints_them():
    row = mailrows.Row("micro.getppid1.procs.16.per_core_ops", 4960011, 4305166, 2.4, 3.9, False, 0.001)
    assert mailing.row_text(row) == "   4960011 ±  2%     -13.2%    4305166 ±  3%  micro.getppid1.procs.16.per_core_ops"
    share = mailrows.Row("x.y.z.2.interference%", 1.84, 1.37, 1.0, 9.5, True, 0.01)
    assert mailing.row_text(share) == "      1.84            -0.5        1.37 ±  9%  x.y.z.2.interference%"
    assert [mailing.number(x) for x in (1.192e9, 76552.4, 945.756, 0.0157, 0.0)] == \
        ["1.192e+09", "76552", "945.76", "0.016", "0.00"]
    appeared = mailrows.Row("a.b.c.1.system_us_per_op", 0.0, 0.5, None, None, False, 0.01)
    assert parsed(mailing.row_text(appeared))["change"] == float("inf")


def test_a_profiled_change_gets_the_profiles_rows(profiled):
    text = mail("1", "2", "--store", str(profiled))
    body = body_of(text)
    rows = {r["metric"]: r for r in table_rows(body)}
    prefix = "micro.getppid1.procs.2.perf-profile"
    lock_us = rows[f"{prefix}.self.us_per_op.{LOCK}"]
    assert lock_us["base"] == 0 and lock_us["change"] == pytest.approx(1.0, abs=0.01) and not lock_us["relative"]
    lock_share = rows[f"{prefix}.self.cpu-clock.{LOCK}"]
    assert lock_share["base"] == 0 and 20 < lock_share["new"] < 40  # ~1000 of ~3500 samples a trial
    assert rows[f"{prefix}.children.us_per_op.dput_[k]"]["change"] == pytest.approx(0.6, abs=0.01)
    # After the significant rows and the rest, under a line that says what they are.
    assert body.index("These did not change significantly") < body.index("Profiles of micro/getppid1 procs at 2") \
        < body.index(f"{prefix}.children.cpu-clock.")
    # The sides carry commits no tree names: the subject has the new one's, no area.
    assert text.startswith(f"Subject: {BAD[:12]}: micro.getppid1.procs.2.per_core_ops -50.0% regression\n")
    assert f"commit: {BAD}\n" in body and f"  {GOOD[:12]}\n  {BAD[:12]}\n" in body
    assert f"{GOOD[:16]:>16} {BAD[:27]:>27}" in body


def _tree(path: Path, subject: str) -> tuple[str, str]:
    """A git tree of two commits, the second with `subject`: their ids."""
    parent, child = empty_commits(path, ["mm: the parent", subject])
    return parent, child


def test_a_tree_names_the_commit_and_its_area_and_one_without_it_leaves_the_subject_out(tmp_path, profiled):
    good, bad = _tree(tmp_path / "linux", "x86/mm/tlb: Open-code on_each_cpu_cond_mask() for tlb_is_not_lazy()")
    path = tmp_path / "s.sqlite"
    _profiled(path, [{"kernel": "6.8.0", "kernel_commit": good[:12]}, {"kernel": "6.8.0", "kernel_commit": bad}],
              [False, True])
    text = mail("1", "2", "--store", str(path), "--tree", str(tmp_path / "linux"))
    assert text.startswith(f"Subject: [x86/mm/tlb] {bad[:12]}: micro.getppid1.procs.2.per_core_ops -50.0% "
                           "regression\n")
    assert f'commit: {bad} ("x86/mm/tlb: Open-code' in text and f'  {good[:12]} ("mm: the parent")' in text
    # A tree that does not hold the commits: said, the subject left out, still a mail (exit 0).
    text = mail("1", "2", "--store", str(profiled), "--tree", str(tmp_path / "linux"))
    assert text.startswith(f"Subject: {BAD[:12]}: ") and f"commit: {BAD}\n" in text
    assert "does not hold this commit: its subject is left out" in " ".join(text.split())


def test_ab_and_bisect_runs_are_mailed_as_they_were_measured(tmp_path):
    path = tmp_path / "ab.sqlite"
    ab = "mosbench ab --kernel /k/A/bzImage --kernel /k/B/bzImage micro/getppid1 --cores 2"
    vm = {"vcpus": 2, "accelerator": "kvm"}

    def step(commit: str, subject: str) -> dict:
        image = f"/w/images/{commit}/bzImage"
        return {"kernel": "6.9.0", "bisect": {"commit": commit, "subject": subject},
                "virtual_machine": {**vm, "kernel_image": image, "kernel_commit": commit}}

    _profiled(path, [{"kernel": "6.8.0", "ab": {"side": "A", "rounds": 2},
                      "virtual_machine": {**vm, "kernel_image": "/k/A/bzImage"}},
                     {"kernel": "6.9.0", "ab": {"side": "B", "rounds": 2},
                      "virtual_machine": {**vm, "kernel_image": "/k/B/bzImage"}},
                     step(GOOD, "sched/core: the parent"), step(BAD, "sched/core: make it slow")],
              [False, True, False, True], [ab, ab, *["mosbench run micro/getppid1 --cores 2"] * 2])
    text = mail("1", "2", "--store", str(path))
    # ab's own command reproduces both sides; the sides are told as ab's boots.
    assert "        mosbench ab --kernel /k/A/bzImage --kernel /k/B/bzImage \\\n" in text
    assert "Both sides are `mosbench ab`'s: 2 boots of kernel A against 2 boots of kernel B" in " ".join(text.split())
    assert "(a guest: 2 vCPUs, kvm)" in text
    # A bisection's first bad commit against its parent: the subjects the steps stored, the images `ab` boots.
    text = mail("3", "4", "--store", str(path))
    assert text.startswith(f"Subject: [sched/core] {BAD[:12]}: micro.getppid1.procs.2.per_core_ops -50.0% "
                           "regression\n")
    assert f'  {GOOD[:12]} ("sched/core: the parent")\n  {BAD[:12]} ("sched/core: make it slow")' in text
    assert f"mosbench ab --kernel /w/images/{GOOD}/bzImage --kernel /w/images/{BAD}/bzImage" in \
        " ".join(text.replace("\\\n", "").split())
    assert "The new side is a step of `mosbench bisect`" in " ".join(text.split())


def test_the_mbox_is_one_message_email_reads(tmp_path, nights):
    out = tmp_path / "m.mbox"
    r = mosbench("mail", "6", "7", "--store", str(nights), "--format", "mbox", "-o", str(out),
                 "--from", "Lab Bot <bot@lab.example>", "--to", "Dev One <one@kernel.example>",
                 "--to", "two@kernel.example", "--cc", "list@vger.example", "--in-reply-to", "abc.123@lore.example")
    assert r.returncode == 0 and r.stdout == "", r.stderr
    [msg] = mailbox.mbox(out, factory=lambda f: email.message_from_binary_file(f, policy=email.policy.default))
    assert msg["From"] == "Lab Bot <bot@lab.example>"
    assert msg["To"] == "Dev One <one@kernel.example>, two@kernel.example" and msg["Cc"] == "list@vger.example"
    assert msg["In-Reply-To"] == msg["References"] == "<abc.123@lore.example>"
    assert re.fullmatch(r"<[^<>@\s]+@lab\.example>", msg["Message-ID"]) and msg["Date"].datetime is not None
    assert re.fullmatch(r"6\.1\.0-28: micro\.t0\.procs\.\d\.per_core_ops -\d+\.\d% regression", msg["Subject"])
    assert not msg.is_multipart() and msg.get_content_type() == "text/plain"
    assert msg.get_content_charset() == "utf-8" and msg["Content-Transfer-Encoding"] == "8bit"
    text = mail("6", "7", "--store", str(nights), "--from", "Lab Bot <bot@lab.example>")
    assert msg.get_content() == body_of(text)
    assert "| Reported-by: Lab Bot <bot@lab.example>" in msg.get_content()


def test_store_text_never_carries_a_control_character_or_a_line_break(tmp_path):
    """A lab's machines all write one store: whoever stores a run chooses its label, hostname, command and
    what its environment says."""
    evil = "x\nBcc: victim@example.com\r\n\x1b[31mred\x07\u202e"
    path = tmp_path / "evil.sqlite"
    envs = [{"kernel": f"6.{i}.0{evil}", "cpu_model": evil, "hostname": "h" + evil,
             "sysctls": {"vm.swappiness": f"{i}{evil}"}} for i in (8, 9)]
    _profiled(path, envs, [False, True], ["mosbench run micro/getppid1 " + evil] * 2, label=evil)
    out = tmp_path / "e.mbox"
    r = mosbench("mail", "1", "2", "--store", str(path), "--format", "mbox", "-o", str(out))
    assert r.returncode == 0, r.stderr
    raw = out.read_bytes()
    assert not re.search(rb"[\x00-\x08\x0b-\x1f\x7f]", raw) and "\u202e".encode() not in raw
    [msg] = mailbox.mbox(out, factory=lambda f: email.message_from_binary_file(f, policy=email.policy.default))
    assert msg["Bcc"] is None and msg["To"] is None and "\n" not in msg["Subject"]
    assert msg["Subject"].startswith("6.9.0x\\x0aBcc: victim@example.com\\x0d\\x0a\\x1b[31mred")
    body = msg.get_content()
    # The kernels (commit block, sides, columns, environment), the machine, the swappiness, escaped.
    assert body.count("\\x1b[31m") >= 5 and "\x1b" not in body


def test_prose_and_commands_are_wrapped_at_72(tmp_path, nights, profiled):
    long = tmp_path / "long.sqlite"
    ab = ("mosbench ab --kernel /boot/vmlinuz-6.1.0-26-amd64 --kernel /home/dev/linux micro/getppid1 --cores 2 "
          + " ".join(f"-p micro.fsdir=/tmp/{'d' * i}" for i in range(1, 30)) + " --duration 3 --profile")
    _profiled(long, [{"kernel": "6.8.0", "ab": {"side": "A"}}, {"kernel": "6.9.0", "ab": {"side": "B"}}],
              [False, True], [ab, ab])
    texts = [mail("6", "7", "--store", str(nights)), mail("1", "2", "--store", str(profiled)),
             mail("1", "2", "--store", str(long))]
    for text in texts:
        for line in body_of(text).splitlines():
            if len(line) > WIDTH:  # longer only by a metric's name, or a word no line can hold
                assert parsed(line) or len(line.split()) == 1, line
    # A folded command, joined again, is the command: every option beside its value.
    folded = re.search(r"\n( {8}mosbench ab [^\n]*(?:\n {12}[^\n]*)*)", texts[2])[1]
    lines = folded.split(" \\\n")
    assert len(lines) > 10 and all(len(line) + 2 <= WIDTH for line in lines[:-1])
    assert " ".join(" ".join(lines).split()) == ab
    assert all(not re.search(r"(^|\s)-[-\w]+$", line) for line in lines[:-1])  # no option parted from its value


def test_an_improvement_is_signed_and_asks_for_no_fix(tmp_path):
    path = tmp_path / "better.sqlite"
    _profiled(path, [{"kernel": "6.8.0"}, {"kernel": "6.9.0"}], [True, False])
    text = mail("1", "2", "--store", str(path))
    assert text.startswith("Subject: 6.9.0: micro.getppid1.procs.2.per_core_ops +100.0% improvement\n")
    assert "mosbench noticed a +100.0% improvement of" in text and "Reported-by" not in text
    rows = {r["metric"]: r for r in table_rows(text)}
    assert rows["micro.getppid1.procs.2.perf-profile.self.us_per_op.native_queued_spin_lock_slowpath_[k]"][
        "change"] == pytest.approx(-1.0, abs=0.01)


def test_history_mails_the_newest_change_and_all_of_them(tmp_path, nights):
    text = mail("--history", "--store", str(nights))
    assert re.match(r"Subject: 6\.1\.0-28: micro\.t0\.procs\.[48]\.per_core_ops -\d+\.\d% regression", text)
    said = " ".join(text.split())
    assert "mosbench history of big (1 socket, 8 cores) confirmed this change between runs #6 and #7" in said
    assert "The base side pools the old level's runs nearest it (#4..#6), the new side the new level's (#7..#9)" \
        in said
    r = mosbench("mail", "--history", "micro", "--all", "--dir", str(tmp_path / "out"), "--store", str(nights))
    assert r.returncode == 0, r.stderr
    [written] = (tmp_path / "out").iterdir()
    assert written.name == "001-6.1.0-28.txt" and written.read_text() == text


def test_bad_inputs_are_one_line_and_exit_2(tmp_path, nights):
    def refused(*args: str) -> str:
        r = mosbench("mail", *args)
        lines = [line for line in r.stderr.splitlines() if line.strip()]
        assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("mosbench: "), r.stderr
        return lines[0]

    assert "no run 99 in" in refused("6", "99", "--store", str(nights))
    assert "compares two runs" in refused("6", "--store", str(nights))
    assert "given run #6 twice" in refused("6", "6", "--store", str(nights))
    other = tmp_path / "two.sqlite"
    db = store.Store(str(other))
    fill(db, 2, [], seed=1, tests=1)
    fill(db, 2, [], seed=2, tests=1, host="small")
    assert "ran on different machines (big (1 socket, 8 cores) and small (1 socket, 8 cores))" in \
        refused("1", "3", "--store", str(other))
    assert "no runs of host 'nope'" in refused("--history", "--host", "nope", "--store", str(nights))
    quiet = tmp_path / "quiet.sqlite"
    fill(store.Store(str(quiet)), 8, [], seed=4, tests=1)
    assert "holds no confirmed change: there is nothing to mail" in refused("--history", "--store", str(quiet))
    assert "is not one mail address" in refused("6", "7", "--to", "a\nBcc: b@c", "--store", str(nights))
    assert "is not a Message-ID" in refused("6", "7", "--in-reply-to", "nope", "--store", str(nights))
    assert "--all" in refused("--history", "--all", "--store", str(nights))


def test_no_significant_change_is_still_a_mail(tmp_path):
    path = tmp_path / "same.sqlite"
    _profiled(path, [{"kernel": "6.8.0"}, {"kernel": "6.8.0"}], [False, False])
    db = store.Store(str(path))  # a point the new side failed at, another only the base side measured
    db.add_point(1, **{**_rows(False)[0], "cores": 4})
    db.add_point(2, **{**_rows(False)[0], "cores": 4, "status": "failed", "reason": "boom", "work": None,
                       "throughput": None, "profile": None})
    text = mail("1", "2", "--store", str(path))
    assert text.startswith("Subject: #2: no significant change in 1 point\n")
    assert "mosbench noticed no significant change in the 1 point compared on:" in text
    assert "runs #1 (\"r0\") → #2 (\"r1\")" in text and "Reported-by" not in text
    # One kernel, one environment: the same `mosbench run` for each side, and no differences to point at.
    assert "environment (base → new):" not in text and "differences below" not in text
    assert "this `mosbench run` once for each side on this machine:" in " ".join(text.split())
    assert {r["metric"] for r in table_rows(text)} == {f"micro.getppid1.procs.2.{m}" for m in (
        "per_core_ops", "throughput", "user_us_per_op", "system_us_per_op", "idle_us_per_op")}
    assert "Not compared: micro.getppid1.procs.4 (no trial that counts: failed or interfered in the new side)." \
        in " ".join(text.split())


def _reproduced(text: str) -> list[list[str]]:
    """The commands under "To reproduce:", each unfolded and split as a shell would."""
    section = text.split("\nTo reproduce:\n", 1)[1].split("\n" + "=" * WIDTH, 1)[0]
    joined = section.replace(" \\\n", " ")
    return [shlex.split(line) for line in joined.splitlines() if line.startswith(" " * 8)]


def _parsed(argv: list[str]) -> tuple[dict, dict]:
    """A pasted command read by mosbench's own parsers, measuring nothing: its options and the run's."""
    from mosbench import cli

    assert argv[0] == "mosbench"
    with cli.cli.commands[argv[1]].make_context(argv[1], argv[2:]) as ctx:
        options = dict(ctx.params)
    run_args = list(options.get("run_args", argv[2:]))
    with cli.run.make_context("run", run_args) as ctx:
        return options, dict(ctx.params)


def test_a_pasted_reproduction_measures_as_the_sides_did(tmp_path):
    """--trials auto's --precision is the run's; given after the selections, `ab` would take it for its own."""
    path = tmp_path / "auto.sqlite"
    db = store.Store(str(path))
    plan = Plan([("micro", "getppid1")], {"micro": ["procs"]}, [2], trials=3, duration=3.0, trials_max=12,
                precision=0.03, placement="spread", params={"micro": {"fsdir": "/tmp/a dir"}}).to_json()
    for kernel, lock in (("6.8.0", False), ("6.9.0", True), ("6.9.0", False)):
        run_id = db.create_run(plan, {"hostname": "h", "topology_summary": "2 CPUs", "kernel": kernel}, "x")
        for r in _rows(lock):
            db.add_point(run_id, **r)
        db.finish_run(run_id, "complete")
    [ab] = _reproduced(mail("1", "2", "--store", str(path)))
    options, run = _parsed(ab)
    assert options["kernel_specs"] == ("6.8.0", "6.9.0") and options["precision"] == 2.0  # ab's own default
    assert run["precision"] == 3.0 and run["trials_spec"] == "auto:12" and run["placement"] == "spread"
    assert run["params"] == ("micro.fsdir=/tmp/a dir",) and run["selections"] == ("micro/getppid1",)
    [again] = _reproduced(mail("2", "3", "--store", str(path)))  # one kernel: `mosbench run`, as stored
    _, run = _parsed(again)
    assert run["precision"] == 3.0 and run["duration"] == 3.0 and run["cores"] == "2"


def test_ab_shares_with_run_only_the_options_the_mail_puts_after_a_double_dash():
    from mosbench import cli
    from mosbench.guest.host import GUEST_OWNS

    def names(command) -> set[str]:
        return {o for p in command.params for o in p.opts if o.startswith("--")}

    assert set(mailrows.AB_SHARED_OPTIONS) == names(cli.ab) & names(cli.run) - set(GUEST_OWNS)
    stored = ["mosbench", "ab", "--kernel", "A", "--kernel", "B", "micro", "--trials", "auto", "--precision", "5"]
    assert mailrows._stored_ab(stored) == ("mosbench", "ab", "--kernel", "A", "--kernel", "B", "--", *stored[6:])


def _cpu_point(cores: int, trial: int, system_s: float, idle_s: float) -> dict:
    return {"workload": "micro", "test": "getppid1", "variant": "procs", "cores": cores, "trial": trial,
            "status": "ok", "cpus": "0,1", "unit": "op", "window_s": 1.0, "work": 2e6 * (1 + trial / 1e3),
            "throughput": 2e6 * (1 + trial / 1e3), "interfered": False, "user_s": 1.0, "system_s": system_s,
            "idle_s": idle_s, "steal_s": 0.0}


def test_the_row_the_subject_names_heads_the_table():
    """Throughput the same, system time up 50% and idle time (no better way) up tenfold: the subject names
    the system time, so it leads the table, before the idle time that moved more."""
    a = [_cpu_point(2, t, 0.2 + t / 1e3, 0.1 + t / 1e3) for t in (1, 2, 3)]
    b = [_cpu_point(2, t, 0.3 + t / 1e3, 1.0 + t / 1e3) for t in (1, 2, 3)]
    found = mailrows.table(a, b)
    assert [r.measure for r in found.significant] == ["system_us_per_op", "idle_us_per_op"]
    assert found.head is found.significant[0]


def test_where_the_mail_goes_is_checked_before_it_is_composed(tmp_path):
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    missing = str(tmp_path / "no-store.sqlite")  # composing would refuse it: the output is refused first
    for args in (["1", "2", "-o", str(blocked / "m.txt")], ["--history", "--all", "--dir", str(blocked / "d")]):
        r = mosbench("mail", *args, "--store", missing)
        assert r.returncode == 2 and r.stderr.startswith("mosbench: cannot write the mail") \
            and "Not a directory" in r.stderr, r.stderr
    assert not (tmp_path / "no-store.sqlite").exists()


def test_all_the_mails_of_a_history_are_written_or_none(tmp_path, monkeypatch):
    path = tmp_path / "two.sqlite"
    fill(store.Store(str(path)), 14, [Planted(at=4, factor=0.7, tests=("t0",)), Planted(at=9, factor=0.7,
                                                                                     tests=("t1",))],
         seed=5, tests=2)
    out = tmp_path / "mails" / "here"
    composed = mailing.compose
    calls = []

    def second_fails(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return composed(*args, **kwargs)

    monkeypatch.setattr(mailing, "compose", second_fails)
    r = mosbench("mail", "--history", "--all", "--dir", str(out), "--store", str(path))
    assert r.returncode == 2 and r.stderr.strip() == f"mosbench: cannot write the mails into {out}: No space left " \
                                                     "on device", r.stderr
    assert not (tmp_path / "mails").exists() and len(calls) == 2  # the first mail was composed, then removed
    monkeypatch.setattr(mailing, "compose", composed)
    r = mosbench("mail", "--history", "--all", "--dir", str(out), "--store", str(path))
    names = ["001-_5.._7.txt", "002-_10.._12.txt"]  # each new side's runs, #5..#7, made a file's name
    assert r.returncode == 0 and sorted(p.name for p in out.iterdir()) == names
    assert r.stderr.splitlines() == [f"mosbench: wrote {out / name}" for name in names]


def test_a_stored_commit_is_shown_escaped_and_only_an_id_is_looked_up(tmp_path):
    _, head = _tree(tmp_path / "linux", "mm: the change")
    path = tmp_path / "c.sqlite"
    _profiled(path, [{"kernel": "6.8.0", "kernel_commit": "HEAD"}, {"kernel": "6.8.0", "kernel_commit": "b\x1b[31m\n"}],
              [False, True])
    text = mail("1", "2", "--store", str(path), "--tree", str(tmp_path / "linux"))
    assert "\x1b" not in text and "b\\x1b[31m\\x0a" in text  # the subject, the sides, the columns
    # "HEAD" names no commit of the run's: the tree's own HEAD is not taken for it.
    assert head[:12] not in text and "mm: the change" not in text and "  HEAD\n" in text
