# The README's two commands are `make run` and `make test`; the rest serve them.
GO ?= go
export PATH := $(shell $(GO) env GOROOT)/bin:$(PATH)

.PHONY: help run test generate verify vet bench loadtest loadtest-quick build screenshots

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

# Extra flags for `tollgate dev`, e.g. make run RUN_ARGS="--mock-addr 127.0.0.1:9998".
RUN_ARGS ?=

# Built, then exec'd rather than `go run`: go run exits 1 whenever it gets the
# SIGINT of a Ctrl-C, even after tollgate shut down cleanly and exited 0, and
# make then reports "Error 1". exec leaves tollgate as make's own child.
run: ## the newcomer's command: gateway + local team on local Postgres (mock upstream without provider keys)
	$(GO) build -o bin/tollgate ./cmd/tollgate && exec bin/tollgate dev $(RUN_ARGS)

build: ## build bin/tollgate and bin/mockprovider
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/ ./cmd/tollgate ./cmd/mockprovider

test: verify vet ## verify generated code, then go test -race -count=1 ./...
	$(GO) test -race -count=1 ./...
	@# Allocation counts mean nothing under -race (sync.Pool drops items at random): counted without it.
	$(GO) test -count=1 -run 'AllocsDoNotGrow' ./proxy/usage/ ./limiter/

screenshots: ## regenerate docs/dashboard.png and docs/member.png from the browser journey (needs chromium, Postgres, Redis)
	SCREENSHOT_DIR=docs $(GO) test -count=1 -run '^TestBrowserJourney$$' ./app/console/

generate: ## regenerate sqlc and templ output, and the admin API's document and generated client
	$(GO) tool sqlc generate
	$(GO) tool templ generate -path views
	$(GO) run ./app/api/apiclient/gendoc > app/api/apiclient/openapi.json
	$(GO) tool oapi-codegen -config app/api/apiclient/config.yaml app/api/apiclient/openapi.json

verify: ## fail if generated code is stale or code is not gofmt-clean
	@$(GO) tool sqlc diff || { echo "generated sqlc code is stale: run make generate and commit"; exit 1; }
	@# templ has no diff mode: generate from a copy of views/*.templ and compare.
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && cp views/*.templ "$$tmp" && \
	  $(GO) tool templ generate -path "$$tmp" >/dev/null 2>&1 && \
	  for f in "$$tmp"/*_templ.go views/*_templ.go; do \
	    cmp -s "$$tmp/$${f##*/}" "views/$${f##*/}" || { echo "generated templ code is stale ($${f##*/}): run make generate and commit"; exit 1; }; \
	  done
	@# The API client: the document as the server builds it, then oapi-codegen's client from it
	@# (into the copy of the config with its output moved: -o does not override a config's output).
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	  $(GO) run ./app/api/apiclient/gendoc > "$$tmp/openapi.json" && \
	  { cmp -s "$$tmp/openapi.json" app/api/apiclient/openapi.json || { echo "app/api/apiclient/openapi.json is stale: run make generate and commit"; exit 1; }; } && \
	  sed 's|^output:.*|output: '"$$tmp"'/client.gen.go|' app/api/apiclient/config.yaml > "$$tmp/config.yaml" && \
	  $(GO) tool oapi-codegen -config "$$tmp/config.yaml" app/api/apiclient/openapi.json && \
	  { cmp -s "$$tmp/client.gen.go" app/api/apiclient/client.gen.go || { echo "generated API client is stale: run make generate and commit"; exit 1; }; }
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }

vet: ## go vet
	$(GO) vet ./...

bench: ## Go benchmarks (admission cost vs a bare Redis PING, and the rest)
	$(GO) test -run '^$$' -bench . -benchmem ./...

loadtest: ## every load scenario on loopback (~10 min); tables printed, JSON under loadtest/results/
	$(GO) run ./loadtest

loadtest-quick: ## every load scenario with short durations, a smoke run (~3 min)
	$(GO) run ./loadtest -duration 5s -overhead-duration 3s -throughput-duration 2s -streams 50,300 -trials 10 -burst 3000 -fair-duration 10s -idle-duration 10s -profile=false
