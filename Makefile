# The README's two commands are `make run` and `make test`; the rest serve them.
GO ?= go
export PATH := $(shell $(GO) env GOROOT)/bin:$(PATH)

.PHONY: help run test generate verify vet bench loadtest build

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

run: ## the newcomer's command: gateway + local team on local Postgres (mock upstream without provider keys)
	$(GO) run ./cmd/tollgate dev

build: ## build bin/tollgate and bin/mockprovider
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/ ./cmd/tollgate ./cmd/mockprovider

test: verify vet ## verify generated code, then go test -race -count=1 ./...
	$(GO) test -race -count=1 ./...

generate: ## regenerate sqlc (and templ) output
	$(GO) tool sqlc generate

verify: ## fail if generated code is stale or code is not gofmt-clean
	@$(GO) tool sqlc diff || { echo "generated sqlc code is stale: run make generate and commit"; exit 1; }
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }

vet: ## go vet
	$(GO) vet ./...

bench: ## Go benchmarks
	$(GO) test -run '^$$' -bench . -benchmem ./...
