"""Who acts in a `serve` session, resolved on the host (console/services/host_identity.py): the SSH
certificate's Key ID read from `$SSH_USER_AUTH` by a bounded, hostile-input-safe parser, and the
order of the sources (issue 20)."""

from __future__ import annotations

import base64
import os
import shutil
import struct
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.services.host_identity import Policy, ServeRefused, resolve
from console.services.ssh_certificate import CertificateUnusable, auth_file_key_ids, key_id, key_ids
from tests.approvals_helpers import events, live_request
from tests.fleet.serve_helpers import server_env

SSH_KEYGEN = shutil.which("ssh-keygen")
needs_keygen = pytest.mark.skipif(SSH_KEYGEN is None, reason="ssh-keygen (OpenSSH) is not installed")
SSH = {"SSH_CONNECTION": "127.0.0.1 50000 127.0.0.1 22"}


def certificate(tmp_path, key_type: str, key_id_: str, *, host: bool = False) -> str:
    """An auth-file line for a user certificate signed by a throwaway CA (`ssh-keygen -s CA -I ID`)."""
    folder = tmp_path / f"keys-{key_type}-{len(os.listdir(tmp_path))}"
    folder.mkdir()
    for name in ("ca", "user"):
        subprocess.run([SSH_KEYGEN, "-q", "-t", key_type, "-N", "", "-f", str(folder / name)], check=True,
                       timeout=60, capture_output=True)
    subprocess.run([SSH_KEYGEN, "-q", "-s", str(folder / "ca"), "-I", key_id_, "-n", "alice",
                    *(["-h"] if host else []), str(folder / "user.pub")], check=True, timeout=60, capture_output=True)
    cert_type, blob = (folder / "user-cert.pub").read_text().split()[:2]
    return f"publickey {cert_type} {blob}"


def auth_file(tmp_path, *lines: str):
    path = tmp_path / "sshauth"
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


@pytest.mark.slow
@needs_keygen
@pytest.mark.parametrize("key_type", ["ed25519", "ecdsa", "rsa"])
def test_the_key_id_of_each_certificate_type(tmp_path, key_type):
    path = auth_file(tmp_path, "keyboard-interactive", certificate(tmp_path, key_type, f"alice-key-id-{key_type}"))
    assert auth_file_key_ids(path) == [f"alice-key-id-{key_type}"]


@needs_keygen
def test_a_session_with_a_certificate_acts_as_its_key_id(servers, db, tmp_path):
    live = live_request(db)
    path = auth_file(tmp_path, certificate(tmp_path, "ed25519", "alice-key-id"))
    server = servers(db=db, env=server_env(SSH_USER_AUTH=str(path), **SSH))
    hello = server.hello()
    assert hello["actor"] == "alice-key-id" and hello["actor_source"] == "certificate"
    assert server.call("approvals.approve", ids=[live])["output"][0]["ok"]
    (event,) = [e for e in events(db, live) if e["to_status"] == "approved"]
    assert event["actor_reference"] == "alice-key-id"


@needs_keygen
def test_a_host_certificate_names_nobody(tmp_path):
    line = certificate(tmp_path, "ed25519", "host-id", host=True)
    with pytest.raises(CertificateUnusable, match="host certificate"):
        key_ids(line)


@needs_keygen
def test_certificates_of_two_key_ids_leave_the_session_read_only(tmp_path):
    path = auth_file(tmp_path, certificate(tmp_path, "ed25519", "alice"), certificate(tmp_path, "ecdsa", "bob"))
    identity = resolve(None, Policy(), {"SSH_USER_AUTH": str(path), **SSH}, "svc")
    assert identity.actor is None and "several" in identity.ambiguous


@needs_keygen
def test_a_key_id_the_console_cannot_record_leaves_the_session_read_only(tmp_path):
    path = auth_file(tmp_path, certificate(tmp_path, "ed25519", "alice\u200b"))
    identity = resolve(None, Policy(), {"SSH_USER_AUTH": str(path), **SSH}, "svc")
    assert identity.actor is None and identity.source == "certificate" and identity.ambiguous


