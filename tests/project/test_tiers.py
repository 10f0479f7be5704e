"""``tests/tiers.py``: which members of a family run in which tier, and that a sampled family
skips its unsampled members by name (never drops them) unless a release check asks for all."""

from __future__ import annotations

import pytest
from tiers import RELEASE_ENV, sampled, tiered


def _marks(param: object) -> list[str]:
    return [m.name for m in getattr(param, "marks", ())]


def test_tiered_keeps_the_fast_members_unmarked_and_refuses_an_unknown_one() -> None:
    out = tiered(["a", "b", "c"], fast=["b"])
    assert out[1] == "b" and _marks(out[0]) == _marks(out[2]) == ["slow"]
    with pytest.raises(ValueError, match="not parameters"):
        tiered(["a"], fast=["z"])


def test_a_sample_runs_the_kept_members_and_one_in_every_of_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(RELEASE_ENV, raising=False)
    names = [f"m{i}" for i in range(8)]
    out = sampled(names, fast=["m0"], every=3, keep=["m2"])
    marks = {name: _marks(param) for name, param in zip(names, out, strict=True)}
    assert marks["m0"] == [] and marks["m2"] == ["slow"]
    ran = [n for n in names[1:] if marks[n] == ["slow"]]
    skipped = [n for n in names[1:] if marks[n] == ["slow", "skip"]]
    assert ran == ["m1", "m2", "m5"] and skipped == ["m3", "m4", "m6", "m7"]
    with pytest.raises(ValueError, match="not parameters"):
        sampled(names, fast=[], every=2, keep=["zz"])


def test_a_sample_of_none_runs_only_the_fast_and_kept_members(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(RELEASE_ENV, raising=False)
    names = ["a", "b", "c", "d"]
    out = sampled(names, fast=["a"], every=None, keep=["c"])
    marks = [_marks(param) for param in out]
    assert marks == [[], ["slow", "skip"], ["slow"], ["slow", "skip"]]
    monkeypatch.setenv(RELEASE_ENV, "1")
    assert [_marks(p) for p in sampled(names, fast=["a"], every=None)][1:] == [["slow"]] * 3


def test_a_release_check_runs_every_member(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(RELEASE_ENV, "1")
    out = sampled(["a", "b", "c", "d"], fast=[], every=4)
    assert all(_marks(param) == ["slow"] for param in out)
