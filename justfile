# stratlab recipes. `just --list` shows them; every recipe installs what it needs first.

set shell := ["bash", "-euo", "pipefail", "-c"]

# The suite `bench-matrix` runs when none is named.
default_suite := "suite/default.yaml"

# List the recipes.
default:
    @just --list

# Install libtorch 2.13.0 from PyPI (CPU subset, or the CUDA build where nvidia-smi lists a GPU)
# and Debian's gloo headers (for the c10d shim) and iproute2; idempotent.
setup:
    @tools/setup-debian.sh
    @python3 tools/libtorch.py > /dev/null

# Build the stratlab binary (release).
build: setup
    cargo build --release --bin stratlab

# Install Debian's chromium for the HTML report's headless-browser test; idempotent.
setup-chromium:
    @tools/setup-chromium.sh

# Install what tests read in place: Debian's Fashion-MNIST (31 MB, read where Debian puts it).
setup-test-data:
    @tools/setup-debian.sh dataset-fashion-mnist

# Install Debian's Slurm and munge for the two-node testbed the multi-node tests start
# (tools/slurm-testbed.sh); idempotent.
setup-slurm:
    @tools/setup-debian.sh slurmctld slurmd slurm-client munge

# Run every test of the workspace on the CPU. Tests build in release, like the benchmark
# binary, so `just test` and `just bench-matrix` share one compiled set of dependencies.
# The release binary (without the test-only fault-injection feature) is built first and kept
# aside: a test checks that it ignores the fault variable. `cargo test` leaves its own build
# (with fault injection) at target/release/stratlab, so the release binary is put back
# afterwards, pass or fail: cargo keeps both builds, so this compiles nothing unless a test
# wrote into a source folder the build script watches (a fresh clone once paid 44 s for a
# test that made folders in a fixture), and that fails the recipe. The binary put back must
# be byte-identical to the one kept aside.
test: setup setup-chromium setup-test-data setup-slurm
    cargo build --release --bin stratlab
    mkdir -p target/release-checks && cp target/release/stratlab target/release-checks/stratlab
    status=0; \
    STRATLAB_RELEASE_BINARY="$PWD/target/release-checks/stratlab" cargo test --workspace --release --no-fail-fast || status=$?; \
    cargo build --release --bin stratlab 2>&1 | tee target/release-checks/rebuild.log; \
    ! grep -q '^ *Compiling' target/release-checks/rebuild.log \
        || { echo "the tests wrote into a watched source folder, so the binary was compiled again" >&2; exit 1; }; \
    cmp target/release/stratlab target/release-checks/stratlab \
        || { echo "target/release/stratlab is not the release build after the tests" >&2; exit 1; }; \
    exit $status

# Run a benchmark suite end to end (fetching data as needed); ends with the results matrix
# and the path of the run's HTML report (runs/<run>/report/index.html).
bench-matrix suite=default_suite: build
    target/release/stratlab run {{suite}}

# Micro-benchmarks (criterion): data loading, one training step, the telemetry sampler.
bench: setup
    cargo bench --workspace

# On a GPU node: install the CUDA libtorch, build, and check that tch sees CUDA and NVML.
# On a machine without a GPU it checks that the CUDA code paths compile and fall back to the CPU.
check-cuda: setup
    cargo build --release --bin stratlab
    target/release/stratlab env --check-cuda
