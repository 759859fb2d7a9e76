#!/usr/bin/env bash
# Moves the module to another collector release: core beta modules and ocb at CORE, core
# stable modules at STABLE, contrib at CONTRIB (docs/toolchain.md, "Bumping the release").
#
#   scripts/set-release.sh v0.165.0 v1.71.0 v0.165.1                  # the distribution
#   scripts/set-release.sh --modules-only v0.165.0 v1.71.0 v0.165.1   # go.mod and go.sum only
#
# The release it moves from is the one the Makefile names (COLLECTOR_CORE, COLLECTOR_STABLE,
# COLLECTOR_CONTRIB). Every core module in go.mod moves, and contrib's direct requirements;
# go mod tidy then takes every other module to what the new release requires (some indirect
# contrib modules, e.g. pkg/pdatautil, are not served at a newer release and not needed
# there). It fails when a collector module is off the new release afterwards. Without
# --modules-only it also rewrites builder-config.yaml, the Makefile's release variables and
# mdatagen's pin in internal/tools/go.mod. Needs only the Go module proxy.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}

modules_only=
if [ "${1:-}" = --modules-only ]; then
  modules_only=1
  shift
fi
if [ $# -ne 3 ]; then
  echo "usage: $0 [--modules-only] CORE STABLE CONTRIB   (e.g. v0.165.0 v1.71.0 v0.165.1)" >&2
  exit 2
fi
CORE=$1 STABLE=$2 CONTRIB=$3

makevar() { sed -n "s/^$1 := //p" Makefile; }
FROM_CORE=$(makevar COLLECTOR_CORE)
FROM_STABLE=$(makevar COLLECTOR_STABLE)
FROM_CONTRIB=$(makevar COLLECTOR_CONTRIB)
if [ -z "$FROM_CORE" ] || [ -z "$FROM_STABLE" ] || [ -z "$FROM_CONTRIB" ]; then
  echo "set-release: the Makefile names no COLLECTOR_CORE / COLLECTOR_STABLE / COLLECTOR_CONTRIB" >&2
  exit 1
fi

edits=()
while read -r mod ver indirect; do
  case "$mod@$ver" in
    go.opentelemetry.io/collector*@"$FROM_CORE") edits+=("-require=$mod@$CORE") ;;
    go.opentelemetry.io/collector*@"$FROM_STABLE") edits+=("-require=$mod@$STABLE") ;;
    github.com/open-telemetry/opentelemetry-collector-contrib/*@"$FROM_CONTRIB")
      [ "$indirect" = indirect ] || edits+=("-require=$mod@$CONTRIB") ;;
    go.opentelemetry.io/collector*@* | github.com/open-telemetry/opentelemetry-collector-contrib/*@*)
      echo "set-release: go.mod has $mod $ver, off the Makefile's release ($FROM_CORE / $FROM_STABLE / contrib $FROM_CONTRIB)" >&2
      exit 1 ;;
  esac
done < <(awk '/^require \($/ { inblock = 1; next } inblock && /^\)$/ { inblock = 0; next }
  inblock { print $1, $2, (/\/\/ indirect/ ? "indirect" : "direct") }
  /^require [^(]/ { print $2, $3, (/\/\/ indirect/ ? "indirect" : "direct") }' go.mod)
if [ ${#edits[@]} -eq 0 ]; then
  echo "set-release: no collector module in go.mod" >&2
  exit 1
fi
echo "set-release: ${#edits[@]} collector modules in go.mod -> core $CORE / stable $STABLE / contrib $CONTRIB"
$GO mod edit "${edits[@]}"
$GO mod tidy

# A module that tidy left behind (or raised past the release) would build a mix.
off=$($GO list -m all | awk -v c="$CORE" -v s="$STABLE" -v x="$CONTRIB" '
  $1 ~ /^go\.opentelemetry\.io\/collector/ && $2 != c && $2 != s { print }
  $1 ~ /^github\.com\/open-telemetry\/opentelemetry-collector-contrib\// && $2 != x && $2 != c { print }')
if [ -n "$off" ]; then
  echo "set-release: collector modules off the new release after go mod tidy:" >&2
  echo "$off" >&2
  exit 1
fi
[ -n "$modules_only" ] && exit 0

# builder-config.yaml: each gomod line by its module, then the versions named in comments.
sed -i -E \
  -e "/gomod: go\.opentelemetry\.io\/collector/ s/ $FROM_CORE\$/ $CORE/" \
  -e "/gomod: go\.opentelemetry\.io\/collector/ s/ $FROM_STABLE\$/ $STABLE/" \
  -e "/gomod: github\.com\/open-telemetry\/opentelemetry-collector-contrib/ s/ $FROM_CONTRIB\$/ $CONTRIB/" \
  -e "/^ *#|description:/ { s/core $FROM_CORE/core $CORE/g; s/$FROM_STABLE/$STABLE/g; s/contrib $FROM_CONTRIB/contrib $CONTRIB/g; }" \
  builder-config.yaml
sed -i -E \
  -e "s/^COLLECTOR_CORE := .*/COLLECTOR_CORE := $CORE/" \
  -e "s/^COLLECTOR_STABLE := .*/COLLECTOR_STABLE := $STABLE/" \
  -e "s/^COLLECTOR_CONTRIB := .*/COLLECTOR_CONTRIB := $CONTRIB/" \
  Makefile
# mdatagen is a module of its own, and not every release of it is served; the code it
# generated at the old release is plain Go that make release-compat builds at the new one.
if ! (cd internal/tools && $GO get -tool "go.opentelemetry.io/collector/cmd/mdatagen@$CORE"); then
  echo "set-release: mdatagen $CORE is not to be had; internal/tools/go.mod keeps mdatagen $FROM_CORE" >&2
fi
if left=$(grep -n -E "$FROM_CORE|$FROM_STABLE|$FROM_CONTRIB" builder-config.yaml); then
  echo "set-release: builder-config.yaml still names the old release; see to these lines by hand:" >&2
  echo "$left" >&2
fi
echo "set-release: now run make generate, make collector and make test (docs/toolchain.md)"
