#!/usr/bin/env bash
# Stops whatever of the local servers is running. Idempotent.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
if [ -x "$HERE/registry.sh" ]; then "$HERE/registry.sh" down; fi
"$HERE/kafka.sh" down
"$HERE/mariadb.sh" down
