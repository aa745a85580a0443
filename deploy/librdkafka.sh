#!/usr/bin/env bash
# deploy/librdkafka.sh [--relink-consumer] CACHE_DIR PYTHON PREFIX
#   Installs the librdkafka the streamer loads as PREFIX/lib/streamer/librdkafka.so.1 (with its
#   soname and a librdkafka.so beside it), fetched once per CACHE_DIR. With --relink-consumer,
#   PYTHON's confluent-kafka-pypy is rebuilt to load that same file. Prints the library's path.
#
# Which: upstream librdkafka 2.16.0, unpatched, as Confluent builds it for its confluent-kafka
# 2.16.1 wheels (SSL, SASL, zstd, lz4 and zlib linked in; only the C library is needed from the
# system). The wheel comes from the package index with pip, like every other dependency, and is
# checked against the SHA-256 pinned below; only its library is kept. It replaces the source
# build of Debian's 2.0.2 with its 1 ms spin per transaction patched out (fixed upstream in
# 2.4.0, #4684), and brings three years of upstream fixes to the transactional producer and the
# consumer. CPython's confluent-kafka 2.16.1 carries the very same file.
#
# The consumer side under PyPy: confluent-kafka-pypy 1.9.2 is the only confluent-kafka PyPy can
# build, and its C extension links to whatever librdkafka the linker finds, the system's 2.0.2
# otherwise. --relink-consumer builds it again (from its source, against the system's 2.0.2
# headers, which is all its 1.9.2 API needs; librdkafka keeps its ABI within .so.1) linked to
# this file with an rpath, so the checkpoint, schema and lease reads run on 2.16.0 as well.
# Idempotent.
set -euo pipefail

WHEEL_PACKAGE=confluent-kafka
WHEEL_VERSION=2.16.1
LIBRDKAFKA_VERSION=2.16.0
declare -A WHEEL_SHA256=(
    [x86_64]=24f613cc81a856b6fbb2d7d11044a9aa770044eecc1f83ff84618688b056be06
    [aarch64]=c012a1d74f95e91c9c43f0aa996d5fea8582397144c1f96b553f24b594afa7c6
)

relink=0
if [ "${1:-}" = "--relink-consumer" ]; then
    relink=1
    shift
fi
[ $# -eq 3 ] || { echo "usage: $0 [--relink-consumer] CACHE_DIR PYTHON PREFIX" >&2; exit 2; }
cache="$1" python="$2" prefix="$3"
fail() { echo "librdkafka: $*" >&2; exit 1; }

arch="$(uname -m)"
sha="${WHEEL_SHA256[$arch]:-}"
[ -n "$sha" ] || fail "no librdkafka wheel is pinned for $arch (only ${!WHEEL_SHA256[*]}); add its SHA-256 to $0"
mkdir -p "$cache"
out="$cache/librdkafka-$LIBRDKAFKA_VERSION-$arch-${sha:0:12}"

exec 9>"$cache/.librdkafka.lock"
flock 9  # two installs at once (make venv and a release build) fetch one library
if [ ! -f "$out/COMPLETE" ]; then
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
    echo "librdkafka: fetching $WHEEL_PACKAGE $WHEEL_VERSION's wheel for $arch (librdkafka $LIBRDKAFKA_VERSION)" >&2
    # --platform fetches the CPython 3.11 wheel whatever interpreter runs pip: only its
    # self-contained librdkafka is used, and that depends on no Python at all.
    "$python" -m pip download -q --no-deps --only-binary=:all: --implementation cp --abi cp311 --python-version 3.11 \
        --platform "manylinux_2_28_$arch" -d "$work" "$WHEEL_PACKAGE==$WHEEL_VERSION" >&2 \
        || fail "could not fetch $WHEEL_PACKAGE==$WHEEL_VERSION from the package index; check this host's pip access"
    wheel="$(ls "$work"/*.whl)"
    echo "$sha  $wheel" | sha256sum -c --quiet - >&2 \
        || fail "$(basename "$wheel") does not have the pinned SHA-256 $sha; not using it"
    rm -rf "$out"
    mkdir -p "$out"
    "$python" - "$wheel" "$out" "$LIBRDKAFKA_VERSION" <<'EOF'
import ctypes, fnmatch, os, sys, zipfile
wheel, out, expected = sys.argv[1:]
with zipfile.ZipFile(wheel) as zf:
    libs = [n for n in zf.namelist() if fnmatch.fnmatch(n, "confluent_kafka.libs/librdkafka-*.so.1")]
    if len(libs) != 1:
        sys.exit(f"librdkafka: expected one librdkafka in {wheel}, found {libs}")
    path = os.path.join(out, os.path.basename(libs[0]))  # its file name is its soname
    with zf.open(libs[0]) as src, open(path, "wb") as dst:
        dst.write(src.read())
os.chmod(path, 0o755)
lib = ctypes.CDLL(path)
lib.rd_kafka_version_str.restype = ctypes.c_char_p
got = lib.rd_kafka_version_str().decode()
if got != expected:
    sys.exit(f"librdkafka: {path} is version {got}, not {expected}")
EOF
    touch "$out/COMPLETE"
    # Venvs and releases hold copies, so older libraries in the cache are no longer needed.
    for old in "$cache"/librdkafka-*; do
        [ "$old" = "$out" ] || rm -rf "$old"
    done
fi
soname="$(cd "$out" && ls librdkafka-*.so.1)"

# The file is librdkafka.so.1, where streamer/kafka/rdkafka.py looks; its soname, which a binary
# linked to it asks for, and librdkafka.so, which the linker's -lrdkafka finds, point to it.
dir="$(cd "$(dirname "$prefix")" && pwd)/$(basename "$prefix")/lib/streamer"
mkdir -p "$dir"
install -m 0755 "$out/$soname" "$dir/librdkafka.so.1.tmp"
mv -f "$dir/librdkafka.so.1.tmp" "$dir/librdkafka.so.1"
ln -sfn librdkafka.so.1 "$dir/$soname"
ln -sfn librdkafka.so.1 "$dir/librdkafka.so"

if [ "$relink" -eq 1 ]; then
    have="$("$python" -c 'import confluent_kafka; print(confluent_kafka.libversion()[0])')"
    if [ "$have" != "$LIBRDKAFKA_VERSION" ]; then
        version="$("$python" -c 'import importlib.metadata as m; print(m.version("confluent-kafka-pypy"))')" \
            || fail "$python has no confluent-kafka-pypy to relink"
        echo "librdkafka: building confluent-kafka-pypy $version against $dir (it had $have)" >&2
        # --no-cache-dir: a wheel built before, linked to the system's library, is not reused.
        LDFLAGS="-L$dir -Wl,-rpath,$dir" "$python" -m pip install -q --no-cache-dir --no-deps \
            --force-reinstall "confluent-kafka-pypy==$version" >&2 \
            || fail "could not rebuild confluent-kafka-pypy $version"
        have="$("$python" -c 'import confluent_kafka; print(confluent_kafka.libversion()[0])')"
        [ "$have" = "$LIBRDKAFKA_VERSION" ] \
            || fail "confluent-kafka-pypy still loads librdkafka $have after its rebuild, not $LIBRDKAFKA_VERSION"
    fi
fi
echo "$dir/librdkafka.so.1"
