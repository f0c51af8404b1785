# The two commands: `make bench` (the quick suite on this machine, then the HTML report) and `make test`.
# Both install what they need first (Debian packages and the pinned Python packages).
PY      := .venv/bin/python
MOSBENCH := .venv/bin/mosbench
QUICK_TESTS := getppid1 page_fault1 mmap1 open1 context_switch1 dup1
QUICK   := $(addprefix micro/,$(QUICK_TESTS))
# libscale's counter (4.3) and lock, and the talk's tree and ranges: 40 of its 100 points at 1..2 cores
# (`make bench-libscale` races every structure: 4.4-4.6's per-core tables and false sharing, samerange).
QUICK_SCALE := $(addprefix scale/,counter lock tree ranges)

.PHONY: bench test test-manycore check-manycore manycore-kit bisect-demo ab-rt deps native lint bench-overhead bench-libscale bench-commute bench-syscalls bench-profile bench-harness-scale bench-history bench-serve bench-trials-auto clean
deps:
	bash scripts/install-deps

native: deps
	$(MAKE) -C native -j$$(nproc)

# The quick suite: six kernel paths (dup1 profiled: perf's samples, its kernel lock contention and the
# verdict that threads sharing one descriptor table contend on its lock), four libscale structures,
# the Metis inverted index, pedsort over the Linux tree's arch/ (the whole tree is psearchy's
# default), the kernel's security/keys/ built by gmake, memcached both ways, Apache with a connection
# per request, Exim both ways and PostgreSQL's read-only test with both caches, 1..max cores, two
# trials each, 1 s windows after 0.4 s of warm-up: 180 trials on 2 CPUs (fxmark's DWOM on tmpfs and
# ext4 among them), under 9 minutes from a fresh clone with the Debian packages present (9:15 with 1.5 s
# windows, 8:59 and 9:05 with 1.2 s, 7:18 with 1 s), the first time a little more while PostgreSQL's table is loaded and
# the Linux tree unpacked;
# the point count grows with the machine's series.
# Two commutativity situations (two opens in one process, which POSIX's lowest-descriptor rule makes not
# commute; mmap and munmap of disjoint ranges, which commute) stand for `make bench-commute`'s 67.
# Exim is not installed where another mail server is (scripts/install-deps says so): the suite goes on without it.
# Asked when the recipe runs, not when make reads this file: `deps` may have just installed it.
bench: native
	$(MOSBENCH) run $(QUICK) $(QUICK_SCALE) commute/open-open/diffname-threads commute/mmap-munmap/disjoint-ranges metis/invindex psearchy gmake memcached apache/close \
		apache/files $$(test -x /usr/sbin/exim4 && echo exim) postgres/read-only fxmark/DWOM --variant fxmark.tmpfs,fxmark.ext4 \
		-p psearchy.subdir=arch -p gmake.targets=security/keys/ -p apache.dirs=1 -p apache.qos_step_s=0.3 \
		--profile micro/dup1 \
		--cores 1..max --trials 2 --warmup 0.4 --duration 1 --label quick
	$(MOSBENCH) report latest -o report/report.html

# Sampling cost against getppid at max cores, with and without the harness's per-second work.
bench-overhead: native
	$(PY) benchmarks/harness_overhead.py

# PostgreSQL with and without its system calls counted (perf on the syscall tracepoints), side by side.
bench-syscalls: native
	$(PY) benchmarks/syscall_count_overhead.py

# What --profile costs: the same points with and without it, interleaved rounds, the median ratio.
bench-profile: native
	$(PY) benchmarks/profile_overhead.py

# libscale's stock and scalable forms side by side: per-core throughput at max cores over 1 core.
bench-libscale: native
	$(PY) benchmarks/libscale_ratios.py

# The scalable commutativity rule on this kernel: every situation of COMMUTER's 18 calls, each call alone on
# one core, then the two side by side on two (about 8 minutes on 2 CPUs; add --profile commute for what grew,
# at twice the time); the report's matrix (docs/WORKLOADS.md, commute).
bench-commute: native
	$(MOSBENCH) run commute --cores 1,2 --trials 2 --warmup 0.3 --duration 0.7 --label commute
	$(MOSBENCH) report latest -o report/commute.html

