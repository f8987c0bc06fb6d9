# mcp-chat-bridge: the bridge with every chat extra, Python 3.11 and Node 22 (for `npx` MCP servers).
#
#   docker build -t mcp-chat-bridge:0.1.0 .
#   docker run -v bridge-data:/data -v ./bridge.yaml:/config/bridge.yaml:ro -e SLACK_BOT_TOKEN=... mcp-chat-bridge:0.1.0
#
# Everything the bridge keeps (the SQLite store, the Matrix device and sync token, npm's cache) goes in /data, the one
# volume. It runs as an unprivileged user (uid 10001). The base images are arguments so that a mirror or a locally
# made base can stand in (tests/deploy/test_image.py builds it that way where no registry can be reached).
ARG PYTHON_IMAGE=python:3.11-slim-bookworm
ARG NODE_IMAGE=node:22-bookworm-slim

# Node and npm only: copied into the runtime image, so it carries one Node and no build tools.
# checkov:skip=CKV_DOCKER_7:the tags are in the ARGs above; checkov cannot read through an ARG
FROM ${NODE_IMAGE} AS node

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY bridge ./bridge
COPY adapters ./adapters
# A virtual environment is one directory to copy into the runtime stage, with nothing of the build left behind.
RUN python3 -m venv /opt/venv \
    && /opt/venv/bin/pip install ".[slack,matrix,llm,otel,postgres]" \
    && /opt/venv/bin/mcp-chat-bridge --version

FROM ${PYTHON_IMAGE}
COPY --from=node /usr/local/bin/node /usr/local/bin/node
COPY --from=node /usr/local/lib/node_modules/npm /usr/local/lib/node_modules/npm
COPY --from=build /opt/venv /opt/venv
RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \
    && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx \
    && useradd --system --uid 10001 --user-group --home-dir /data --shell /usr/sbin/nologin bridge \
    && mkdir -p /data /config \
    && chown bridge:bridge /data
ENV PATH=/opt/venv/bin:$PATH \
    HOME=/data \
    NPM_CONFIG_CACHE=/data/npm-cache \
    NPM_CONFIG_UPDATE_NOTIFIER=false \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
USER 10001:10001
WORKDIR /data
VOLUME ["/data"]
# The bridge's HTTP server (health, readiness, metrics, OAuth callbacks): `http: {listen: "0.0.0.0:8780"}` in the
# config. 3000 is Slack's HTTP mode (chat.slack.http.port), when used.
EXPOSE 8780
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python3", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:8780/healthz', timeout=4).status != 200)"]
ENTRYPOINT ["mcp-chat-bridge"]
CMD ["run", "-c", "/config/bridge.yaml"]
