#!/usr/bin/env bash
# deploy/deploy.sh ENV VERSION [--source DIR] [--health-timeout S]
#   installs STREAMER_PREFIX/releases/VERSION (default prefix /opt/streamer), switches
#   ENV/current to it, restarts streamer@ENV (or supervisord's streamer-ENV when
#   STREAMER_SUPERVISOR=supervisord), waits for /health and rolls back when it fails.
# deploy/deploy.sh build VERSION        builds the release only
# deploy/deploy.sh verify ENV [--main ENV] [--window S]   the canary verdict
# Credentials come from STREAMER_PREFIX/etc/ENV.env (mode 600) or the environment, never argv.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PY="${STREAMER_DEPLOY_PYTHON:-$ROOT/.venv-pypy/bin/python}"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
exec "$PY" -m streamer.deploy.rollout "$@"
