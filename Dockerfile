# syntax=docker/dockerfile:1
# The Perdix agent image: `perdix run --config /etc/perdix/perdix.yaml` as a non-root user.
# Stage 1 installs Perdix and its dependencies into a virtualenv; stage 2 copies only that virtualenv
# onto a clean slim Python, so no build tools, caches or sources end up in the runtime image.
ARG PYTHON_VERSION=3.11

FROM python:${PYTHON_VERSION}-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/perdix
WORKDIR /src
# Metadata first: the dependency layer is rebuilt only when pyproject.toml changes.
COPY pyproject.toml README.md ./
RUN mkdir agent cli lab models planner spark simulator \
    && /opt/perdix/bin/pip install --upgrade pip setuptools wheel \
    && /opt/perdix/bin/pip install . \
    && /opt/perdix/bin/pip uninstall --yes perdix
COPY agent ./agent
COPY cli ./cli
COPY lab ./lab
COPY models ./models
COPY planner ./planner
COPY spark ./spark
COPY simulator ./simulator
RUN /opt/perdix/bin/pip install --no-deps . \
    && /opt/perdix/bin/perdix --help >/dev/null

FROM python:${PYTHON_VERSION}-slim-bookworm AS runtime
LABEL org.opencontainers.image.title="perdix" \
      org.opencontainers.image.description="Runtime autoscaler for Apache Flink jobs" \
      org.opencontainers.image.licenses="Apache-2.0"
# A fixed numeric uid/gid: the Helm chart sets runAsUser 10001 and runAsNonRoot, which needs a number.
RUN groupadd --system --gid 10001 perdix \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin perdix
COPY --from=build /opt/perdix /opt/perdix
# The chart mounts the root filesystem read-only with an emptyDir on /tmp: nothing else is written.
ENV PATH=/opt/perdix/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    MPLCONFIGDIR=/tmp/matplotlib
USER 10001:10001
WORKDIR /tmp
EXPOSE 9249
ENTRYPOINT ["perdix"]
CMD ["run", "--config", "/etc/perdix/perdix.yaml"]
