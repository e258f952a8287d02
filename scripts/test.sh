#!/usr/bin/env bash
# Sets up a fresh Debian machine (idempotent) and runs the whole test suite: formatting, lints, and
# every crate's tests, which start the browsers, filters and servers they need themselves, then the
# independent spec conformance client (conformance/spec_client.py) against the real binary.
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
echo "== the integration suites again, on PostgreSQL (the store's own tests already ran on both)"
MAILPROOF_TEST_DB=postgres cargo test -p inbox --test it --locked
MAILPROOF_TEST_DB=postgres cargo test -p mailproof --test it --locked
echo "== conformance: an independent client written from the spec alone, against mailproof serve"
python3 conformance/spec_client.py --strict target/debug/mailproof
