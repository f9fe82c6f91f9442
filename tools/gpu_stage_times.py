#!/usr/bin/env python3
"""Per-stage forward+backward seconds of torchvision's ResNet-101 and ResNet-50 on one CUDA
GPU, cut where stratlab cuts them (stem, max-pool, each bottleneck, average pool with
flatten, fc), at several batch sizes, fp32 with TF32 off: how a real GPU splits a step over
stages and how a stage's time grows with its micro-batch, the two things `stratlab
validate` takes from a roofline instead (perf-model/README.md). Also the whole network's
training step at each batch, to compare with the stages summed.

Usage: python3 tools/gpu_stage_times.py OUT_DIR [--batches 16,36,118] [--deadline-s 200]
Writes OUT_DIR/stage_times.csv a row at a time and OUT_DIR/environment.json.
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


def stages(net):
    """stratlab's atomic stages of a torchvision ResNet, in order, with their names."""
    out = [("stem", nn.Sequential(net.conv1, net.bn1, net.relu)), ("maxpool", net.maxpool)]
    for layer in ("layer1", "layer2", "layer3", "layer4"):
        for index, block in enumerate(getattr(net, layer)):
            out.append((f"{layer}.{index}", block))
    out.append(("avgpool", nn.Sequential(net.avgpool, nn.Flatten())))
    out.append(("fc", net.fc))
    return out


def timed(fn, warmup, repeats):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times), min(times), max(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--batches", default="16,36,118")
    parser.add_argument("--networks", default="resnet101,resnet50")
    parser.add_argument("--deadline-s", type=float, default=200)
    args = parser.parse_args()
    started = time.time()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    device = torch.device("cuda")
    import os
    os.makedirs(args.out, exist_ok=True)
    props = torch.cuda.get_device_properties(0)
    with open(f"{args.out}/environment.json", "w") as f:
        json.dump({"device": props.name, "memory_bytes": props.total_memory, "torch": torch.__version__,
                   "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
                   "torchvision": torchvision.__version__, "date": time.strftime("%Y-%m-%d"),
                   "precision": "fp32, TF32 off", "cudnn_benchmark": True}, f, indent=1)
    with open(f"{args.out}/stage_times.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["device", "network", "batch", "stage", "forward_backward_s_median", "min_s", "max_s"])
        for name in args.networks.split(","):
            net = getattr(torchvision.models, name)(num_classes=1000).to(device)
            parts = stages(net)
            for batch in [int(b) for b in args.batches.split(",")]:
                if time.time() - started > args.deadline_s:
                    print("deadline reached", file=sys.stderr)
                    return
                x = torch.randn(batch, 3, 224, 224, device=device)
                target = torch.randint(1000, (batch,), device=device)
                optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)

                def step():
                    optimizer.zero_grad(set_to_none=True)
                    nn.functional.cross_entropy(net(x), target).backward()
                    optimizer.step()

                median, low, high = timed(step, 3, 10)
                writer.writerow([props.name, name, batch, "whole step", f"{median:.6f}", f"{low:.6f}", f"{high:.6f}"])
                current = x
                for stage_name, module in parts:
                    stage_input = current.detach().requires_grad_(stage_name != "stem")
                    with torch.no_grad():
                        output = module(stage_input)
                    grad = torch.randn_like(output)

                    def pass_():
                        module(stage_input).backward(grad)

                    median, low, high = timed(pass_, 2, 8)
                    writer.writerow([props.name, name, batch, stage_name, f"{median:.6f}", f"{low:.6f}", f"{high:.6f}"])
                    current = output
                f.flush()
                print(f"{name} b{batch} done at {time.time() - started:.0f} s", flush=True)


if __name__ == "__main__":
    main()
