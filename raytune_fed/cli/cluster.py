"""``raytune-fed cluster``: what Ray's cluster launcher runs around ``ray up cluster.yaml``.

``bundle`` (on your machine, before ``ray up``) builds the wheel and the constraints file the
nodes install; ``announce`` (on the head, in ``head_start_ray_commands``) records the cluster's
node types so that grids can ask the autoscaler for site nodes.  See :mod:`raytune_fed.cluster`.
"""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cluster", help="prepare and announce a `ray up` cluster (bundle, announce)",
                       description="Helpers for Ray's cluster launcher (see cluster.yaml and docs/cluster.md).")
    steps = p.add_subparsers(dest="step", required=True, metavar="STEP")
    b = steps.add_parser("bundle", help="build the wheel and constraints.txt the nodes install (before `ray up`)",
                         description="Build a wheel of this source tree and a constraints file pinning every "
                                     "distribution of this environment into DIST (cluster.yaml's file_mounts "
                                     "copy it to every node, whose setup_commands install it). Checks first "
                                     "that the cluster config's container image runs this machine's Ray and "
                                     "Python.")
    b.add_argument("--source", default=".", help="the repository root (default: .)")
    b.add_argument("--out", default=None, help="where to write (default: SOURCE/dist/cluster)")
    b.add_argument("--config", default="cluster.yaml",
                   help="the cluster config whose image is checked (default: cluster.yaml; 'none' skips the check)")
    b.set_defaults(run=_bundle)
    a = steps.add_parser("announce", help="record the autoscaler's node types in the cluster (on the head)",
                         description="Record the node types of the autoscaler config in the cluster's GCS, so a "
                                     "grid knows which site:<name> resources the autoscaler can start a node for. "
                                     "Run on the head after `ray start --head` (cluster.yaml does).")
    a.add_argument("config", help="the autoscaler config, e.g. ~/ray_bootstrap_config.yaml")
    a.add_argument("--address", default="auto", help="the cluster (default: auto)")
    a.set_defaults(run=_announce)


def _bundle(args: argparse.Namespace) -> None:
    from raytune_fed.cluster import build_bundle

    config = None if args.config == "none" else args.config
    written = build_bundle(args.source, args.out, config)
    print(f"wheel: {written['wheel']}")
    print(f"constraints: {written['constraints']}")
    if written["image"]:
        print(f"image checked: {written['image']}")


def _announce(args: argparse.Namespace) -> None:
    from raytune_fed.cluster import announce_node_types

    offered = announce_node_types(args.config, args.address)
    print(f"announced the node types of {args.config}; custom resources offered: {', '.join(offered) or 'none'}")
