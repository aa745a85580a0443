#!/usr/bin/env bash
# deploy/librdkafka.sh CACHE_DIR
#   Builds the librdkafka the streamer's producer loads, once per CACHE_DIR, and prints its path.
#
# Why: librdkafka 2.0.2 (Debian 12's) busy-waits in its main thread whenever its next timer is
# less than 1 ms away: the wait is rounded down to 0 ms and the thread polls until the timer
# fires (upstream issue #4684, fixed in 2.4.0). Each Kafka transaction arms a 1 ms timer to
# register its partitions, so every commit spins a core for ~1 ms: 1.3-2.0 ms of CPU per
# transaction, and 0.65 instead of 0.25 cores for a streamer under a 550 rows/s live load
# (docs/benchmarks.md, "librdkafka's 1 ms spin per transaction").
#
# What: Debian's own source of the same version (the one its librdkafka1 package is built
# from, checked against its published SHA-256), with that one rounding changed to round up,
# built with the features Debian's build has (SSL, SASL, zstd, lz4, zlib) and its hardening
# flags. Nothing else differs, so the producer's behaviour stays the one the tests have pinned
# down on 2.0.2. The system's librdkafka1 stays in place for confluent-kafka's consumer and
# admin client. Idempotent; installs missing build packages with apt when run as root.
set -euo pipefail

VERSION=2.0.2
SHA256=f321bcb1e015a34114c83cf1aa7b99ee260236aab096b85c003170c90a47ca9d
URL="http://deb.debian.org/debian/pool/main/libr/librdkafka/librdkafka_${VERSION}.orig.tar.gz"
FROM='rd_kafka_q_serve(rk->rk_ops, (int)(sleeptime / 1000), 0,'
TO='rd_kafka_q_serve(rk->rk_ops, (int)((sleeptime + 999) / 1000), 0,'
# Explicit --enable-X: a missing library fails the build instead of building without it.
CONFIGURE=(--prefix=/usr --enable-ssl --enable-gssapi --enable-zstd --enable-lz4-ext --enable-zlib
           --disable-curl)
PACKAGES=(build-essential curl python3 libssl-dev libsasl2-dev libzstd-dev liblz4-dev zlib1g-dev)

[ $# -eq 1 ] || { echo "usage: $0 CACHE_DIR" >&2; exit 2; }
cache="$1"
mkdir -p "$cache"
# What defines the build names it: a new version, change or flag builds anew, a comment does not.
key="$(printf '%s\n' "$VERSION" "$SHA256" "$FROM" "$TO" "${CONFIGURE[*]}" | sha256sum | cut -c1-12)"
out="$cache/librdkafka-$VERSION-$key"
lib="$out/librdkafka.so.1"

exec 9>"$cache/.librdkafka.lock"
flock 9  # two builds at once (make venv and a release build) make one library
if [ -f "$lib" ]; then
    echo "$lib"
    exit 0
fi

need=()
for pkg in "${PACKAGES[@]}"; do
    [ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null)" = "install ok installed" ] || need+=("$pkg")
done
if [ "${#need[@]}" -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "librdkafka: missing build packages; install them and rerun: apt-get install ${need[*]}" >&2
        exit 1
    fi
    echo "librdkafka: installing ${need[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "librdkafka: fetching $URL" >&2
curl -fsSL --retry 3 -o "$work/src.tar.gz" "$URL" || {
    echo "librdkafka: could not fetch $URL; check this host's access to deb.debian.org" >&2; exit 1; }
echo "$SHA256  $work/src.tar.gz" | sha256sum -c --quiet - >&2 || {
    echo "librdkafka: $URL does not have the SHA-256 of Debian's $VERSION source; not building it" >&2
    exit 1; }
tar -xzf "$work/src.tar.gz" -C "$work"
src="$work/librdkafka-$VERSION"

# The one change. Refuse to build if the source is not the one this change was written for.
[ "$(grep -cF "$FROM" "$src/src/rdkafka.c")" -eq 1 ] || {
    echo "librdkafka: the main loop's wait is not where expected in $VERSION's rdkafka.c" >&2; exit 1; }
python3 - "$src/src/rdkafka.c" "$FROM" "$TO" <<'EOF'
import sys
path, old, new = sys.argv[1:]
with open(path) as fh:
    text = fh.read()
with open(path, "w") as fh:
    fh.write(text.replace(old, new))
EOF
[ "$(grep -cF "$TO" "$src/src/rdkafka.c")" -eq 1 ]

echo "librdkafka: building $VERSION with the main loop's wait rounded up (~0.5-2 min)" >&2
export DEB_BUILD_MAINT_OPTIONS=hardening=+bindnow  # as Debian's package is built
CFLAGS="$(dpkg-buildflags --get CFLAGS)" LDFLAGS="$(dpkg-buildflags --get LDFLAGS)"
export CFLAGS LDFLAGS
(
    cd "$src"
    ./configure "${CONFIGURE[@]}" >"$work/configure.log" 2>&1 \
        || { tail -30 "$work/configure.log" >&2; exit 1; }
    make -C src -j"$(nproc)" librdkafka.so.1 >"$work/make.log" 2>&1 \
        || { tail -30 "$work/make.log" >&2; exit 1; }
)
mkdir -p "$out.tmp"
# Debug info out, symbol table kept: perf and gdb can still name the library's functions.
strip --strip-debug -o "$out.tmp/librdkafka.so.1" "$src/src/librdkafka.so.1"
printf 'librdkafka %s from %s (sha256 %s)\nchange: %s -> %s\n' \
    "$VERSION" "$URL" "$SHA256" "$FROM" "$TO" >"$out.tmp/BUILD"
rm -rf "$out"
mv "$out.tmp" "$out"
# Venvs and releases hold copies, so older builds in the cache are no longer needed.
for old in "$cache"/librdkafka-*; do
    [ "$old" = "$out" ] || rm -rf "$old"
done
echo "$lib"
