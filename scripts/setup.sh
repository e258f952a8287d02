#!/usr/bin/env bash
# Installs every outside part mailproof and its test suite need, from Debian's packages.
# Idempotent: a package already present is not installed again, and a second run changes nothing.
set -euo pipefail

packages=(
  # Rendering engines (issue: real rendering) and the display WebKitGTK needs.
  chromium
  firefox-esr
  webkit2gtk-driver
  xvfb
  xauth
  # Metric-compatible fonts, colour emoji and CJK, so layouts stay faithful in every engine.
  fonts-liberation2
  fonts-crosextra-carlito
  fonts-crosextra-caladea
  fonts-dejavu-core
  fonts-noto-color-emoji
  fonts-noto-cjk
  fontconfig
  # Spam filters that really run.
  spamassassin
  spamd
  rspamd
  # A local SMTP server with AUTH for the conformance client (conformance/spec_client.py).
  python3-aiosmtpd
  # Build dependencies of -sys crates.
  pkg-config
  libssl-dev
  # The webkit crate's helper embeds WebKitGTK through gtk-rs, which links these.
  libwebkit2gtk-4.1-dev
  libgtk-3-dev
  sqlite3
  # PostgreSQL, the second storage backend: the tests start their own throw-away cluster (as the
  # postgres user, on a loopback port); the package's own cluster is not started (policy-rc.d below).
  postgresql
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing packages: ${missing[*]}" >&2
    echo "setup: run this script as root (or: sudo apt-get install -y ${missing[*]})" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # policy-rc.d keeps the packages' own services (spamd, rspamd, redis, postgresql) from starting:
  # the tests start their own instances on loopback ports they choose.
  had_policy=0
  [ -e /usr/sbin/policy-rc.d ] && had_policy=1
  if [ $had_policy -eq 0 ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
    chmod +x /usr/sbin/policy-rc.d
  fi
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
  if [ $had_policy -eq 0 ]; then rm -f /usr/sbin/policy-rc.d; fi
else
  echo "setup: all packages present"
fi

if ! command -v cargo-nextest >/dev/null 2>&1 && ! cargo nextest --version >/dev/null 2>&1; then
  echo "setup: cargo-nextest not found; installing it from crates.io"
  cargo install --locked cargo-nextest
fi

# axe-core (MPL-2.0), the accessibility checker the web interface's browser tests inject into each
# page. Installed once to a fixed place, never at test time.
AXE_DIR=/opt/mailproof/axe-core
AXE_VERSION=4.10.3
if [ ! -f "$AXE_DIR/node_modules/axe-core/axe.min.js" ]; then
  if ! command -v npm >/dev/null 2>&1; then
    echo "setup: npm is needed to install axe-core for the web tests (apt-get install -y npm)" >&2
    exit 1
  fi
  echo "setup: installing axe-core $AXE_VERSION to $AXE_DIR"
  mkdir -p "$AXE_DIR"
  npm install --prefix "$AXE_DIR" --no-audit --no-fund --silent "axe-core@$AXE_VERSION"
fi

# s3s-fs (Apache-2.0), an S3-compatible server over a local directory: the tests of S3 blob storage
# start it on loopback (crates/store/src/test_s3.rs). Built from crates.io once, into a fixed place,
# skipped when that version is already there. A debug build: the tests move a few small PNGs, and
# it builds in about half the time of a release build (51 s against 95 s here; the S3 suites take
# the same time with either).
S3S_FS_ROOT=/opt/mailproof/s3s-fs
S3S_FS_VERSION=0.11.1
if [ "$("$S3S_FS_ROOT/bin/s3s-fs" --version 2>/dev/null)" != "s3s-fs $S3S_FS_VERSION" ]; then
  echo "setup: installing s3s-fs $S3S_FS_VERSION to $S3S_FS_ROOT"
  cargo install --locked --debug --version "$S3S_FS_VERSION" --features binary --root "$S3S_FS_ROOT" s3s-fs
fi
