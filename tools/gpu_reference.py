#!/usr/bin/env python3
"""Reference rows from PyTorch on one CUDA GPU: a training step (forward, loss, backward,
SGD with momentum) per network, batch, precision and memory format, with the caching
allocator's peak, and the largest batch that trains under a capped memory fraction.

stratlab's own binary cannot run on the lent GPU machines yet (libtorch does not travel),
so these rows are what the precision axis, the memory frontier and the GPU model are
checked against. Every row names the device, driver, torch, CUDA and cuDNN it came from.

Usage: python3 tools/gpu_reference.py OUT_DIR [--deadline-s 420]
Writes OUT_DIR/steps.csv, OUT_DIR/frontier.csv and OUT_DIR/environment.json, a row at a time
(a run stopped at its deadline keeps what it measured).
"""

import argparse
import csv
import json
import statistics
import sys
import time

import torch
import torch.nn as nn
import torchvision

# stratlab's SPEC §2: torchvision's parameter counts, which the ImageNet variants must equal.
PARAMETERS = {"resnet18": 11_689_512, "resnet50": 25_557_032, "vgg11": 132_863_336,
              "vgg16": 138_357_544, "mobilenet_v2": 3_504_872}


def imagenet(name):
    return getattr(torchvision.models, name)(num_classes=1000)


def cifar_resnet18():
    """stratlab's CIFAR-10 ResNet-18: 3×3/1 stem with 64 channels, no max-pool, 10 classes."""
    net = torchvision.models.resnet18(num_classes=10)
    net.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)
    net.maxpool = nn.Identity()
    return net


def cifar_vgg11():
    """stratlab's CIFAR-10 VGG-11 (batch norm): the conv stacks, then a 512→10 fc."""
    return nn.Sequential(torchvision.models.vgg11_bn().features, nn.Flatten(), nn.Linear(512, 10))


NETWORKS = {
    # name: (constructor, input (C, H, W), classes, data-set layout)
    "resnet18": (lambda: imagenet("resnet18"), (3, 224, 224), 1000, "imagenet"),
    "resnet50": (lambda: imagenet("resnet50"), (3, 224, 224), 1000, "imagenet"),
    "vgg11": (lambda: imagenet("vgg11"), (3, 224, 224), 1000, "imagenet"),
    "vgg16": (lambda: imagenet("vgg16"), (3, 224, 224), 1000, "imagenet"),
    "mobilenet_v2": (lambda: imagenet("mobilenet_v2"), (3, 224, 224), 1000, "imagenet"),
    "resnet18-cifar": (cifar_resnet18, (3, 32, 32), 10, "cifar10"),
    "vgg11-cifar": (cifar_vgg11, (3, 32, 32), 10, "cifar10"),
}

# fp32 with TF32 off, TF32 on, and autocast in bf16 and fp16 (fp16 with a dynamic loss scaler).
PRECISIONS = ["fp32", "tf32", "bf16", "fp16"]
FORMATS = ["contiguous", "channels_last"]


def set_tf32(on):
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on


class Trainer:
    """One network's training step in one precision and memory format, PyTorch AMP's way:
    weights stay fp32, autocast around forward and loss, a GradScaler for fp16."""

    def __init__(self, network, precision, memory_format, batch):
        make, shape, classes, _ = NETWORKS[network]
        fmt = torch.channels_last if memory_format == "channels_last" else torch.contiguous_format
        self.net = make().cuda().to(memory_format=fmt)
        self.optimizer = torch.optim.SGD(self.net.parameters(), lr=0.01, momentum=0.9)
        self.x = torch.randn(batch, *shape, device="cuda").to(memory_format=fmt)
        self.y = torch.randint(0, classes, (batch,), device="cuda")
        self.precision = precision
        self.dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
        self.scaler = torch.amp.GradScaler("cuda", enabled=precision == "fp16")
        self.loss_fn = nn.CrossEntropyLoss()

    def step(self):
        self.optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=self.dtype or torch.float32, enabled=self.dtype is not None):
            loss = self.loss_fn(self.net(self.x), self.y)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()


def time_steps(trainer, warmup, timed):
    for _ in range(warmup):
        trainer.step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(timed):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        trainer.step()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return times


def quantile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1) + 0.5))]


def environment():
    props = torch.cuda.get_device_properties(0)
    driver = "unknown"
    try:
        import pynvml
        pynvml.nvmlInit()
        driver = pynvml.nvmlSystemGetDriverVersion()
    except Exception as error:  # the rows stay useful without it
        driver = f"unknown ({error})"
    return {"device": props.name, "memory_bytes": props.total_memory, "multiprocessors": props.multi_processor_count,
            "driver": driver, "torch": torch.__version__, "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version(), "torchvision": torchvision.__version__,
            "date": time.strftime("%Y-%m-%d")}


# Most wanted first: the CIFAR-layout anchors of the precision issue, then ImageNet networks at
# the thesis's batch (32) and a GPU-sized one (128).
DEFAULT_PLAN = [(n, b) for n in ("resnet18-cifar", "vgg11-cifar") for b in (64, 256)] + [
    (n, b) for n in ("resnet50", "resnet18", "mobilenet_v2", "vgg16") for b in (32, 128)]


