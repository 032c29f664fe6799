#!/usr/bin/env python3
"""Every implemented protocol x {one-sided, RPC} x {default, high contention}
on one fabric: a markdown table of txn/s, abort rate and p99 latency.

    python3 scripts/protocol_table.py --fabric sim      # deterministic, virtual time
    python3 scripts/protocol_table.py --fabric threads  # wall time on this machine

Each cell is one `verbena run --json -`; the exact command is printed above
the table. Build first: cargo build --release.
"""
import argparse
import json
import subprocess
import sys

BINARY = "./target/release/verbena"
CONTENTION = {
    # YCSB defaults: 0.1 % of the rows get 10 % of the accesses, 20 % writes.
    "default": [],
    # RCC's high contention: the hot area gets 90 % of the accesses, half
    # the operations write.
    "high": ["--hot-probability", "0.9", "--write-ratio", "0.5"],
}


def implemented():
    out = subprocess.run([BINARY, "protocols"], check=True, capture_output=True, text=True).stdout
    names = []
    for line in out.splitlines()[1:]:
        fields = line.split()
        if len(fields) > 1 and fields[1] == "yes":
            names.append(fields[0])
    return names


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fabric", choices=["sim", "threads"], default="sim")
    parser.add_argument("--duration", type=float, default=None)
    args = parser.parse_args()
    if args.fabric == "sim":
        base = ["--fabric", "sim", "--profile", "cx4-edr", "--duration", str(args.duration or 0.02),
                "--warmup", "0.005"]
    else:
        base = ["--fabric", "threads", "--duration", str(args.duration or 2), "--warmup", "0.5"]
    print(f"command per cell: {BINARY} run {' '.join(base)} --protocol P --primitive M [contention flags] --json -")
    print()
    print("| protocol | contention | one-sided txn/s | abort | p99 µs | RPC txn/s | abort | p99 µs |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for protocol in implemented():
        for contention, flags in CONTENTION.items():
            cells = []
            for primitive in ["onesided", "rpc"]:
                command = [BINARY, "run", *base, "--protocol", protocol, "--primitive", primitive,
                           *flags, "--json", "-"]
                run = subprocess.run(command, capture_output=True, text=True)
                if run.returncode != 0:
                    print(f"failed: {' '.join(command)}\n{run.stderr}", file=sys.stderr)
                    cells += ["failed", "", ""]
                    continue
                report = json.loads(run.stdout)
                cells += [f"{report['throughput_txn_per_s']:,.0f}", f"{report['abort_rate']:.3f}",
                          f"{report['latency_us']['p99']:.1f}"]
            print(f"| {protocol} | {contention} | " + " | ".join(cells) + " |")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
