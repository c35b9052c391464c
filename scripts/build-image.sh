#!/usr/bin/env bash
# `make image`: the Perdix agent image (Dockerfile), built with no network inside the build.
#
# 1. The base image. PERDIX_BASE_IMAGE if set (e.g. python:3.11-slim-bookworm where a registry is
#    reachable); otherwise a Debian bookworm root made with `debootstrap --variant=minbase` from the
#    machine's Debian mirror with python3 (3.11) added, imported as localhost/perdix-base:bookworm-python3.
#    Its tarball is kept under .tools/images/, so it is built once per machine.
# 2. The wheelhouse, .tools/wheelhouse: deps/ holds the wheels of the base install (`pip install perdix`,
#    no extras) at the versions of constraints.txt, downloaded once; perdix/ the wheel of this checkout,
#    with the version and git revision it is built from in cli/build_info.json (`perdix version`).
# 3. `podman build` (PERDIX_BUILDER=buildah or docker also work) with the wheelhouse as the context and
#    --network none: pip inside installs from the wheelhouse only.
#
# Progress goes to stderr; the last line on stdout is the image's name (perdix:VERSION). A second run
# reuses the base, the wheels and the dependency layer and rebuilds the perdix layer only.
# podman and buildah read scripts/containers.conf (CONTAINERS_CONF): the runc runtime and ulimits a
# container host without full cgroup v2 allows. Needs root (debootstrap, rootful podman) or sudo.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export CONTAINERS_CONF=${CONTAINERS_CONF:-$ROOT/scripts/containers.conf}
TOOLS=$ROOT/.tools
WHEELS=$TOOLS/wheelhouse
BASE_NAME=localhost/perdix-base:bookworm-python3
BASE_TAR=$TOOLS/images/debian-bookworm-python3.tar
PACKAGES=(agent cli lab models planner spark simulator)
started=$(date +%s)

step() { printf 'image: %s (%ss)\n' "$*" "$(( $(date +%s) - started ))" >&2; }
die() { printf 'scripts/build-image.sh: %s\n' "$*" >&2; exit 2; }

SUDO=""
if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || die "needs root or sudo (debootstrap and rootful podman)"
    SUDO=sudo
fi

# ---------------------------------------------------------------- the tools
builder=${PERDIX_BUILDER:-}
if [ -z "$builder" ]; then
    for candidate in podman buildah docker; do
        if command -v "$candidate" >/dev/null; then builder=$candidate; break; fi
    done
fi
[ -n "$builder" ] && command -v "$builder" >/dev/null \
    || die "no podman, buildah or docker${builder:+ ($builder not found)}: run make system-deps (scripts/install-system-deps.sh)"
# Images are imported and inspected with podman beside buildah (they share the storage), else with the builder.
images=$builder
[ "$builder" = buildah ] && images=podman
command -v "$images" >/dev/null || die "$images not found: run make system-deps (scripts/install-system-deps.sh)"

python=${PYTHON:-}
if [ -z "$python" ]; then
    if [ -x .venv/bin/python ]; then python=.venv/bin/python; else python=python3; fi
fi
"$python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null \
    || die "$python is not CPython 3.11: the wheels must match the image's python3 (set PYTHON=...)"

version=$("$python" -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')
# PERDIX_SOURCE=HEAD builds Perdix from the last commit (a release); by default from the working tree.
source=${PERDIX_SOURCE:-tree}
revision=unknown
if git rev-parse --git-dir >/dev/null 2>&1; then
    revision=$(git rev-parse --short=12 HEAD)
    # Sources that differ from the commit (changed or new files of the packages) make it a dirty build.
    if [ "$source" != HEAD ] && { ! git diff --quiet HEAD -- "${PACKAGES[@]}" pyproject.toml \
        || [ -n "$(git ls-files --others --exclude-standard -- "${PACKAGES[@]}")" ]; }; then
        revision=$revision-dirty
    fi
elif [ "$source" = HEAD ]; then
    die "PERDIX_SOURCE=HEAD needs a git checkout"
fi
image=${PERDIX_IMAGE:-perdix:$version}

image_exists() { $SUDO "$images" image inspect "$1" >/dev/null 2>&1; }

# One build at a time per checkout: two would share the base tarball and the wheelhouse.
mkdir -p "$TOOLS"
exec 9>"$TOOLS/build-image.lock"
if ! flock -n 9; then
    step "waiting for another image build of this checkout"
    flock 9
fi

# ---------------------------------------------------------------- 1. the base image
debian_mirror() {
    # deb822 (.sources: a stanza whose Suites has bookworm) first, then one-line .list entries; else Debian's CDN.
    local found
    found=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk 'BEGIN { RS = "" }
        /(^|\n)Suites:[^\n]*[ \t]bookworm([ \t]|\n|$)/ && match($0, /(^|\n)URIs:[ \t]*[^ \t\n]+/) {
            uri = substr($0, RSTART, RLENGTH); sub(/^\n?URIs:[ \t]*/, "", uri); print uri; exit }')
    if [ -z "$found" ]; then
        found=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
            | awk '$1 == "deb" { sub(/\[[^]]*\] */, ""); if ($3 == "bookworm") { print $2; exit } }')
    fi
    echo "${found:-http://deb.debian.org/debian}"
}

