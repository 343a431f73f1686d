"""What cluster.yaml's nodes cost per hour on AWS, and the paper's 600-unit RFMS grid on them.

Inputs: cluster.yaml's node types (instance type, disk size, most nodes of each type), the
on-demand list prices below (Linux, us-west-2, the region cluster.yaml uses; prices change,
so check https://aws.amazon.com/ec2/pricing/on-demand/ and edit PRICES before you rely on
the totals), and the projected wall hours of the 600-unit grid on 64 CPUs from
``experiments/measured/bench_grid_paper.json`` (``python experiments/bench_grid.py
--project-from ...``: list scheduling of the unit costs measured at the paper's budget).

Outputs (``experiments/measured/cluster_cost.json``): dollars per hour of each node type
(instance and its EBS volume), of the cluster at rest (the head alone: what a forgotten
`ray down` costs), of the cluster at full size, and the grid's cost when it runs on the
head plus the eight general workers (64 worker vCPUs).  A vCPU is one hardware thread, not
a core of the 2-core machine the units were measured on, so the grid's hours on 64 vCPUs
are a lower bound (and the head's two CPUs are not counted).  Not counted: data transfer
(the results are megabytes), taxes.

    python experiments/cluster_cost.py
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "experiments" / "measured" / "cluster_cost.json"
GRID = ROOT / "experiments" / "measured" / "bench_grid_paper.json"

PRICES = {
    "source": "AWS EC2 on-demand list prices, Linux, us-west-2 (Oregon); EBS gp3 storage",
    "instance_per_hour": {"m5.xlarge": 0.192, "c5.2xlarge": 0.34},
    "vcpus": {"m5.xlarge": 4, "c5.2xlarge": 8},
    "ebs_gp3_per_gb_month": 0.08,
    "hours_per_month": 730,
}


def node_cost(node_type: dict) -> dict:
    config = node_type["node_config"]
    instance = config["InstanceType"]
    if instance not in PRICES["instance_per_hour"]:
        raise SystemExit(f"no price for instance type {instance!r}: add it to PRICES")
    gb = sum(m["Ebs"]["VolumeSize"] for m in config.get("BlockDeviceMappings", []) if "Ebs" in m)
    disk = gb * PRICES["ebs_gp3_per_gb_month"] / PRICES["hours_per_month"]
    return {"instance": instance, "vcpus": PRICES["vcpus"][instance], "disk_gb": gb,
            "instance_per_hour": PRICES["instance_per_hour"][instance], "disk_per_hour": round(disk, 4),
            "per_hour": round(PRICES["instance_per_hour"][instance] + disk, 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(ROOT / "cluster.yaml"))
    parser.add_argument("--grid", default=str(GRID))
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args()

    config = yaml.safe_load(Path(args.config).read_text())
    head = config["head_node_type"]
    types = config["available_node_types"]
    nodes = {name: {**node_cost(t), "most": 1 if name == head else t["max_workers"]} for name, t in types.items()}
    at_rest = nodes[head]["per_hour"] + sum(n["per_hour"] * types[name].get("min_workers", 0)
                                           for name, n in nodes.items() if name != head)
    full = sum(n["per_hour"] * n["most"] for n in nodes.values())
    general = [name for name, t in types.items() if name != head and not any(
        str(r).startswith("site:") for r in (t.get("resources") or {}))]
    grid_cluster = nodes[head]["per_hour"] + sum(nodes[g]["per_hour"] * nodes[g]["most"] for g in general)
    grid_vcpus = sum(nodes[g]["vcpus"] * nodes[g]["most"] for g in general)

    projection = json.loads(Path(args.grid).read_text())["projection"]
    grid = {}
    for basis, block in (("unit_cpu_seconds", projection["from_cpu_seconds"]), ("unit_wall_seconds", projection)):
        hours = block["cores"][str(grid_vcpus)]["long_tail_hours"]
        grid[basis] = {"hours": round(hours, 2), "dollars": round(hours * grid_cluster, 2)}
    result = {
        "command": "python experiments/cluster_cost.py",
        "prices": PRICES,
        "node_types": nodes,
        "per_hour_at_rest": round(at_rest, 3),
        "per_hour_full_size": round(full, 3),
        "grid_600_units": {"nodes": [head, *general], "worker_vcpus": grid_vcpus,
                           "per_hour": round(grid_cluster, 3), "projected_from": str(Path(args.grid).relative_to(ROOT)),
                           **grid},
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
