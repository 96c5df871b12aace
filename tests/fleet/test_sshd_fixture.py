"""The sshd fixture's own promises (tests/fleet/sshd.py): provisioning is idempotent, and what stops
sshd from running here is said in words (the skip reason) rather than as a hang or a traceback."""

from __future__ import annotations

import subprocess

import pytest

from tests.fleet.sshd import AS_ROOT, PROVISION, enter_mount_namespace


def test_provisioning_again_changes_nothing(sshd_binary):
    again = subprocess.run([str(PROVISION)], capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip().splitlines()[-1] == str(sshd_binary.path)
    assert not (PROVISION.parents[2] / ".cache" / "openssh" / "failed").exists()


@pytest.mark.skipif(not AS_ROOT, reason="only root's sshd runs in a mount namespace of its own")
def test_a_namespace_that_cannot_be_entered_is_said_in_words(tmp_path):
    missing = tmp_path / "no-such-home"  # no passwd file to bind-mount
    result = subprocess.run(["true"], preexec_fn=enter_mount_namespace(missing), capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 127
    assert result.stderr == ("cannot enter a mount namespace: [Errno 2] bind-mount /etc/passwd: "
                             "No such file or directory\n")
