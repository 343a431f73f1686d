"""Every use of Ray's private API, in one place (the package is tested on the Ray release
``pyproject.toml`` bounds it to; a new Ray is checked here first).

Ray is imported inside each function, so importing this module loads no Ray.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # for annotations only: the typed result of ray.remote on a 4-argument function
    from ray._private.worker import RemoteFunction3 as RemoteFunction3

__all__ = ["canonical_gcs_address", "cluster_config", "current_node", "report_cluster_config",
           "session_dir"]


def canonical_gcs_address(address: str) -> str:
    """The GCS address ``ray.init`` would connect to for ``address`` (``"auto"`` resolved); raises
    ``ConnectionError`` or ``ValueError`` when there is none."""
    from ray._private.services import canonicalize_bootstrap_address_or_die

    return canonicalize_bootstrap_address_or_die(address)


def report_cluster_config(gcs_address: str, record: bytes) -> None:
    """Store a serialised ``ClusterConfig`` record in the GCS at ``gcs_address`` (what Ray's launcher leaves empty)."""
    from ray._raylet import GcsClient  # type: ignore[attr-defined]  # ray's _raylet.pyi stub omits GcsClient

    GcsClient(address=gcs_address).report_cluster_config(record)


def cluster_config() -> Any:
    """The connected cluster's ``ClusterConfig`` record (None where Ray has none)."""
    from ray._private.state import state

    return state.get_cluster_config()


def current_node() -> Any:
    """This worker's or driver's Ray node object (None when not connected)."""
    import ray

    return getattr(ray._private.worker.global_worker, "node", None)


def session_dir() -> str:
    """The connected session's directory; ``AttributeError`` when not connected."""
    import ray

    return ray._private.worker.global_worker.node.get_session_dir_path()
