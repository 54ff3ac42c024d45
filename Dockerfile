# tollgate: two static binaries (the gateway and the mock provider) on a
# distroless, non-root runtime image. The gateway embeds its migrations,
# templates and static files, so the runtime image holds nothing else: no
# shell, no package manager, no compiler, no sources.
#
#   docker build -t tollgate .
#   docker run --rm -e DATABASE_URL=... -e REDIS_URL=... -p 8080:8080 tollgate
#   docker run --rm tollgate serve --check-config     # validate the environment

# ---- build ------------------------------------------------------------------
FROM golang:1.26-bookworm AS build
WORKDIR /src
# Dependencies first: this layer is reused until go.mod or go.sum change.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# CGO_ENABLED=0: a static binary that runs on an image without libc.
# -trimpath: no build-machine paths in the binary. -s -w: no symbol tables.
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/ ./cmd/tollgate ./cmd/mockprovider

# ---- runtime ----------------------------------------------------------------
# static-debian12: CA certificates, tzdata and /etc/passwd with a nonroot user
# (uid 65532), nothing more.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/tollgate /out/mockprovider /usr/local/bin/
USER nonroot:nonroot
# The public listener; fly.toml and docker-compose.yml set PORT=8080.
ENV PORT=8080
# The admin listener (/metrics, /readyz, /healthz, /debug/pprof/) on every
# interface of the container, for Fly's Prometheus or a Kubernetes probe. Never
# publish it to tenants: it has no authentication.
ENV ADMIN_ADDR=0.0.0.0:9090
EXPOSE 8080 9090
ENTRYPOINT ["/usr/local/bin/tollgate"]
CMD ["serve"]
