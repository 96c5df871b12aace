#!/usr/bin/env bash
# Provides the OpenSSH server that the fleet tests run (tests/fleet/sshd.py): /usr/sbin/sshd where it
# is installed, else Debian's openssh-server package (and libwrap0, which its sshd links) fetched with
# `apt-get download` and unpacked with `dpkg-deb -x` into .cache/openssh/ of this checkout; nothing is
# installed on the machine. Idempotent and quick once done: it only checks the unpacked sshd again.
#
# Prints the sshd to use. On failure it prints why on stderr, writes the same sentence to
# .cache/openssh/failed (the fixture's skip reason quotes it) and exits 1.
set -uo pipefail
cd "$(dirname "$0")/../.."
CACHE=$PWD/.cache/openssh
UNPACKED=$CACHE/root
mkdir -p "$CACHE"

fail() {
    echo "provision_sshd: $*" >&2
    echo "$*" > "$CACHE/failed"
    exit 1
}

# `sshd -t` on a throwaway config and host key proves the binary runs here (its libraries load, its
# config parser accepts what the fixture writes). As root, sshd insists on its privilege-separation
# user, which the fixture never needs (it runs sshd as uid 1000 of a user namespace), so the check
# runs the same way where it can.
check() {
    local sshd=$1 libdir=$2 tmp
    tmp=$(mktemp -d) || return 1
    ssh-keygen -q -t ed25519 -N '' -f "$tmp/key" >/dev/null || { rm -rf "$tmp"; return 1; }
    printf 'HostKey %s/key\nPidFile none\nUsePAM no\nListenAddress 127.0.0.2:22\nExposeAuthInfo yes\n' "$tmp" > "$tmp/config"
    local out
    if unshare --user --map-user=1000 --map-group=1000 true 2>/dev/null; then
        out=$(LD_LIBRARY_PATH=$libdir unshare --user --map-user=1000 --map-group=1000 "$sshd" -t -f "$tmp/config" 2>&1)
    else
        out=$(LD_LIBRARY_PATH=$libdir "$sshd" -t -f "$tmp/config" 2>&1)
    fi
    local rc=$?
    rm -rf "$tmp"
    [ $rc -eq 0 ] || { echo "$sshd -t failed: $out" >&2; return 1; }
}

command -v ssh-keygen >/dev/null || fail "ssh-keygen is not installed (Debian: openssh-client)"

if [ -x /usr/sbin/sshd ] && check /usr/sbin/sshd ""; then
    rm -f "$CACHE/failed"
    echo /usr/sbin/sshd
    exit 0
fi

libdir() { dirname "$(find "$UNPACKED" -name 'libwrap.so.0' -print -quit 2>/dev/null)"; }

if [ ! -x "$UNPACKED/usr/sbin/sshd" ] || ! check "$UNPACKED/usr/sbin/sshd" "$(libdir)" 2>/dev/null; then
    command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null \
        || fail "no sshd: /usr/sbin/sshd is absent and apt-get/dpkg-deb are not here to fetch Debian's openssh-server"
    # One provisioning at a time (two test workers may start it together).
    exec 9>"$CACHE/.lock"
    flock -w 300 9 || fail "another provision_sshd.sh held $CACHE/.lock for 300 s"
    if [ ! -x "$UNPACKED/usr/sbin/sshd" ]; then
        debs=$(mktemp -d "$CACHE/debs.XXXXXX")
        fetch() { (cd "$debs" && apt-get download -q openssh-server libwrap0 >/dev/null 2>"$debs/log"); }
        if ! fetch; then
            # A fresh machine has no package lists yet; as root, read them once and try again.
            [ "$(id -u)" = 0 ] && apt-get update -qq >/dev/null 2>&1 && fetch \
                || { err=$(tail -n 3 "$debs/log" | tr '\n' ' '); rm -rf "$debs"; fail "apt-get download openssh-server libwrap0 failed: $err"; }
        fi
        rm -rf "$UNPACKED.new" && mkdir -p "$UNPACKED.new"
        for deb in "$debs"/*.deb; do
            dpkg-deb -x "$deb" "$UNPACKED.new" || { rm -rf "$debs" "$UNPACKED.new"; fail "dpkg-deb -x $deb failed"; }
        done
        rm -rf "$debs" "$UNPACKED" && mv "$UNPACKED.new" "$UNPACKED"
    fi
    check "$UNPACKED/usr/sbin/sshd" "$(libdir)" || fail "the unpacked $UNPACKED/usr/sbin/sshd does not run here (see above)"
fi
rm -f "$CACHE/failed"
echo "$UNPACKED/usr/sbin/sshd"
