#!/usr/bin/env bash
# Stops whichever of the local servers (registry, Kafka, the replica, MariaDB) is running.
# Idempotent.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
"$HERE/registry.sh" down
"$HERE/kafka.sh" down
"$HERE/replica.sh" down
"$HERE/sources.sh" down
"$HERE/mysql.sh" down
