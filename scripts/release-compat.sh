#!/usr/bin/env bash
# Builds and unit-tests our collector components against a newer collector release than
# the distribution's (docs/toolchain.md, "Our components at a newer release").
#
# The distribution stays pinned (go.mod, builder-config.yaml); this script copies the
# module into a temporary folder, moves every collector module in the copy's go.mod to the
# newer release with go mod edit, lets go mod tidy settle the rest (OTel SDK, grpc, ...),
# then runs go test over the component packages. The work tree is never changed.
#
#   scripts/release-compat.sh                    # the release below
#   COMPAT_CORE=v0.165.0 COMPAT_STABLE=v1.71.0 COMPAT_CONTRIB=v0.165.1 scripts/release-compat.sh
#   COMPAT_KEEP=1 ...                            # keep the copy and print its path
#   COMPAT_TEST_FLAGS='-race -count=1' ...       # go test flags (default: -count=1)
#
# Needs only the Go module proxy.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}

# From (the distribution's release, as in go.mod) and to.
FROM_CORE=v0.161.0
FROM_STABLE=v1.67.0
FROM_CONTRIB=v0.161.0
CORE=${COMPAT_CORE:-v0.165.0}
STABLE=${COMPAT_STABLE:-v1.71.0}
CONTRIB=${COMPAT_CONTRIB:-v0.165.1}
# The packages a user's ocb manifest can name, with everything they import from this module.
PKGS=${COMPAT_PKGS:-./connector/... ./exporter/... ./processor/... ./receiver/...}
TEST_FLAGS=${COMPAT_TEST_FLAGS:--count=1}

work=$(mktemp -d "${TMPDIR:-/tmp}/agentmeter-compat.XXXXXX")
if [ -n "${COMPAT_KEEP:-}" ]; then
  echo "release-compat: copy kept in $work"
else
  trap 'rm -rf "$work"' EXIT
fi

# Tracked and new (not ignored) files: what the next commit would hold.
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
  [ -e "$f" ] && printf '%s\0' "$f"
done | tar --null -T - -cf - | tar -xf - -C "$work"
cd "$work"

# Every core module in go.mod moves, and contrib's direct ones; go mod tidy then takes each
# indirect contrib module to what the new releases require (some, e.g. pkg/pdatautil, are
# not served at the new release and are not needed there).
edits=()
while read -r mod ver indirect; do
  case "$mod@$ver" in
    go.opentelemetry.io/collector*@"$FROM_CORE") edits+=("-require=$mod@$CORE") ;;
    go.opentelemetry.io/collector*@"$FROM_STABLE") edits+=("-require=$mod@$STABLE") ;;
    github.com/open-telemetry/opentelemetry-collector-contrib/*@"$FROM_CONTRIB")
      [ "$indirect" = indirect ] || edits+=("-require=$mod@$CONTRIB") ;;
    go.opentelemetry.io/collector*@* | github.com/open-telemetry/opentelemetry-collector-contrib/*@*)
      echo "release-compat: $mod $ver is off the release in go.mod ($FROM_CORE / $FROM_STABLE); fix go.mod first" >&2
      exit 1 ;;
  esac
done < <(awk '/^require \($/ { inblock = 1; next } inblock && /^\)$/ { inblock = 0; next }
  inblock { print $1, $2, (/\/\/ indirect/ ? "indirect" : "direct") }
  /^require [^(]/ { print $2, $3, (/\/\/ indirect/ ? "indirect" : "direct") }' go.mod)
if [ ${#edits[@]} -eq 0 ]; then
  echo "release-compat: no collector module found in go.mod" >&2
  exit 1
fi
$GO mod edit "${edits[@]}"
echo "== release-compat: ${#edits[@]} collector modules -> core $CORE / stable $STABLE / contrib $CONTRIB"
$GO mod tidy

# The copy must really be at the new release: a module that tidy left behind (or raised
# past it) means the check would test the wrong thing.
off=$($GO list -m all | awk -v c="$CORE" -v s="$STABLE" -v x="$CONTRIB" '
  $1 ~ /^go\.opentelemetry\.io\/collector/ && $2 != c && $2 != s { print }
  $1 ~ /^github\.com\/open-telemetry\/opentelemetry-collector-contrib\// && $2 != x && $2 != c { print }')
if [ -n "$off" ]; then
  echo "release-compat: collector modules off the target release after tidy:" >&2
  echo "$off" >&2
  exit 1
fi

echo "== release-compat: go vet + go test $TEST_FLAGS $PKGS"
# shellcheck disable=SC2086 # word splitting of the package and flag lists is wanted
$GO vet $PKGS
# shellcheck disable=SC2086
$GO test $TEST_FLAGS $PKGS
