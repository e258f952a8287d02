#!/usr/bin/env bash
# Sets up a fresh Debian machine (idempotent) and runs mailproof on the embedded default storage
# (SQLite and local files under ./data). Extra arguments go to `mailproof serve`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The WebKit engine runs in a helper binary that must sit next to `mailproof`.
cargo build --release -p mailproof -p webkit --bins
exec "${CARGO_TARGET_DIR:-target}/release/mailproof" serve "$@"
