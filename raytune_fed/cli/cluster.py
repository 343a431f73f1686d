"""``raytune-fed cluster``: what Ray's cluster launcher runs around ``ray up cluster.yaml``.

``bundle`` (on your machine, before ``ray up``) builds the wheel and the constraints file the
nodes install; ``node-types`` writes a cluster file with a site node type per site of a dataset;
``announce`` (on the head, in ``head_start_ray_commands``) records the cluster's node types so
that grids can ask the autoscaler for site nodes; ``start-ray``, ``stop-ray`` and ``address``
(on the nodes of ``cluster.local.yaml``) run a Ray of the cluster's own and stop only that one.
See :mod:`raytune_fed.cluster`.
"""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cluster", help="prepare and run a `ray up` cluster (bundle, announce, node-types, ...)",
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
    n = steps.add_parser("node-types", help="write a cluster file with a site node type per site of a dataset",
                         description="Write the cluster config CONFIG with its site node type template (the node "
                                     "type declaring site:site0) replaced by one node type ray.worker.site.<name> "
                                     "per site of the dataset's natural split, each declaring {\"site:<name>\": 1} "
                                     "with the template's node_config; then `ray up OUT`.")
    n.add_argument("--dataset", required=True, help="a dataset with sites: an embedded one (geo5_sim) or a file "
                                                    "with --target and --site-column")
    n.add_argument("--target", default=None, help="the label column of a dataset file")
    n.add_argument("--site-column", default=None, help="the site column of a dataset file")
    n.add_argument("--config", default="cluster.yaml", help="the cluster config with the template "
                                                            "(default: cluster.yaml)")
    n.add_argument("--cpus", type=int, default=None,
                   help="CPUs each site node declares (default: none declared, Ray detects the machine's)")
    n.add_argument("--out", required=True, help="the cluster file to write, e.g. cluster.geo5.yaml")
    n.set_defaults(run=_node_types)
    state = ("the marker file's directory, this user's own (mode 0700); Ray's temporary directory is its subfolder "
             "'ray' (default: ~/.raytune-fed-ray)")
    s_ = steps.add_parser("start-ray", help="ray start with this cluster's own temp dir and marker (on a node)",
                          description="Run `ray start RAY_ARGS` with --temp-dir STATE_DIR/ray and a fresh token in "
                                      "the environment of every process it starts, recorded in STATE_DIR/ray.json, "
                                      "so that stop-ray stops exactly this Ray (cluster.local.yaml runs it). "
                                      "Refuses while a Ray this state directory started still runs.")
    s_.add_argument("--state-dir", default="~/.raytune-fed-ray", help=state)
    s_.add_argument("ray_args", nargs=argparse.REMAINDER, metavar="-- RAY_ARGS",
                    help="the arguments of `ray start`, after --")
    s_.set_defaults(run=_start_ray)
    t = steps.add_parser("stop-ray", help="stop the Ray that start-ray started here, and no other (on a node)",
                         description="Stop the processes of the Ray that `raytune-fed cluster start-ray` started "
                                     "from STATE_DIR (they carry its token), never another Ray of this machine: "
                                     "unlike `ray stop`, which ends every Ray process of the user. Without a "
                                     "marker nothing runs and nothing is stopped.")
    t.add_argument("--state-dir", default="~/.raytune-fed-ray", help=state)
    t.set_defaults(run=_stop_ray)
    d = steps.add_parser("address", help="print the address of the Ray that start-ray started here",
                         description="Print the GCS address of the Ray that `raytune-fed cluster start-ray` "
                                     "started from STATE_DIR, for --address (`--address auto` could find "
                                     "another Ray of the machine).")
    d.add_argument("--state-dir", default="~/.raytune-fed-ray", help=state)
    d.set_defaults(run=_address)


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


def _node_types(args: argparse.Namespace) -> None:
    from raytune_fed.cluster import SITE_NODE_TYPE, write_site_node_types

    sites = write_site_node_types(args.dataset, args.out, args.config, cpus=args.cpus, target=args.target,
                                  site_column=args.site_column)
    print(f"wrote {args.out}: {len(sites)} site node types "
          f"{', '.join(SITE_NODE_TYPE.format(site=s) for s in sites)}; then `ray up {args.out}`")


def _start_ray(args: argparse.Namespace) -> None:
    from raytune_fed.cluster import start_ray
    from raytune_fed.errors import ConfigError

    ray_args = list(args.ray_args)
    if ray_args[:1] == ["--"]:
        ray_args = ray_args[1:]
    if not ray_args:
        raise ConfigError("give the arguments of `ray start` after --, e.g. start-ray -- --head --port=6390")
    marker = start_ray(ray_args, args.state_dir)
    print(f"started Ray at {marker['address'] or '(address not recorded)'}: {len(marker['pids'])} processes "
          f"marked {marker['token']}")


def _stop_ray(args: argparse.Namespace) -> None:
    from raytune_fed.cluster import stop_ray

    stopped = stop_ray(args.state_dir)
    print(f"stopped this cluster's Ray: {len(stopped)} processes" if stopped
          else "no Ray of this cluster runs here: nothing stopped")


def _address(args: argparse.Namespace) -> None:
    from raytune_fed.cluster import ray_address

    print(ray_address(args.state_dir))
