#!/usr/bin/env bash
# Builds code-server 4.100.3 (a real VS Code served to a browser) for the end-to-end test, offline-safe,
# and caches it under ~/.cache/kernel-lens/; idempotent: a complete cached build is reused as is.
# Prints the path of the built code-server package on its last line of stdout.
set -euo pipefail

VERSION="${CODE_SERVER_VERSION:-4.100.3}"
CACHE_ROOT="${KERNEL_LENS_CACHE:-$HOME/.cache/kernel-lens}"
DEST="$CACHE_ROOT/code-server-$VERSION"
STAMP="$DEST/.kernel-lens-complete"
APT_PACKAGES=(ripgrep libkrb5-dev libsecret-1-dev libx11-dev libxkbfile-dev pkg-config chromium)

log() { echo "[setup-code-server] $*" >&2; }

# Files whose absence means a build was interrupted or a postinstall step was skipped.
required_files() {
  local root="$1"
  echo "$root/out/node/entry.js"
  echo "$root/lib/vscode/out/server-main.js"
  echo "$root/lib/vscode/node_modules/@vscode/ripgrep/bin/rg"
  echo "$root/lib/vscode/node_modules/node-pty/build/Release/pty.node"
  echo "$root/lib/vscode/node_modules/@vscode/spdlog/build/Release/spdlog.node"
  echo "$root/node_modules/argon2/lib/binding/napi-v3/argon2.node"
}

cache_is_complete() {
  [[ -f "$STAMP" ]] || return 1
  local f
  while read -r f; do [[ -e "$f" ]] || { log "cache incomplete: missing $f"; return 1; }; done < <(required_files "$DEST")
  # Every native addon declared by a binding.gyp must have been compiled.
  while read -r gyp; do
    local dir; dir="$(dirname "$gyp")"
    compgen -G "$dir/build/Release/*.node" > /dev/null || { log "cache incomplete: no addon in $dir"; return 1; }
  done < <(find "$DEST/lib/vscode/node_modules" -name binding.gyp -not -path '*/node_modules/*/node_modules/*/test/*')
  "$DEST/lib/vscode/node_modules/@vscode/ripgrep/bin/rg" --version > /dev/null || return 1
}

install_system_packages() {
  local missing=()
  command -v rg > /dev/null || missing+=(ripgrep)
  [[ -x /usr/bin/chromium ]] || missing+=(chromium)
  [[ -f /usr/include/krb5.h || -f /usr/include/krb5/krb5.h ]] || missing+=(libkrb5-dev)
  pkg-config --exists libsecret-1 2> /dev/null || missing+=(libsecret-1-dev pkg-config)
  pkg-config --exists x11 xkbfile 2> /dev/null || missing+=(libx11-dev libxkbfile-dev)
  if ((${#missing[@]})); then
    log "installing system packages: ${APT_PACKAGES[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq "${APT_PACKAGES[@]}" >&2
  fi
}

build() {
  local work; work="$(mktemp -d "$CACHE_ROOT/build-XXXXXX")"
  trap 'rm -rf "$work"' EXIT
  # node-gyp would download node's headers (offline: fails); the node package ships them beside node.
  local node_prefix; node_prefix="$(dirname "$(dirname "$(command -v node)")")"
  [[ -f "$node_prefix/include/node/node.h" ]] || { log "node's headers are missing under $node_prefix/include/node"; exit 1; }
  local gyp_args=(--nodedir="$node_prefix")
  cd "$work"
  log "fetching code-server@$VERSION from npm"
  npm pack --silent "code-server@$VERSION" >&2
  tar xzf "code-server-$VERSION.tgz"
  cd package
  log "installing code-server dependencies (scripts off: they download from the internet)"
  npm install --omit=dev --ignore-scripts --no-audit --no-fund >&2
  (cd lib/vscode && npm install --omit=dev --ignore-scripts --no-audit --no-fund >&2)
  mkdir -p lib/vscode/node_modules/@vscode/ripgrep/bin
  cp "$(command -v rg)" lib/vscode/node_modules/@vscode/ripgrep/bin/rg
  log "compiling native addons"
  while read -r gyp; do
    local dir; dir="$(dirname "$gyp")"
    log "  node-gyp rebuild in ${dir#"$work/package/"}"
    (cd "$dir" && npx --yes node-gyp rebuild "${gyp_args[@]}" >&2)
  done < <(find "$work/package/lib/vscode/node_modules" -name binding.gyp -not -path '*/node_modules/*/node_modules/*/test/*')
  npm rebuild argon2 --build-from-source >&2
  touch "$work/package/.kernel-lens-complete"
  rm -rf "$DEST"
  mv "$work/package" "$DEST"
  rm -rf "$work"
  trap - EXIT
}

mkdir -p "$CACHE_ROOT"
# One build at a time: a second caller waits, then finds the cache complete.
exec 9> "$CACHE_ROOT/.lock"
flock 9
install_system_packages
if cache_is_complete; then
  log "using cached build at $DEST"
else
  rm -rf "$DEST"
  build
  cache_is_complete || { log "build finished but the result is incomplete"; exit 1; }
  log "built code-server $VERSION at $DEST"
fi
echo "$DEST"
