# One image with the four etcdfed binaries:
#   /usr/local/bin/hub      the hub controller (config/hub)
#   /usr/local/bin/spoke    the member-cluster agent (config/spoke)
#   /usr/local/bin/etcdfed  the CLI
#   /usr/local/bin/etcdfed-init  the init containers of member pods
#                           (wait-dns, prepare-data; the spoke's
#                           --helper-image), found on PATH.
# There is no ENTRYPOINT: the manifests give the command.
#
#   docker build -t etcdfed:dev .
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) -t etcdfed:dev .
#
# Needs BuildKit (the default builder of Docker 23 and later) for the cache
# mounts and the cross-compiling build stage.

ARG GO_IMAGE=golang:1.26

FROM --platform=$BUILDPLATFORM ${GO_IMAGE} AS build
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=dev
# Static binaries for a distroless/static base. go.mod names the exact Go
# release; an older golang:1.26 image fetches it from the module proxy.
ENV CGO_ENABLED=0 GOTOOLCHAIN=auto
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath \
      -ldflags "-s -w -X github.com/etcdfed/etcdfed/internal/version.Version=${VERSION}" \
      -o /out/ ./cmd/hub ./cmd/spoke ./cmd/etcdfed ./cmd/etcdfed-init

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/hub /out/spoke /out/etcdfed /out/etcdfed-init /usr/local/bin/
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
USER 65532:65532
