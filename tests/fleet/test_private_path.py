"""Private directories are checked along the whole path: the control and cache directories are
refused when any directory from `/` down could be changed by another user (console/fleet/private.py
through console/db/file_trust.py's one walk), not only when their nearest parent could; and a
relative `$XDG_CACHE_HOME` is ignored (XDG spec)."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.fleet.private import PrivateDirUnusable, cache_home, private_dir
from console.fleet.transport import control_dir

NOBODY = 65534


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(depth=st.integers(1, 4), above=st.integers(0, 3), how=st.sampled_from(["world-writable", "another user"]))
def test_an_ancestor_others_can_change_makes_the_directory_unusable(private_env, depth, above, how):
    base = private_env / f"t{depth}-{above}-{how[0]}"
    chain = [base / "/".join(f"d{i}" for i in range(k + 1)) for k in range(depth + above)]
    for directory in chain:
        directory.mkdir(mode=0o755, parents=True, exist_ok=True)
    weak = chain[depth - 1]  # an ancestor `above` levels over the private directory's parent
    target = chain[-1] / "private"
    try:
        if how == "world-writable":
            weak.chmod(0o777)
        elif os.geteuid() == 0:
            os.chown(weak, NOBODY, NOBODY)
        else:
            pytest.skip("only root can give a directory to another user")
        with pytest.raises(PrivateDirUnusable) as caught:
            private_dir(target)
        assert "\n" not in str(caught.value)
    finally:
        os.chown(weak, os.geteuid(), os.getegid())
        weak.chmod(0o755)
    assert private_dir(target) == target  # the same path is usable once every ancestor is safe


def test_the_cache_s_control_directory_under_an_open_cache_home_is_refused(private_env, monkeypatch):
    shared = private_env / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(shared))
    with pytest.raises(PrivateDirUnusable):
        control_dir()


def test_a_relative_cache_home_is_ignored(private_env, monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(private_env / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", "rel")
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    monkeypatch.chdir(tmp_path)
    assert cache_home() == private_env / "home" / ".cache"
    assert control_dir() == private_env / "home" / ".cache" / "archon-console" / "ssh"
    assert not (tmp_path / "rel").exists()
