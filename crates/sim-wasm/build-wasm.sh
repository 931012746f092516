#!/usr/bin/env bash
# Build the WASM module into web/pkg/o1sim.wasm (git-ignored); `make web` calls this.
#
# The module is built with real unwinding (WASM exception handling, std rebuilt from
# source with -Zbuild-std) so a panic becomes an InternalError instead of a trap. Two
# routes to a compiler that can do that, tried in order:
#   1. rustup's toolchain with the `rust-src` component (added here if missing);
#   2. Debian's packages, when rustup's route is unavailable (offline, no rustup):
#        apt-get install rustc-web cargo-web rust-web-src lld
#      (/usr/bin/cargo + /usr/bin/rustc with std sources under /usr/lib/rustlib/src;
#      std's own dependencies come from crates.io like the project's).
# As a last resort (rustup's wasm32 target without rust-src) it builds with panic=abort:
# o1sim.js then recovers from a trap by re-instantiating, and says so in the error.
set -euo pipefail
cd "$(dirname "$0")/../.."

TARGET=wasm32-unknown-unknown
PROFILE=wasm-release
OUT=web/pkg
EH_FLAGS="-Cpanic=unwind -Ctarget-feature=+exception-handling"
mkdir -p "$OUT"

have_src() { [ -d "$1/lib/rustlib/src/rust/library/std" ]; }

# O1SIM_WASM_ROUTE=rustup|debian|rustup-abort forces a route (to check one that is not
# the first available; see DEVELOPERS.md).
route="${O1SIM_WASM_ROUTE:-}"
case "$route" in
  ""|rustup|debian|rustup-abort) ;;
  *) echo "error: O1SIM_WASM_ROUTE must be rustup, debian or rustup-abort (got '$route')" >&2; exit 1 ;;
esac
if [ -z "$route" ] && command -v rustup >/dev/null 2>&1 && command -v cargo >/dev/null 2>&1; then
  sysroot=$(rustc --print sysroot)
  have_src "$sysroot" || rustup component add rust-src >/dev/null 2>&1 || true
  if have_src "$sysroot"; then
    route=rustup
  elif [ ! -x /usr/bin/cargo ]; then
    rustup target add "$TARGET" >/dev/null 2>&1 || true
    [ -d "$sysroot/lib/rustlib/$TARGET" ] && route=rustup-abort
  fi
fi
if [ -z "$route" ] && [ -x /usr/bin/cargo ] && [ -x /usr/bin/rustc ] && have_src /usr; then
  route=debian
fi

# Silence the one expected note about the unstable target feature.
filter() { grep -v -e "unstable feature specified for \`-Ctarget-feature\`" \
  -e "this feature is not stably supported" -e "generated 1 warning" -e '^  |$' -e '^$' >&2 || true; }

case "$route" in
  rustup)
    RUSTC_BOOTSTRAP=1 RUSTFLAGS="$EH_FLAGS" CARGO_TARGET_DIR=target/wasm \
      cargo build --quiet -p sim-wasm --profile "$PROFILE" --target "$TARGET" \
      -Zbuild-std=std,panic_unwind 2> >(filter)
    wasm=target/wasm/$TARGET/$PROFILE/sim_wasm.wasm; eh=true ;;
  debian)
    command -v wasm-ld >/dev/null 2>&1 || { echo "error: wasm-ld missing (apt-get install lld)" >&2; exit 1; }
    RUSTC=/usr/bin/rustc RUSTC_BOOTSTRAP=1 RUSTFLAGS="$EH_FLAGS -Clinker=wasm-ld" \
      CARGO_TARGET_DIR=target/wasm-debian \
      /usr/bin/cargo build --quiet -p sim-wasm --profile "$PROFILE" --target "$TARGET" \
      -Zbuild-std=std,panic_unwind 2> >(filter)
    wasm=target/wasm-debian/$TARGET/$PROFILE/sim_wasm.wasm; eh=true ;;
  rustup-abort)
    echo "warning: building without exception handling (no rust-src, or forced): a panic traps the module; o1sim.js recovers" >&2
    CARGO_TARGET_DIR=target/wasm-abort cargo build --quiet -p sim-wasm --profile "$PROFILE" --target "$TARGET"
    wasm=target/wasm-abort/$TARGET/$PROFILE/sim_wasm.wasm; eh=false ;;
  *)
    echo "error: no Rust toolchain that can build for $TARGET. Either" >&2
    echo "  rustup component add rust-src   (rustup)" >&2
    echo "  apt-get install rustc-web cargo-web rust-web-src lld   (Debian)" >&2
    exit 1 ;;
esac

cp "$wasm" "$OUT/o1sim.wasm"
# Optional: O1SIM_WASM_OPT=1 runs binaryen's `wasm-opt -O3` (apt-get install binaryen, or npm
# `binaryen`) over the module; any failure keeps the unoptimised one. Off by default: with
# Debian's binaryen 108 it takes ~15 s and saves ~2.5% gzipped (419 → 409 KB); the speed
# change was within this machine's noise.
opt=false
if [ "${O1SIM_WASM_OPT:-0}" = 1 ]; then
  if command -v wasm-opt >/dev/null 2>&1 && wasm-opt -O3 --enable-exception-handling --enable-bulk-memory \
      --enable-sign-ext --enable-mutable-globals --enable-nontrapping-float-to-int --enable-multivalue \
      --enable-reference-types "$OUT/o1sim.wasm" -o "$OUT/o1sim.opt.wasm" 2>/dev/null; then
    mv "$OUT/o1sim.opt.wasm" "$OUT/o1sim.wasm"; opt=true
  else
    rm -f "$OUT/o1sim.opt.wasm"
    echo "warning: O1SIM_WASM_OPT=1 but wasm-opt is missing or failed: keeping the unoptimised module" >&2
  fi
fi
bytes=$(wc -c < "$OUT/o1sim.wasm")
gz=$(gzip -9 -c "$OUT/o1sim.wasm" | wc -c)
printf '{"route": "%s", "exception_handling": %s, "wasm_opt": %s, "bytes": %d, "gzip_bytes": %d}\n' \
  "$route" "$eh" "$opt" "$bytes" "$gz" > "$OUT/build.json"
echo "web/pkg/o1sim.wasm: $bytes bytes, $gz gzipped (route: $route, exception handling: $eh, wasm-opt: $opt)"
if [ "$gz" -gt 1048576 ]; then
  echo "error: the module is over 1 MB gzipped" >&2
  exit 1
fi
