"""What a site owner needs from an analyst's RFMS grid before serving it.

* :func:`grid_site_plan` - the grid's schedule digest and the policy values that let each of
  its sites answer the whole grid (the same sizing as the sites a grid simulates,
  :func:`~raytune_fed.workflows.rfms._sites.rfms_site_policy`): ``raytune-fed site plan`` writes
  it, and ``raytune-fed site init --for-grid`` writes a policy from it;
* :func:`export_site_rows` - each site's rows of a dataset's split as an ``.npz`` that
  ``raytune-fed site serve --data`` reads (for trying the whole path on one machine).

The guard is not part of a plan: it is the owner's own choice (``site init --guard-k``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from raytune_fed.errors import ConfigError
from raytune_fed.serve._init_cli import PLAN_KEYS
from raytune_fed.workflows.rfms._spec import RFMSSettings


def grid_site_plan(settings: RFMSSettings, *, learners: Sequence[str], n_reps: int, n_pairs: int | None,
                   max_retries: int = 2) -> dict[str, Any]:
    """``{"digest", "sites", "n_units", "policy"}`` of the grid ``rfms`` runs with these options."""
    from raytune_fed.workflows.rfms._grid import build_grid, check_site_bounds
    from raytune_fed.workflows.rfms._sites import grid_schedule, plan_sites, rfms_site_policy

    plan = plan_sites(settings)
    check_site_bounds(settings, plan)
    specs = build_grid(settings, n_sites=len(plan.site_names), learners=learners, n_reps=n_reps, n_pairs=n_pairs,
                       site_names=plan.site_names, site_actors=False)
    schedule = grid_schedule(specs)
    template = rfms_site_policy(settings, schedule, len(set(learners)), max_retries)
    policy = {section: template[section] if keys is None else {k: template[section][k] for k in keys}
              for section, keys in PLAN_KEYS.items()}
    return {"digest": schedule.digest, "sites": list(plan.site_names), "n_units": len(schedule.units),
            "policy": policy}


def export_site_rows(settings: RFMSSettings, out: str | os.PathLike) -> dict[str, Path]:
    """Write ``out/<site>.npz`` (arrays ``X`` and ``y``) for every site of the dataset's split; never overwrites."""
    import numpy as np

    from raytune_fed.workflows.rfms._sites import plan_sites

    plan = plan_sites(settings)
    out = Path(out)
    paths = {name: out / f"{name}.npz" for name in plan.site_names}
    taken = [p.name for p in paths.values() if p.exists()]
    if taken:
        raise ConfigError(f"--out {os.fspath(out)!r} already holds {', '.join(taken)}; nothing was written")
    try:
        out.mkdir(parents=True, exist_ok=True)
        for i, name in enumerate(plan.site_names):
            X, y = plan.site(i)
            np.savez(paths[name], X=X, y=y)
    except OSError as exc:
        raise ConfigError(f"cannot write the rows into {os.fspath(out)!r}: {exc.strerror or exc}") from None
    return paths
