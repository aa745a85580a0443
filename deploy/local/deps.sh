#!/usr/bin/env bash
# System packages the two virtualenvs need: Debian's PyPy 3.9, and librdkafka (headers for
# confluent-kafka-pypy's build; the library itself for the producer, which loads it through cffi),
# and the openssl tool, which a unit test uses for a throwaway TLS certificate.
# Idempotent: installs only what is missing.
set -euo pipefail

need=()
for pkg in pypy3 pypy3-dev pypy3-venv librdkafka-dev build-essential openssl; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
        need+=("$pkg")
    fi
done
if [ "${#need[@]}" -gt 0 ]; then
    echo "deps: installing ${need[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
