# syntax=docker/dockerfile:1
# The Perdix agent image: `perdix run --config /etc/perdix/perdix.yaml` as uid 10001, on a read-only root
# filesystem with only /tmp writable. It holds what `perdix run` imports and nothing else (no lab, no Spark).
#
# The build context is a wheelhouse, not the source tree: scripts/build-image.sh (`make image`) fills
# .tools/wheelhouse with deps/ (the wheels of `pip install perdix`, no extras, at the versions of
# constraints.txt, and the files requirements.txt and constraints.txt) and perdix/ (the wheel of this
# checkout), then builds with no network: pip installs with --no-index from the wheelhouse only.
# By hand, after the script has filled the wheelhouse:
#   docker build -f Dockerfile --build-arg BASE_IMAGE=python:3.11-slim-bookworm -t perdix:0.1.0 .tools/wheelhouse
#
# BASE_IMAGE is any image with CPython 3.11 as python3 and a POSIX shell: the official slim Python image by
# default; `make image` uses a Debian bookworm base it builds with debootstrap (python3 is 3.11 there).
ARG BASE_IMAGE=python:3.11-slim-bookworm

# The dependencies, in a stage of their own: rebuilt only when the wheelhouse's dependencies change.
# `venv --without-pip` needs no ensurepip (Debian's python3 ships it separately); pip comes from its wheel.
# The libraries' own test suites are removed: the daemon never imports them, and they are a tenth of the image.
# Perdix itself goes to /opt/perdix-app (a .pth file puts it on the virtualenv's path), so that a new Perdix
# is a small layer over an unchanged one.
FROM ${BASE_IMAGE} AS deps
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
COPY deps /wheelhouse/deps
RUN python3 -m venv --without-pip /opt/perdix \
    && /opt/perdix/bin/python "$(ls /wheelhouse/deps/pip-*.whl)/pip" install --quiet --no-index --no-compile \
       --find-links /wheelhouse/deps pip \
    && /opt/perdix/bin/pip install --quiet --no-index --no-compile --find-links /wheelhouse/deps \
       -c /wheelhouse/deps/constraints.txt -r /wheelhouse/deps/requirements.txt \
    && find /opt/perdix/lib/python3*/site-packages -mindepth 2 -type d -name tests -prune -exec rm -rf {} + \
    && echo /opt/perdix-app > "$(/opt/perdix/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/perdix-app.pth"

# Bytecode only for what the daemon imports, compiled by importing it once into one tree (PYTHONPYCACHEPREFIX):
# the read-only root filesystem keeps Python from writing it at run time (a start compiles for 8 s more
# without it), and compiling every installed module would add a third to the image.
FROM deps AS build
ENV PYTHONDONTWRITEBYTECODE= \
    PYTHONPYCACHEPREFIX=/opt/perdix-pycache
COPY perdix /wheelhouse/perdix
RUN PYTHONDONTWRITEBYTECODE=1 /opt/perdix/bin/pip install --quiet --no-index --no-deps --no-compile --target /opt/perdix-app \
       /wheelhouse/perdix/perdix-*.whl \
    && PYTHONDONTWRITEBYTECODE=1 /opt/perdix/bin/pip check \
    && /opt/perdix/bin/python -c "import importlib, pkgutil, agent, cli, cli.daemon; \
[importlib.import_module(m.name) for m in pkgutil.walk_packages(agent.__path__, 'agent.')]; \
import pmdarima, statsforecast.models, sklearn.ensemble, sklearn.gaussian_process" \
    && /opt/perdix-app/bin/perdix version

FROM ${BASE_IMAGE} AS runtime
# A fixed numeric uid/gid: the Helm chart sets runAsUser 10001 and runAsNonRoot, which needs a number.
RUN groupadd --system --gid 10001 perdix \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin perdix
COPY --from=deps /opt/perdix /opt/perdix
# The chart mounts the root filesystem read-only with an emptyDir on /tmp: nothing else is written.
ENV PATH=/opt/perdix-app/bin:/opt/perdix/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONPYCACHEPREFIX=/opt/perdix-pycache \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    OPENBLAS_NUM_THREADS=1 \
    OMP_NUM_THREADS=1
USER 10001:10001
WORKDIR /tmp
EXPOSE 9249
ENTRYPOINT ["perdix"]
CMD ["run", "--config", "/etc/perdix/perdix.yaml"]
# What changes with every build comes last, so that everything above is reused.
COPY --from=build /opt/perdix-app /opt/perdix-app
COPY --from=build /opt/perdix-pycache /opt/perdix-pycache
ARG PERDIX_VERSION=0.1.0
ARG PERDIX_REVISION=unknown
LABEL org.opencontainers.image.title="perdix" \
      org.opencontainers.image.description="Runtime autoscaler for Apache Flink jobs" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${PERDIX_VERSION}" \
      org.opencontainers.image.revision="${PERDIX_REVISION}"
