#!/usr/bin/env bash
# make release: record the release just made (this tree's stockd.Release,
# at HEAD) in release/previous, the release the next one runs beside and
# the upgrade cell upgrades from. Run it on the release's commit, with a
# clean tree; then open the next release (docs/versions.md, "Releasing").
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ -n $(git status --porcelain) ]]; then
	echo "release: the tree has uncommitted changes; a release is a commit" >&2
	exit 1
fi
release=$(sed -n 's/^[[:space:]]*Release = "\(.*\)"$/\1/p' internal/stockd/release.go)
if [[ -z $release ]]; then
	echo "release: no Release = \"…\" in internal/stockd/release.go" >&2
	exit 1
fi
commit=$(git rev-parse HEAD)
{
	sed -n '/^#/p' release/previous
	echo "$release $commit"
} >release/previous.tmp
mv release/previous.tmp release/previous
echo "release/previous: $release $commit"
echo "next: set Release (the next one) and RunsBeside = \"$release\" in internal/stockd/release.go,"
echo "open its CHANGELOG.md entry (\"Runs beside: $release and later.\"), and commit the three together."
