# seckill: `make demo` and `make test` are the two commands.
#   make deps          install redis-server, etcd, ZooKeeper, nginx, gcc (only what is missing)
#   make build         bin/stockd (product), bin/stockd-lab, bin/seckill
#   make demo          start a local cluster and compare every lock backend
#   make test          vet, gofmt check, and every test with -race against real servers
#   make test-stress   make test STRESS_RUNS times (3) while stress-ng loads the machine
#   make compose-test  the docker-compose cluster end to end
#   make docs          regenerate configs/stockd.yaml and docs/config.md's table from Config
#   make release       record HEAD as the release the next one runs beside (release/previous)
#   make bench         backends vs peer libraries vs ceilings, combining and segments end to end;
#                      writes docs/benchmarks.md, docs/bench.svg and docs/bench-segments.svg
#                      (BENCH_FLAGS='--e2e-rows backends,scaling,ledger' adds the order ledger's
#                      cost, ~4.5 min more; `seckill bench --help` for the rest)

GO ?= go
# Debian puts nginx in /usr/sbin, which an ordinary user's PATH lacks.
export PATH := $(PATH):/usr/local/go/bin:/usr/sbin
DEMO_FLAGS ?=
TEST_FLAGS ?=
BENCH_FLAGS ?=
# make soak: per backend, a fault every 30s under steady load (not part of make test).
SOAK_DURATION ?= 10m
SOAK_BACKENDS ?= redis,redisson,etcd,zookeeper,mysql
SOAK_FLAGS ?=

.PHONY: deps build demo test test-stress vet fmt-check compose-test lab-full bench soak clean docs release

deps:
	scripts/install-deps.sh

# The configuration's references are generated from stockd's Config, and
# the sale's run scripts (internal/stock/redisstore/lua/run) from their
# parts; a test fails when a committed copy differs.
docs:
	UPDATE_DOCS=1 $(GO) test -count=1 -run TestConfigReferencesAreGenerated ./internal/stockd
	UPDATE_DOCS=1 $(GO) test -count=1 -run TestRunScriptsAreTheirParts ./internal/stock/redisstore

# bin/stockd is the product; bin/stockd-lab has the lab's backends and
# failpoints too (-tags lab), and is what the demo and the lab run.
build:
	$(GO) build -o bin/stockd ./cmd/stockd
	$(GO) build -tags lab -o bin/stockd-lab ./cmd/stockd
	$(GO) build -o bin/seckill ./cmd/seckill

demo: deps build
	bin/seckill demo --stockd bin/stockd-lab $(DEMO_FLAGS)

# Both builds: the product's files and the lab's (-tags lab).
vet:
	$(GO) vet ./...
	$(GO) vet -tags lab ./...

fmt-check:
	@out="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || echo .))"; \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

# deploy/k8s is a module of its own: the Kubernetes dependencies stay out of seckill's.
# -p: packages tested at once; -parallel: parallel tests at once, which is
# also how many fault clusters the matrix runs on (e2e/faults_test.go). The
# suite mostly waits (leases expiring, links cut, servers starting): at go's
# defaults (one per core) the two cores sat two-thirds idle.
TEST_P ?= 4
TEST_PARALLEL ?= 3

test: deps vet fmt-check
	$(GO) test -race -count=1 -timeout 30m -p $(TEST_P) -parallel $(TEST_PARALLEL) -tags lab $(TEST_FLAGS) ./...
	cd deploy/k8s && $(GO) vet ./... && $(GO) test -count=1 ./...

# The whole fault matrix: the default cells and those by name (lab.byName),
# which CI leaves out to stay in its budget; ~6 minutes on 2 cores.
lab-full: deps
	SECKILL_LAB_FULL=1 $(GO) test -race -count=1 -timeout 60m -parallel $(TEST_PARALLEL) -tags lab -run TestFaultMatrix -v ./e2e/matrix

# The release just made, for the next to run beside and the upgrade cell
# to upgrade from (docs/versions.md, "Releasing").
release:
	scripts/release.sh

# The suite on a busy machine: STRESS_RUNS (3), STRESS_CMD ('make test'),
# STRESS_ARGS ('--cpu 2 --io 1'); see scripts/test-stress.sh.
test-stress:
	scripts/test-stress.sh

compose-test:
	@if [ -x scripts/compose-test.sh ]; then scripts/compose-test.sh; \
	else echo "compose-test: scripts/compose-test.sh not written yet"; exit 1; fi

bench: deps
	$(GO) run ./cmd/seckill bench $(BENCH_FLAGS)

soak: deps
	$(GO) run ./cmd/seckill soak --duration $(SOAK_DURATION) --backends $(SOAK_BACKENDS) $(SOAK_FLAGS)

clean:
	rm -rf bin