def steps_table(out, deadline, device, plan, precisions):
    fields = ["device", "network", "dataset", "batch", "precision", "memory_format", "parameters",
              "parameters_expected", "step_s_median", "step_s_p10", "step_s_p90", "timed_steps",
              "samples_per_s", "peak_allocated_bytes", "peak_reserved_bytes", "error"]
    with open(f"{out}/steps.csv", "w", newline="") as file:
        writer = csv.DictWriter(file, fields)
        writer.writeheader()
        for network, batch in plan:
            for precision in precisions:
                for memory_format in FORMATS:
                    if time.monotonic() > deadline:
                        print("deadline reached; steps table stops here", flush=True)
                        return
                    set_tf32(precision == "tf32")
                    row = {"device": device, "network": network, "dataset": NETWORKS[network][3], "batch": batch,
                           "precision": precision, "memory_format": memory_format,
                           "parameters_expected": PARAMETERS.get(network, "")}
                    try:
                        trainer = Trainer(network, precision, memory_format, batch)
                        row["parameters"] = sum(p.numel() for p in trainer.net.parameters())
                        times = time_steps(trainer, warmup=3, timed=12)
                        median = statistics.median(times)
                        row.update(step_s_median=f"{median:.6f}", step_s_p10=f"{quantile(times, 0.1):.6f}",
                                   step_s_p90=f"{quantile(times, 0.9):.6f}", timed_steps=len(times),
                                   samples_per_s=f"{batch / median:.1f}",
                                   peak_allocated_bytes=torch.cuda.max_memory_allocated(),
                                   peak_reserved_bytes=torch.cuda.max_memory_reserved())
                    except Exception as error:
                        row["error"] = f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
                    finally:
                        trainer = None
                        torch.cuda.empty_cache()
                    writer.writerow(row)
                    file.flush()
                    print(row, flush=True)


def trains(network, precision, batch):
    """Whether two steps at `batch` train under the process's memory fraction, and the peak."""
    trainer = None
    try:
        trainer = Trainer(network, precision, "channels_last", batch)
        torch.cuda.reset_peak_memory_stats()
        trainer.step()
        trainer.step()
        torch.cuda.synchronize()
        return True, torch.cuda.max_memory_allocated()
    except torch.OutOfMemoryError:
        return False, torch.cuda.max_memory_allocated()
    finally:
        trainer = None
        torch.cuda.empty_cache()


def frontier_table(out, deadline, device, cap_bytes):
    """The largest batch that trains under a cap: doubling from 8, then bisecting to 1/16 of
    the answer, as issue 44 asks of stratlab's runner."""
    # Benchmark mode's autotuning allocates workspaces for every new shape, so a probe's peak
    # would depend on which shapes ran before it; the frontier runs without it.
    torch.backends.cudnn.benchmark = False
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(cap_bytes / total)
    fields = ["device", "network", "precision", "memory_format", "cap_bytes", "batch", "trains", "peak_allocated_bytes"]
    with open(f"{out}/frontier.csv", "w", newline="") as file:
        writer = csv.DictWriter(file, fields)
        writer.writeheader()
        for network in ("resnet50", "vgg16"):
            for precision in ("fp32", "bf16"):
                set_tf32(False)
                low, high, batch = 0, None, 8
                while time.monotonic() < deadline:
                    ok, peak = trains(network, precision, batch)
                    writer.writerow({"device": device, "network": network, "precision": precision,
                                     "memory_format": "channels_last", "cap_bytes": cap_bytes, "batch": batch,
                                     "trains": ok, "peak_allocated_bytes": peak})
                    file.flush()
                    print(network, precision, batch, ok, peak, flush=True)
                    if ok:
                        low = batch
                    else:
                        high = batch
                    if high is None:
                        batch *= 2
                    elif high - low <= max(1, low // 16):
                        break
                    else:
                        batch = (low + high) // 2
    torch.cuda.set_per_process_memory_fraction(1.0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--deadline-s", type=float, default=300.0)
    parser.add_argument("--frontier-s", type=float, default=80.0, help="seconds kept for the frontier")
    parser.add_argument("--cap-gib", type=float, default=16.0)
    parser.add_argument("--plan", help="network:batch,… (default: the built-in plan)")
    parser.add_argument("--precisions", default=",".join(PRECISIONS))
    args = parser.parse_args()
    plan = DEFAULT_PLAN
    if args.plan:
        plan = [(item.split(":")[0], int(item.split(":")[1])) for item in args.plan.split(",")]
    if not torch.cuda.is_available():
        sys.exit("no CUDA device")
    torch.backends.cudnn.benchmark = True
    env = environment()
    with open(f"{args.out}/environment.json", "w") as file:
        json.dump(env, file, indent=1)
    print(env, flush=True)
    start = time.monotonic()
    steps_table(args.out, start + args.deadline_s - args.frontier_s, env["device"], plan,
                args.precisions.split(","))
    frontier_table(args.out, start + args.deadline_s, env["device"], int(args.cap_gib * 2**30))


if __name__ == "__main__":
    main()
