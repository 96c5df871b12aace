"""The Key ID of the OpenSSH user certificate a session logged in with, read from `$SSH_USER_AUTH`.

With `ExposeAuthInfo yes`, sshd writes the methods and public credentials that authenticated the
session to a file and names it in `$SSH_USER_AUTH`; a certificate login is a line
`publickey ssh-ed25519-cert-v01@openssh.com AAAA...`. The Key ID is the name the certificate
authority signed (`ssh-keygen -s CA -I alice ...`), so it names a person even behind one shared
login. sshd checked the certificate against its `TrustedUserCAKeys` before writing the file; this
module only reads the name out of it (PROTOCOL.certkeys in OpenSSH's sources describes the format).

Everything here is hostile input: the file is read bounded (console/small_files.py), every length
field is checked against what is left before it is used, and a certificate of another shape than
the ones below, a host certificate or trailing bytes are refused as a whole (`CertificateUnusable`,
one sentence), never half-read.
"""

from __future__ import annotations

import base64
import binascii
import os
import struct

MAX_AUTH_FILE = 64 * 1024  # a few lines of keys; an RSA-16384 certificate is under 5 KB
MAX_BLOB = 16 * 1024

# What follows the nonce in each certificate type, before the common fields (PROTOCOL.certkeys):
# "s" a string, "m" an mpint (both length-prefixed).
_KEY_FIELDS = {
    "ssh-ed25519-cert-v01@openssh.com": "s",
    "ssh-rsa-cert-v01@openssh.com": "mm",
    "ssh-dss-cert-v01@openssh.com": "mmmm",
    "ecdsa-sha2-nistp256-cert-v01@openssh.com": "ss",
    "ecdsa-sha2-nistp384-cert-v01@openssh.com": "ss",
    "ecdsa-sha2-nistp521-cert-v01@openssh.com": "ss",
    "sk-ssh-ed25519-cert-v01@openssh.com": "ss",
    "sk-ecdsa-sha2-nistp256-cert-v01@openssh.com": "sss",
}
CERT_TYPES = tuple(_KEY_FIELDS)
USER_CERT = 1


class CertificateUnusable(ValueError):
    """The auth file or a certificate in it cannot be read; `str()` says why in one sentence."""


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.at = data, 0

    def take(self, size: int) -> bytes:
        if size < 0 or self.at + size > len(self.data):
            raise CertificateUnusable("the certificate is cut short")
        part = self.data[self.at:self.at + size]
        self.at += size
        return part

    def string(self) -> bytes:
        (size,) = struct.unpack(">I", self.take(4))
        return self.take(size)

    def uint32(self) -> int:
        return struct.unpack(">I", self.take(4))[0]

    def uint64(self) -> int:
        return struct.unpack(">Q", self.take(8))[0]


def key_id(cert_type: str, blob: bytes) -> str:
    """The Key ID of a user certificate of `cert_type` (the type the auth line names)."""
    if cert_type not in _KEY_FIELDS:
        raise CertificateUnusable(f"{cert_type[:80]!r} is not an OpenSSH certificate type the console reads")
    if len(blob) > MAX_BLOB:
        raise CertificateUnusable(f"the certificate is {len(blob)} bytes, more than {MAX_BLOB}")
    reader = _Reader(blob)
    if reader.string() != cert_type.encode("ascii"):
        raise CertificateUnusable("the certificate's own type differs from the type its line names")
    reader.string()  # nonce
    for _field in _KEY_FIELDS[cert_type]:
        reader.string()  # strings and mpints are both length-prefixed
    reader.uint64()  # serial
    if reader.uint32() != USER_CERT:
        raise CertificateUnusable("the certificate is a host certificate, not a user certificate")
    raw_id = reader.string()
    for _field in ("principals", "valid_after", "valid_before", "critical", "extensions", "reserved",
                   "signature_key", "signature"):
        if _field in ("valid_after", "valid_before"):
            reader.uint64()
        else:
            reader.string()
    if reader.at != len(blob):
        raise CertificateUnusable("the certificate has bytes after its signature")
    try:
        return raw_id.decode("utf-8")
    except UnicodeDecodeError:
        raise CertificateUnusable("the certificate's Key ID is not UTF-8 text") from None


def key_ids(text: str) -> list[str]:
    """The Key IDs of every certificate line of an auth file's text, in order, without repeats."""
    found: list[str] = []
    for line in text.splitlines():
        words = line.split()
        if len(words) < 3 or words[0] != "publickey" or not words[1].endswith("-cert-v01@openssh.com"):
            continue
        if len(words[2]) > MAX_BLOB * 2:
            raise CertificateUnusable("a certificate line is longer than any certificate")
        try:
            blob = base64.b64decode(words[2], validate=True)
        except (binascii.Error, ValueError):
            raise CertificateUnusable("a certificate line is not base64") from None
        name = key_id(words[1], blob)
        if name not in found:
            found.append(name)
    return found


def auth_file_key_ids(path: str | os.PathLike[str]) -> list[str]:
    """The Key IDs in the auth file at `path` (`$SSH_USER_AUTH`); CertificateUnusable when the file
    cannot be read as one (missing, not a small regular file, not UTF-8, a certificate unreadable)."""
    from console.small_files import read_small_text

    try:
        text = read_small_text(path, limit=MAX_AUTH_FILE)
    except (OSError, UnicodeDecodeError) as exc:
        why = getattr(exc, "strerror", None) or str(exc)
        raise CertificateUnusable(f"$SSH_USER_AUTH ({os.fspath(path)[:200]}) cannot be read: {why}") from None
    return key_ids(text)


__all__ = ["CERT_TYPES", "CertificateUnusable", "MAX_AUTH_FILE", "auth_file_key_ids", "key_id", "key_ids"]
