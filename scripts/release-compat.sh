#!/usr/bin/env bash
# Builds and unit-tests our collector components at a newer collector release than the
# distribution's (docs/toolchain.md, "Our components at a newer release").
#
# The distribution stays pinned (go.mod, builder-config.yaml); this script copies the
# module into a temporary folder, moves the copy's go.mod to the newer release
# (scripts/set-release.sh --modules-only: go mod edit, then go mod tidy settles the OTel
# SDK, grpc, ...), then runs go vet and go test over the component packages. The work tree
# is never changed.
#
#   scripts/release-compat.sh                    # the Makefile's COMPAT_* release
#   COMPAT_CORE=v0.165.0 COMPAT_STABLE=v1.71.0 COMPAT_CONTRIB=v0.165.1 scripts/release-compat.sh
#   COMPAT_KEEP=1 ...                            # keep the copy and print its path
#   COMPAT_TEST_FLAGS='-race -count=1' ...       # go test flags (default: -count=1)
#
# Needs only the Go module proxy.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}

makevar() { sed -n "s/^$1 := //p" Makefile; }
CORE=${COMPAT_CORE:-$(makevar COMPAT_CORE)}
STABLE=${COMPAT_STABLE:-$(makevar COMPAT_STABLE)}
CONTRIB=${COMPAT_CONTRIB:-$(makevar COMPAT_CONTRIB)}
# The packages a user's ocb manifest can name; vet and test build what they import.
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

echo "== release-compat: core $CORE / stable $STABLE / contrib $CONTRIB"
scripts/set-release.sh --modules-only "$CORE" "$STABLE" "$CONTRIB"

echo "== release-compat: go vet + go test $TEST_FLAGS $PKGS"
# shellcheck disable=SC2086 # word splitting of the package and flag lists is wanted
$GO vet $PKGS
# shellcheck disable=SC2086
$GO test $TEST_FLAGS $PKGS