build_base_tarball() {
    command -v debootstrap >/dev/null || die "debootstrap not found: run make system-deps (scripts/install-system-deps.sh)"
    local mirror rootfs log
    mirror=${PERDIX_DEBIAN_MIRROR:-$(debian_mirror)}
    mkdir -p "$TOOLS/images"
    rootfs=$(mktemp -d "$TOOLS/images/rootfs.XXXXXX")
    log=$TOOLS/images/debootstrap.log
    step "base: debootstrap --variant=minbase bookworm + python3 from $mirror (once; log: $log)"
    # debootstrap's milestones as progress; the whole log is kept for a failure.
    $SUDO debootstrap --variant=minbase --include=python3,ca-certificates bookworm "$rootfs" "$mirror" 2>&1 \
        | tee "$log" | { grep --line-buffered -E \
            '^I: (Retrieving Packages|Installing core|Unpacking the base|Configuring the base|Base system)' \
            | sed -u 's/^I: /image: base: /' >&2 || true; }
    if ! grep -q '^I: Base system installed successfully' "$log"; then
        $SUDO rm -rf "$rootfs"
        die "debootstrap failed (last lines of $log): $(tail -n 3 "$log" | tr '\n' ' ')"
    fi
    # What a container never reads: package lists and caches, documentation, manuals, translations.
    $SUDO rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/* "$rootfs"/var/cache/debconf/*-old \
        "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/usr/share/locale/* \
        "$rootfs"/var/log/*.log "$rootfs"/var/log/apt/* "$rootfs"/tmp/*
    $SUDO tar --numeric-owner -C "$rootfs" -cf "$BASE_TAR.partial" .
    mv "$BASE_TAR.partial" "$BASE_TAR"
    $SUDO rm -rf "$rootfs"
}

if [ -n "${PERDIX_BASE_IMAGE:-}" ]; then
    base=$PERDIX_BASE_IMAGE
    step "base: $base"
else
    base=$BASE_NAME
    if image_exists "$base"; then
        step "base: $base (present)"
    else
        [ -s "$BASE_TAR" ] || build_base_tarball
        step "base: importing $BASE_TAR as $base"
        $SUDO "$images" import --change 'CMD ["/bin/bash"]' "$BASE_TAR" "$base" >/dev/null
    fi
fi

# ---------------------------------------------------------------- 2. the wheelhouse
mkdir -p "$WHEELS/deps" "$WHEELS/perdix"
cp constraints.txt "$WHEELS/deps/constraints.txt"
"$python" -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))' \
    > "$WHEELS/deps/requirements.txt"
pip_version=$("$python" -m pip --version | awk '{print $2}')
step "wheelhouse: the base install's wheels at constraints.txt's versions, and pip $pip_version"
# Offline from the wheelhouse when it already holds every wheel; from the index otherwise.
fetch() {
    # (a machine's pip.conf may name find-links directories that do not exist: pip's warnings about them go)
    "$python" -m pip wheel --quiet --disable-pip-version-check --wheel-dir "$WHEELS/deps" "$@" 2>&1 \
        | { grep -v "^WARNING: Location '.*' is ignored" >&2 || true; }
    return "${PIPESTATUS[0]}"
}
wanted=(-c "$WHEELS/deps/constraints.txt" -r "$WHEELS/deps/requirements.txt" "pip==$pip_version")
if ! fetch --no-index --find-links "$WHEELS/deps" "${wanted[@]}" 2>/dev/null; then
    step "wheelhouse: downloading the missing wheels"
    fetch --find-links "$WHEELS/deps" "${wanted[@]}" || die "pip wheel failed (see above)"
fi

step "wheelhouse: the perdix $version wheel of this checkout (revision $revision)"
source_copy=$(mktemp -d "$TOOLS/perdix-source.XXXXXX")
trap 'rm -rf "$source_copy"' EXIT
if [ "$source" = HEAD ]; then
    git archive HEAD pyproject.toml README.md LICENSE "${PACKAGES[@]}" | tar -C "$source_copy" -xf -
else
    tar --exclude=__pycache__ -cf - pyproject.toml README.md LICENSE "${PACKAGES[@]}" | tar -C "$source_copy" -xf -
fi
printf '{"version": "%s", "revision": "%s"}\n' "$version" "$revision" > "$source_copy/cli/build_info.json"
rm -f "$WHEELS"/perdix/*.whl
# A fixed timestamp in the wheel's zip: the same sources give the same wheel, and the build reuses its layers.
SOURCE_DATE_EPOCH=$(git log -1 --format=%ct 2>/dev/null || echo 315532800) \
"$python" -m pip wheel --quiet --disable-pip-version-check --no-deps --wheel-dir "$WHEELS/perdix" "$source_copy" \
    || die "building the perdix wheel failed (see above)"

# ---------------------------------------------------------------- 3. the image
step "build: $image from $base with $builder (no network inside)"
build=(build)
[ "$builder" = buildah ] && build=(bud --layers)
if ! $SUDO "$builder" "${build[@]}" --network none -f "$ROOT/Dockerfile" \
    --build-arg "BASE_IMAGE=$base" --build-arg "PERDIX_VERSION=$version" --build-arg "PERDIX_REVISION=$revision" \
    -t "$image" "$WHEELS" 2>&1 | sed -u 's/^/image: build: /' >&2; then
    die "$builder build failed (see above)"
fi

size=$($SUDO "$images" image inspect --format '{{.Size}}' "$image")
step "built $image: $(( size / 1000000 )) MB uncompressed, revision $revision"
echo "$image"
