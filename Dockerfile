# One image for toolgate's processes: worker, starter (migrations, CLI) and the demo upstream.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -o /out/ ./worker ./starter ./cmd/upstream ./cmd/approvals ./cmd/idp ./cmd/mcp

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/ /usr/local/bin/
ENTRYPOINT ["/usr/local/bin/worker"]
