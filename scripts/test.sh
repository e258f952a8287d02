#!/usr/bin/env bash
# Sets up a fresh Debian machine (idempotent) and runs the whole test suite: formatting, lints, and
# every crate's tests, which start the browsers, filters and servers they need themselves.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export CARGO_TERM_COLOR=never
echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== cargo test"
cargo test --workspace --locked
