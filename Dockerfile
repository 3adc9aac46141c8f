# seckill: stockd (the service), seckill (the load-and-verify tool) and a tiny
# shell-less health probe, built from source and run as non-root on a minimal
# static base. Both base images are build arguments so a machine without a
# registry can point them at local images (see docs/compose.md).
ARG GO_IMAGE=golang:1.26-bookworm
ARG RUNTIME_IMAGE=gcr.io/distroless/static-debian12:nonroot

FROM ${GO_IMAGE} AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-trimpath
ARG GOPROXY
# GO_TAGS=lab adds the lab's backends and failpoints (docker-compose.yml
# builds that, the lab cluster); the default is the product, without them.
ARG GO_TAGS=
# Dependencies first: this layer survives source edits.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN mkdir -p /out \
 && go build -tags "${GO_TAGS}" -ldflags="-s -w" -o /out/stockd ./cmd/stockd \
 && go build -ldflags="-s -w" -o /out/seckill ./cmd/seckill \
 && go build -ldflags="-s -w" -o /out/healthcheck ./docker/healthcheck

FROM ${RUNTIME_IMAGE}
COPY --from=build /out/stockd /out/seckill /out/healthcheck /
USER 65532:65532
EXPOSE 8080
ENV STOCKD_HTTP_ADDR=:8080
HEALTHCHECK --interval=2s --timeout=3s --start-period=10s --retries=15 \
  CMD ["/healthcheck", "http://127.0.0.1:8080/readyz"]
ENTRYPOINT ["/stockd"]
