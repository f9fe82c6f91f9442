#!/usr/bin/env python3
"""Install the libtorch that tch 0.26 expects (PyTorch 2.13.0), from PyPI only.

Why a script: libtorch's own download site is unreachable here, and PyPI's torch wheel
is a CUDA build whose CUDA libraries are several gigabytes. On a machine without a GPU we
take only the CPU subset (~490 MB); where `nvidia-smi -L` lists a GPU we install
the full CUDA torch into a venv inside the cache and point libtorch at it.

Idempotent: a stamp file records what was installed; a second run only checks it.
The install is built in a temporary folder and renamed into place, so an interrupted run
never leaves a half-installed libtorch behind.

Prints the libtorch directory (the value for LIBTORCH) as its last stdout line and links
`<project>/.libtorch` to it, which `.cargo/config.toml` hands to torch-sys.

Environment:
  STRATLAB_LIBTORCH_DIR      where to install (default: ~/.cache/stratlab/libtorch-2.13.0-<variant>)
  STRATLAB_LIBTORCH_VARIANT  `cpu` or `cuda` (default: `cuda` when nvidia-smi lists a GPU)
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

TORCH_VERSION = "2.13.0"
# libtorch_cpu.so needs these two CUDA runtime libraries at load time, even on the CPU.
CPU_EXTRA_WHEELS = {
    "nvidia-cuda-runtime==13.0.96": ["nvidia/cu13/lib/libcudart.so.13"],
    "nvidia-cuda-cupti==13.0.85": ["nvidia/cu13/lib/libcupti.so.13"],
}
CPU_TORCH_LIBS = ["libc10.so", "libtorch_cpu.so", "libtorch.so", "libgomp.so.1", "libshm.so"]
STAMP = ".stratlab-libtorch-stamp"
PROJECT = Path(__file__).resolve().parent.parent


def log(message: str) -> None:
    print(f"libtorch: {message}", file=sys.stderr, flush=True)


def gpu_present() -> bool:
    nvidia_smi = shutil.which("nvidia-smi")
    if nvidia_smi is None:
        return False
    try:
        listing = subprocess.run([nvidia_smi, "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return listing.returncode == 0 and "GPU" in listing.stdout


def pip(*args: str) -> None:
    command = [sys.executable, "-m", "pip", *args]
    log(" ".join(command))
    subprocess.run(command, check=True)


def download(requirement: str, into: Path) -> Path:
    pip("download", "--quiet", "--no-deps", "--only-binary=:all:", "-d", str(into), requirement)
    name = requirement.split("==")[0].replace("-", "_")
    wheels = sorted(into.glob(f"{name}-*.whl"))
    if not wheels:
        sys.exit(f"libtorch: pip reported success but no wheel for {requirement} is in {into}")
    return wheels[-1]


def extract(wheel: Path, members: list, destination: Path) -> None:
    """Copies each member (a file, or a folder ending in '/') out of a wheel."""
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        for member in members:
            prefix, target = member
            chosen = [n for n in names if n == prefix or (prefix.endswith("/") and n.startswith(prefix))]
            if not chosen:
                sys.exit(f"libtorch: {wheel.name} has no {prefix}")
            for name in chosen:
                if name.endswith("/"):
                    continue
                out = destination / target / name[len(prefix):] if prefix.endswith("/") else destination / target
                out.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(name) as source, open(out, "wb") as sink:
                    shutil.copyfileobj(source, sink, 1 << 20)


def install_cpu(staging: Path) -> Path:
    with tempfile.TemporaryDirectory(prefix="stratlab-wheels-") as wheels:
        wheels = Path(wheels)
        torch = download(f"torch=={TORCH_VERSION}", wheels)
        log(f"extracting the CPU subset of {torch.name}")
        members = [("torch/include/", "include")]
        members += [(f"torch/lib/{lib}", f"lib/{lib}") for lib in CPU_TORCH_LIBS]
        extract(torch, members, staging)
        for requirement, files in CPU_EXTRA_WHEELS.items():
            wheel = download(requirement, wheels)
            extract(wheel, [(f, f"lib/{Path(f).name}") for f in files], staging)
    return staging


# Headers-only wheels for compiling against ProcessGroupNCCL.hpp (CUDA 13, as torch 2.13.0).
CUDA_HEADER_WHEELS = ["nvidia-cuda-crt==13.0.88", "nvidia-cuda-cccl==13.0.85"]


def install_cuda(staging: Path) -> Path:
    venv = staging / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    # torch's own wheels bring the CUDA libraries but not all headers its c10d headers
    # include: crt/host_config.h (nvidia-cuda-crt) and nv/target (nvidia-cuda-cccl), which the
    # NCCL path of the c10d shim (comm/cpp/c10d_shim.cpp) needs to compile.
    command = [
        str(python), "-m", "pip", "install", "--quiet", f"torch=={TORCH_VERSION}",
        *CUDA_HEADER_WHEELS,
    ]
    log(" ".join(command))
    subprocess.run(command, check=True)
    site = subprocess.run(
        [str(python), "-c", "import torch, pathlib; print(pathlib.Path(torch.__file__).parent)"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()
    relative = Path(site).relative_to(staging)
    # The venv's torch folder has include/ and lib/ (whose RUNPATH finds the nvidia wheels);
    # expose them at the top so LIBTORCH is the install folder for both variants.
    (staging / "include").symlink_to(relative / "include")
    (staging / "lib").symlink_to(relative / "lib")
    return staging


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report whether libtorch is installed")
    args = parser.parse_args()

    variant = os.environ.get("STRATLAB_LIBTORCH_VARIANT") or ("cuda" if gpu_present() else "cpu")
    if variant not in ("cpu", "cuda"):
        sys.exit(f"libtorch: STRATLAB_LIBTORCH_VARIANT must be 'cpu' or 'cuda', not {variant!r}")
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    target = Path(os.environ.get("STRATLAB_LIBTORCH_DIR", cache / "stratlab" / f"libtorch-{TORCH_VERSION}-{variant}"))
    wanted = f"{TORCH_VERSION} {variant}\n"
    stamp = target / STAMP

    if not (stamp.exists() and stamp.read_text() == wanted):
        if args.check:
            log(f"not installed at {target}")
            return 1
        if target.exists():
            log(f"{target} holds another or an unfinished install; replacing it")
            shutil.rmtree(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.partial-", dir=target.parent))
        try:
            (install_cuda if variant == "cuda" else install_cpu)(staging)
            # torch-sys checks this file against the PyTorch version tch expects.
            (staging / "build-version").write_text(f"{TORCH_VERSION}\n")
            (staging / STAMP).write_text(wanted)
            staging.rename(target)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        log(f"installed libtorch {TORCH_VERSION} ({variant}) at {target}")

    link = PROJECT / ".libtorch"
    if not (link.is_symlink() and os.readlink(link) == str(target)):
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(target)
    print(target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
