#!/usr/bin/env bash
# System packages the two virtualenvs need: Debian's PyPy 3.9, librdkafka's headers and a C
# compiler for confluent-kafka-pypy's build (which deploy/librdkafka.sh then links to upstream's
# 2.16.0; the system's 2.0.2 library stays for STREAMER_LIBRDKAFKA=system and the tests that
# compare with it), the openssl tool, which a unit test uses for a throwaway TLS certificate, and
# Prometheus for its promtool, which checks and tests deploy/monitoring's alert rules (its
# service is not started).
# Idempotent: installs only what is missing.
set -euo pipefail

need=()
for pkg in pypy3 pypy3-dev pypy3-venv librdkafka-dev build-essential openssl prometheus; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
        need+=("$pkg")
    fi
done
if [ "${#need[@]}" -gt 0 ]; then
    echo "deps: installing ${need[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