def _wire_string(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def _forged(cert_type: str = "ssh-ed25519-cert-v01@openssh.com", key_id_: bytes = b"alice") -> bytes:
    """A well-formed certificate body (the signature is not checked here: sshd did that)."""
    s = _wire_string
    return (s(cert_type.encode()) + s(b"n" * 32) + s(b"k" * 32) + struct.pack(">QI", 1, 1) + s(key_id_) + s(b"")
            + struct.pack(">QQ", 0, 2 ** 64 - 1) + s(b"") + s(b"") + s(b"") + s(b"ca") + s(b"sig"))


def test_the_parser_reads_a_well_formed_body_and_refuses_trailing_bytes():
    assert key_id("ssh-ed25519-cert-v01@openssh.com", _forged()) == "alice"
    with pytest.raises(CertificateUnusable, match="after its signature"):
        key_id("ssh-ed25519-cert-v01@openssh.com", _forged() + b"x")
    with pytest.raises(CertificateUnusable, match="differs"):
        key_id("ssh-rsa-cert-v01@openssh.com", _forged())


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cut=st.integers(min_value=0, max_value=400), flips=st.lists(st.tuples(st.integers(0, 399), st.integers(0, 255)),
                                                                    max_size=6))
def test_a_damaged_certificate_is_refused_in_one_sentence(cut, flips):
    """Any truncation or byte change: the Key ID, or CertificateUnusable; never another exception,
    never a read past the blob (a length field of 4 GB is checked, not trusted)."""
    blob = bytearray(_forged())
    for at, value in flips:
        if at < len(blob):
            blob[at] = value
    line = f"publickey ssh-ed25519-cert-v01@openssh.com {base64.b64encode(bytes(blob[:cut])).decode()}"
    try:
        ids = key_ids(line)
    except CertificateUnusable as exc:
        assert "\n" not in str(exc)
    else:
        assert len(ids) <= 1


@pytest.mark.parametrize("text", ["publickey ssh-ed25519-cert-v01@openssh.com !!!notbase64\n",
                                  "publickey ssh-ed25519-cert-v01@openssh.com " + "A" * 40000 + "\n",
                                  "publickey x-cert-v01@openssh.com AAAA\n"])
def test_a_hostile_auth_line_is_refused(text):
    with pytest.raises(CertificateUnusable):
        key_ids(text)


def test_an_unusable_auth_file_falls_back_to_the_login_and_says_why(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # a FIFO would block a plain open() for ever
    for path in (fifo, tmp_path / "absent", tmp_path):
        identity = resolve(None, Policy(), {"SSH_USER_AUTH": str(path), **SSH}, "svc")
        assert identity.actor == "svc" and identity.source == "login" and "was not used" in identity.note


def test_the_order_of_the_sources():
    env = {**SSH, "SSH_ORIGINAL_COMMAND": "archon-console serve --stdio"}
    assert resolve("alice", Policy(), env, "svc").source == "forced_command"
    assert resolve("alice", Policy(), {}, "svc").source == "command_line"
    with pytest.raises(ServeRefused, match="forced command"):
        resolve("alice", Policy(), SSH, "svc")
    with pytest.raises(ServeRefused):
        resolve("archon", Policy(), {}, "svc")
    assert resolve(None, Policy(), SSH, "svc").actor == "svc"
    shared = resolve(None, Policy(frozenset({"svc"}), path="/p"), SSH, "svc")
    assert shared.actor is None and shared.source == "shared_account" and shared.ambiguous
    assert resolve(None, Policy(), SSH, None).ambiguous
    assert resolve(None, Policy(), SSH, "archon").ambiguous  # a reserved name names nobody


def test_a_strange_ssh_connection_is_not_recorded_verbatim():
    identity = resolve(None, Policy(), {"SSH_CONNECTION": "1.2.3.4 1 5.6.7.8 22\n{\"forged\": 1}"}, "svc")
    assert identity.ssh_connection == "unrecognised"
