#!/usr/bin/env bash
# System packages: Debian's Chromium and its driver (the browser test of the Prefect UI), and
# Fashion-MNIST's IDX files (Debian's dataset-fashion-mnist; components.data.image_files reads them). Installed with apt when missing and we are root; otherwise we say what is missing and
# the browser test skips with that reason. Cheap no-op when everything is present.
set -euo pipefail
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
dpkg -s dataset-fashion-mnist >/dev/null 2>&1 || missing+=(dataset-fashion-mnist)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing system packages: ${missing[*]} ..."
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q "${missing[@]}" >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q "${missing[@]}" >/dev/null; }
else
  echo "note: ${missing[*]} not installed and no root apt available; the browser test and Fashion-MNIST tasks will skip" >&2
fi
