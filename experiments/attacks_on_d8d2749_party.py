"""The passive-party attacks of issue 16 (leak 6) on d8d2749 and on the current code, over every transport.

    python experiments/attacks_on_d8d2749_party.py --out experiments/measured/attacks_on_d8d2749_party.json

The attacker is ``tests/party_attacker.py`` (a deviating active party that speaks only the
protocol; the same code the tests run).  The script runs it on a temporary worktree of
d8d2749 (``--revision``) and on this checkout, each against the passive party in-process,
as a Ray ``PartyActor`` and as an HTTP service, and writes both sets of results:

* ``crafted_powers`` - one ``histograms`` request whose encrypted "gradients" are distinct
  powers of two: the rows whose every mask the attacker reads, and the share of the values'
  bins that spells (masks labelled as the party labels them: the attacker's best case);
* ``decrypted_noise`` - one ``histograms`` request of encrypted zeros (BFV): the masks read
  from the noise of the returned ciphertexts, with the secret key;
* ``split_masks`` - every (feature, bin) mask named in ``splits`` on fresh trees whose roots
  hold every row, with zero gradients: the share of (row, feature) bins it gets right;
* ``shrunken_bins`` - a training opened with ``train_rows = [argmin x0, argmax x0]`` and 256
  bins: how close each row's bin puts it to its value of ``x0``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE.parent / "tests"))  # the attacker's tools

KINDS = ("local", "actor", "service")
ATTACKS = ("crafted_powers", "decrypted_noise", "split_masks", "shrunken_bins")


def run_here(kinds: list[str], attacks: list[str]) -> dict:
    """Every attack against every deployment of the package this interpreter imports."""
    import party_attacker as kit

    out: dict = {}
    if "actor" in kinds:
        from raytune_fed.runtime import connect

        connect(num_cpus=1)
    for kind in kinds:
        for name in attacks:
            start = time.process_time()
            with kit.deployed(kind) as dep:
                result = getattr(kit, name)(dep)
            result.pop("guess", None)
            result["attacker_cpu_seconds"] = time.process_time() - start
            out.setdefault(name, {})[kind] = result
            print(name, kind, json.dumps(result), flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--revision", default="d8d2749", help="the revision attacked first (default: %(default)s)")
    parser.add_argument("--kinds", default=",".join(KINDS), help="deployments (default: %(default)s)")
    parser.add_argument("--attacks", default=",".join(ATTACKS), help="attacks (default: %(default)s)")
    parser.add_argument("--here-only", action="store_true", help="attack the imported package only")
    parser.add_argument("--out", default=None, help="write the results as JSON here")
    args = parser.parse_args()
    kinds, attacks = args.kinds.split(","), args.attacks.split(",")
    unknown = sorted(set(kinds) - set(KINDS)) + sorted(set(attacks) - set(ATTACKS))
    if unknown:
        parser.exit(2, f"{parser.prog}: error: unknown deployments or attacks {unknown}; known: "
                       f"{list(KINDS)}, {list(ATTACKS)}\n")
    if args.here_only:
        results = run_here(kinds, attacks)
    else:
        from _revisions import checkout, run_script

        with checkout(args.revision) as tree:
            argv = ["--here-only", "--kinds", args.kinds, "--attacks", args.attacks]
            before = run_script(tree, __file__, argv)["results"]
        results = {args.revision: before, "now": run_here(kinds, attacks)}
    if args.out:
        Path(args.out).write_text(json.dumps({"data": "make_classification(160, 12, random_state=3), columns 6-11",
                                              "load_average": os.getloadavg(), "results": results}, indent=2))


if __name__ == "__main__":
    main()
