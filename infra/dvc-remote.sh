#!/usr/bin/env bash
# Choose the DVC remote of this checkout from the environment (settings only; nothing committed).
#
#   infra/dvc-remote.sh s3      S3-compatible store: remote "s3" in .dvc/config.local (git-ignored),
#                               made the default; `dvc push` / `dvc pull` then use it
#   infra/dvc-remote.sh local   back to the committed default: remote "local" = <root>/.paperflows/dvc-remote
#   infra/dvc-remote.sh show    the remotes and which one is the default
#
# Variables (s3):
#   PAPERFLOWS_DVC_REMOTE_URL    s3://<bucket>/<prefix>                         (required)
#   PAPERFLOWS_DVC_S3_ENDPOINT   http://minio:9000 for MinIO and other S3-compatible stores
#                                (unset: AWS S3)
#   AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY
#                                read by DVC's S3 client from the environment at push/pull time;
#                                this script never writes them anywhere
#   PAPERFLOWS_ROOT              the project (default: the folder above this script)
# Needs the dvc-s3 plugin for push/pull (pip install -c constraints.txt dvc-s3).
set -euo pipefail

ROOT=${PAPERFLOWS_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
DVC=${DVC:-dvc}
cd "$ROOT"

case "${1:-}" in
  s3)
    url=${PAPERFLOWS_DVC_REMOTE_URL:?"set PAPERFLOWS_DVC_REMOTE_URL=s3://<bucket>/<prefix>"}
    if [[ $url != s3://?* ]]; then
      echo "dvc-remote.sh: PAPERFLOWS_DVC_REMOTE_URL must start with s3://, got '$url'" >&2
      exit 2
    fi
    "$DVC" remote add --local --force --default s3 "$url"
    if [[ -n ${PAPERFLOWS_DVC_S3_ENDPOINT:-} ]]; then
      "$DVC" remote modify --local s3 endpointurl "$PAPERFLOWS_DVC_S3_ENDPOINT"
    else
      "$DVC" remote modify --local --unset s3 endpointurl 2>/dev/null || true
    fi
    ;;
  local)
    "$DVC" remote remove --local s3 2>/dev/null || true
    "$DVC" config --local --unset core.remote 2>/dev/null || true
    ;;
  show) ;;
  *)
    echo "usage: infra/dvc-remote.sh s3|local|show" >&2
    exit 2
    ;;
esac
echo "default remote: $("$DVC" remote default)"
"$DVC" remote list