# --trials auto against a fixed --trials 5 on the quick suite's micro tests: trials, wall time, and whether
# both make the same decision of each curve (about 12 minutes on 2 CPUs).
bench-trials-auto: native
	$(PY) benchmarks/trials_auto.py

# The harness's own cost as runs grow: show, report and compare over 500..5,000 stored points of a 256-CPU
# machine (20% profiled), with peak memory and how each grows (about 10 minutes; SIZES=500,5000 ROUNDS=1 is quicker).
bench-harness-scale: native
	$(PY) benchmarks/harness_scale.py

bench-history: deps
	$(PY) benchmarks/history_scale.py

# `mosbench serve` over a lab of 20 machines × 500 runs × 200 points (built once, kept in ~/.cache/mosbench) against
# a one-run store: each page's warm time and ratio, the cold server, the first request after a new run, peak memory
# (SERVE_BENCH="--postgres" adds PostgreSQL; "--machines 4 --runs 100" is quicker).
bench-serve: deps
	$(PY) benchmarks/serve_scale.py $(SERVE_BENCH)

lint: deps
	.venv/bin/ruff check mosbench tests benchmarks

# The sanitizer builds side by side (-j), then the native components' tests side by side (each one's
# output kept together), then pytest with its 15 slowest tests; each phase's time on its own line, so a
# CI log says where its time went.
test: native lint
	@scripts/phase "native test builds" $(MAKE) -C native -j$$(nproc) test-bins
	@scripts/phase "native tests" $(MAKE) -C native -j$$(nproc) --output-sync=target test
	@scripts/phase pytest $(PY) -m pytest -q --durations=15

# The many-core check (docs/MANYCORE.md): what a lent machine of 8 or more CPUs can tell in 7 minutes, as one
# archive and a one-page summary under results/manycore. WIS= a directory of built will-it-scale programs.
check-manycore: native
	$(PY) scripts/check_manycore.py --out results/manycore $(if $(WIS),--wis $(WIS))

# What such a machine lacks (SQLAlchemy's wheels for its Python, liburcu, libdb, the native programs), for
# scripts/check_manycore.py --kit manycore-kit on it.
manycore-kit: native
	bash scripts/make-manycore-kit

# The many-core guest (docs/MANYCORE.md): 64 vCPUs, 4 sockets, 4 NUMA nodes under QEMU. Every workload at
# every core count, both isolations and placements, on a cgroup v2 kernel line; the CI suite on a v1 line.
# Long under emulation (hours on 2 CPUs); `make test` runs the CI suite on both, where a guest can boot.
test-manycore: native
	bash scripts/install-manycore
	$(MOSBENCH) vm --suite full --cgroup 2
	$(MOSBENCH) vm --suite ci --cgroup 1
	$(MOSBENCH) report latest -o report/manycore.html

# Kernels side by side (docs/KERNELS.md), each booted in a guest: Debian's generic kernel against its
# PREEMPT_RT build, unpacked from its package (nothing is installed), on the micro tests whose locks differ.
ab-rt: native
	bash scripts/ab-rt

# A bisection end to end: a git history of Debian's linux-source-6.1 with one commit that slows getppid(2)
# (scripts/make-bisect-demo-tree), bisected on micro/getppid1. The first build is a whole kernel (about
# 17 min on 2 CPUs); the tree and the builds are kept for the next time.
DEMO_TREE ?= $(HOME)/.cache/mosbench/bisect-demo-tree
bisect-demo: native
	test -d $(DEMO_TREE) || bash scripts/make-bisect-demo-tree $(DEMO_TREE)
	$(MOSBENCH) bisect --tree $(DEMO_TREE) --good demo-good --bad demo-bad \
		micro/getppid1 --variant procs --cores 2 --trials 2 --warmup 0.3 --duration 1 --interval 0

clean:
	$(MAKE) -C native clean
	rm -rf report
