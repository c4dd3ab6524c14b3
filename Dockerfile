# syntax=docker/dockerfile:1
# Tessera: build with the README's own commands (npm ci, npm run build), run the build as `npm run serve` does.

FROM node:20-bookworm-slim AS build
# isolated-vm (the Reactor sandbox) compiles a native addon on install.
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
ENV SCARF_ANALYTICS=false
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY migrations ./migrations
RUN npm run build \
 && chmod +x dist/src/cli/main.js \
 && npm prune --omit=dev --no-audit --no-fund

FROM node:20-bookworm-slim
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=3000 \
    SVC_DATA_DIR=/data
WORKDIR /app
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# `tessera` (the operator CLI) on the PATH; /data holds PGlite and generated secrets when no
# DATABASE_URL / SVC_MASTER_KEY is given.
RUN ln -s /app/dist/src/cli/main.js /usr/local/bin/tessera \
 && mkdir -p /data \
 && chown node:node /data
USER node
VOLUME ["/data"]
EXPOSE 3000
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 3000) + '/readyz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# The Reactor runtime child is forked with `node --no-node-snapshot` (isolated-vm needs it) by
# src/reactors/runtime/host/launch.ts; the API process itself does not load isolated-vm.
# --max-semi-space-size=64: see "Node flags" in the README (less garbage-collection work per request).
CMD ["node", "--max-semi-space-size=64", "--enable-source-maps", "dist/src/main.js"]
