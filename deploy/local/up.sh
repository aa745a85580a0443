#!/usr/bin/env bash
# Starts the private MariaDB and Kafka the streamer and its tests use. Idempotent.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
"$HERE/mariadb.sh" up
"$HERE/kafka.sh" up
