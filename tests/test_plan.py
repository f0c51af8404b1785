"""The stored plan across versions, and parameters read strictly."""

import re

import pytest

from mosbench.errors import UserError
from mosbench.run import plan
from mosbench.workloads.base import Param


def _plan(**kw) -> plan.Plan:
    base = dict(selections=[("scale", "lock")], variants={"scale": ["stock"]}, cores=[1, 2], trials=1)
    return plan.Plan(**{**base, **kw})


def test_a_plan_round_trips_with_its_version():
    p = _plan()
    stored = p.to_json()
    assert stored["version"] == plan.PLAN_VERSION
    assert plan.Plan.from_json(stored) == p


def test_an_unversioned_plan_is_version_1_and_migrated():
    stored = {k: v for k, v in _plan().to_json().items() if k != "version"}
    assert plan.Plan.from_json(stored) == _plan()


def test_an_old_micro_plan_is_refused_with_the_reason():
    stored = {k: v for k, v in _plan(selections=[("micro", "open1")], variants={"micro": ["procs"]}).to_json().items()
              if k != "version"}
    with pytest.raises(UserError, match="old test names"):
        plan.Plan.from_json(stored)


def test_a_renamed_field_survives_resume(monkeypatch):
    """The next rename of a plan field is one migration: a plan stored before it still loads."""
    def rename(data):
        data = dict(data)
        data["interval"] = data.pop("sample_every")
        return data

    monkeypatch.setattr(plan, "PLAN_MIGRATIONS", [*plan.PLAN_MIGRATIONS, rename])
    monkeypatch.setattr(plan, "PLAN_VERSION", len(plan.PLAN_MIGRATIONS) + 1)
    old = {**_plan().to_json(), "version": plan.PLAN_VERSION - 1}
    old["sample_every"] = old.pop("interval")
    assert plan.Plan.from_json(old) == _plan()


def test_a_newer_plan_is_refused():
    with pytest.raises(UserError, match="newer than this mosbench"):
        plan.Plan.from_json({**_plan().to_json(), "version": plan.PLAN_VERSION + 1})


@pytest.mark.parametrize("text,value", [("true", True), ("YES", True), ("on", True), ("1", True),
                                        ("false", False), ("No", False), ("off", False), ("0", False)])
def test_booleans(text, value):
    assert Param("x", False, "").parse(text) is value


@pytest.mark.parametrize("default,text", [(False, "ture"), (False, "2"), (True, ""), (1, "1.5"), (1, "x"),
                                          (1.0, "nan"), (1.0, "inf"), (1.0, "-inf")])
def test_mistyped_values_are_refused(default, text):
    with pytest.raises(ValueError):
        Param("x", default, "").parse(text)


def test_a_variant_can_be_one_workloads_alone():
    chosen = [("micro", "getppid1"), ("fxmark", "DWOM"), ("scale", "lock")]
    found = plan.resolve_variants(chosen, ["fxmark.tmpfs", "fxmark.ext4"])
    assert found["fxmark"] == ["tmpfs", "ext4"]
    assert found["micro"] == ["threads", "procs"] and "mutex" in found["scale"]  # the others keep all theirs
    assert plan.resolve_variants(chosen[:1], ["procs"]) == {"micro": ["procs"]}
    with pytest.raises(UserError, match="workload fxmark has no variant 'zfs'"):
        plan.resolve_variants(chosen, ["fxmark.zfs"])
    refusal = "--variant metis.2m: workload metis is not among this run's selections"
    with pytest.raises(UserError, match=re.escape(refusal)):
        plan.resolve_variants(chosen, ["metis.2m"])
