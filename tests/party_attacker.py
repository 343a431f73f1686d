"""A deviating active party against a SecureBoost passive party, and the party in three deployments.

The attacker is the active party of trainings the passive party's owner admitted: it holds
session tokens, its own key pair and the (public) protocol, and sends hand-made requests
through :class:`PassiveClient` over whatever transport reaches the party.  It does not know
the passive party's feature values.  Each attack returns what it recovered; the evaluator
(:class:`Deployment.peek`, playing the party's owner) reads the truth from the party object
where it runs and scores it.  Only the protocol is used, so the same attacks run against
any revision (``experiments/attacks_on_d8d2749_party.py`` runs them on the code of d8d2749).
"""

from __future__ import annotations

import math
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np
from sklearn.datasets import make_classification

from raytune_fed.crypto import Layout, choose_block, secret_context
from raytune_fed.errors import QueryRefusedError
from raytune_fed.federation.parties import PassiveClient, PassiveParty
from raytune_fed.models.secureboost import NodeQuery

# the site: 160 rows x 12 features; the passive party holds the last 6 columns
X_PASSIVE = make_classification(n_samples=160, n_features=12, n_informative=5, random_state=3)[0][:, 6:]
OWNER = "passive-owner-" + "o" * 20
PLAIN_BITS = 59


@dataclass
class Deployment:
    """One passive party: the attacker's ``target`` and the owner's ``admit`` and ``peek``."""

    kind: str
    target: Any
    peek: Callable[[Callable[[Any], Any]], Any]  # run fn(party object) where the party lives; the evaluator's
    units: list[str] = field(default_factory=list)

    def admit(self, unit: str) -> PassiveClient:
        """The owner admits one more training (the attacker asked for it); the attacker's client of it."""
        self.units.append(unit)
        return PassiveClient.admit(self.target, owner=OWNER, unit=unit)


@contextmanager
def deployed(kind: str, X: np.ndarray = X_PASSIVE, **party_kwargs: Any) -> Iterator[Deployment]:
    """The party in-process (``local``), as a Ray ``PartyActor`` (``actor``; Ray must be running) or as an
    HTTP service in a thread of this process (``service``)."""
    kwargs = {"owner_secret": OWNER, "seed": 5, **party_kwargs}
    if kind == "local":
        party = PassiveParty(X, name="bank", **kwargs)
        yield Deployment(kind, party, lambda fn: fn(party))
    elif kind == "actor":
        import sys

        import ray
        from ray import cloudpickle

        from raytune_fed.federation.parties import remote_party

        cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the owner's reads run in the actor
        actor = remote_party(PassiveParty, "bank", X, **kwargs)
        try:
            yield Deployment(kind, actor, lambda fn: ray.get(actor.__ray_call__.remote(lambda a: fn(a._party))))
        finally:
            ray.kill(actor)
    elif kind == "service":
        from raytune_fed.federation._service import serve
        from raytune_fed.federation._transports import HttpTransport

        token = "active-token-" + "t" * 20
        server = serve(PassiveParty(X, name="bank", **kwargs), token=token)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            yield Deployment(kind, HttpTransport(server.url, token), lambda fn: fn(server.site))
        finally:
            server.shutdown()
            server.server_close()
    else:
        raise ValueError(f"unknown deployment {kind!r}")


# ---------------------------------------------------------------------------------------- the owner's truth

def _worker(party: Any, unit: str) -> Any:
    """The worker of the session admitted for ``unit`` (the owner reads its own party's state)."""
    keys = [s.key for s in party._sessions.values() if s.unit == unit]
    return party._workers[keys[-1]]


def true_bins(worker: Any) -> np.ndarray:
    """Every row's bin of every feature, ``(n_rows, n_features)``, in the session's binning."""
    if hasattr(worker, "_bins"):
        return np.asarray(worker._bins, dtype=np.int64)
    n_bins = worker._n_bins
    return np.asarray(worker._ids, dtype=np.int64) - np.arange(worker.n_features) * n_bins


def true_members(worker: Any, tree: int, rows: np.ndarray) -> np.ndarray:
    """Which of the session's masks each of ``rows`` falls into in ``tree``: ``(len(rows), n_masks)`` bools."""
    if hasattr(worker, "members"):
        return np.asarray(worker.members(tree, rows))
    ids = np.asarray(worker._ids)[rows]
    out = np.zeros((rows.size, worker.n_features * worker._n_bins), dtype=bool)
    out[np.repeat(np.arange(rows.size), ids.shape[1]), ids.ravel()] = True
    return out


# ---------------------------------------------------------------------------------------- the attacks

def _positions(noise: int, bits_h: int) -> list[int]:
    """Bit positions of the 59-bit packed value whose sums the attacker reads exactly past the party's noise.

    Without noise every bit.  With integer noise of half-width ``noise`` on each field (hessian field
    below ``bits_h``, gradient field above), a sum of distinct powers ``>= 2c`` (``2c > 2 noise``) is
    still read by rounding; the top bit of each field stays free so a negative noise cannot wrap."""
    if noise <= 0:
        return list(range(PLAIN_BITS))
    low = math.ceil(math.log2(2 * noise + 1)) + 1
    return list(range(low, bits_h - 1)) + list(range(bits_h + low, PLAIN_BITS - 1))


def _read(sums: np.ndarray, positions: list[int], noise: int, bits_h: int) -> np.ndarray:
    """The set bits at ``positions`` of each noisy sum (``uint64``), as ``(len(sums), len(positions))`` bools."""
    out = np.zeros((sums.size, len(positions)), dtype=bool)
    low = math.ceil(math.log2(2 * noise + 1)) + 1 if noise > 0 else 0
    for i, v in enumerate(int(s) for s in sums):
        if noise <= 0:
            value = v
        else:
            step = 1 << low
            field_h = v & ((1 << bits_h) - 1)
            signed_h = field_h - (1 << bits_h) if field_h >= (1 << bits_h) - step else field_h
            clean_h = round(signed_h / step) * step
            top = ((v >> bits_h) + (1 if signed_h < 0 else 0)) % (1 << (PLAIN_BITS - bits_h))
            signed_g = top - (1 << (PLAIN_BITS - bits_h)) if top >= (1 << (PLAIN_BITS - bits_h)) - step else top
            clean_g = (round(signed_g / step) * step) % (1 << (PLAIN_BITS - bits_h))
            value = (clean_g << bits_h) | (clean_h % (1 << bits_h))
        out[i] = [(value >> p) & 1 == 1 for p in positions]
    return out


def _session(dep: Deployment, unit: str, n_bins: int, scheme: str, rows: np.ndarray) -> tuple[Any, Any, int, Any]:
    keys = secret_context(scheme)
    client = dep.admit(unit)
    n_masks = client.open_session(keys.public_context(), n_bins, rows)
    return client, keys, n_masks, client.info()


def crafted_powers(dep: Deployment, *, n_bins: int = 32, scheme: str = "bfv", bits_h: int | None = None,
                   unit: str = "powers") -> dict[str, Any]:
    """One ``histograms`` request whose "gradients" are distinct powers of two, one node per group of rows.

    Each returned per-mask sum is the set of the node's rows in that mask: every row's bin of every
    feature.  Against a party that adds noise the attacker places its powers above it (it knows the
    noise width and the codec the party announces)."""
    n = dep.peek(lambda p: p.n_rows)
    client, keys, n_masks, info = _session(dep, unit, n_bins, scheme, np.arange(n, dtype=np.int64))
    noise = int(getattr(info, "noise", 0) or 0)
    bits_h = int(getattr(info, "bits_h", 0) or (bits_h or 0))
    positions = _positions(noise, bits_h)
    chunks = [np.arange(lo, min(lo + len(positions), n), dtype=np.int64) for lo in range(0, n, len(positions))]
    queries, layouts = [], []
    for t, rows in enumerate(chunks):
        values = np.array([1 << p for p in positions[:rows.size]], dtype=np.uint64)
        layout = Layout(rows.size, n_masks, choose_block(rows.size, n_masks))
        layouts.append(layout)
        queries.append(NodeQuery(0, -1, rows=rows, gh=keys.encrypt(values, layout), block=layout.block, tree=t))
    try:
        replies = client.histograms(queries)
    except QueryRefusedError as exc:
        return {"refused": getattr(exc, "code", "?"), "rows_recovered": 0, "n_rows": n}
    recovered, bits_right, bits_total = 0, 0, 0
    for t, (rows, layout, reply) in enumerate(zip(chunks, layouts, replies)):
        sums = keys.decrypt_sums(reply, layout)
        read = _read(sums, positions[:rows.size], noise, bits_h).T  # (rows, masks): row j in mask?
        truth = dep.peek(lambda p, t=t, rows=rows: true_members(_worker(p, unit), t, rows))
        recovered += int(np.sum(np.all(read == truth, axis=1)))
        bits_right += int(np.sum(read == truth))
        bits_total += truth.size
    return {"requests": 1, "nodes": len(chunks), "rows_per_node": len(positions), "n_rows": n,
            "rows_recovered": recovered, "membership_bits_right": bits_right / bits_total, "noise": noise}


def _split_attack(client: Any, keys: Any, n: int, n_masks: int, n_bins: int) -> np.ndarray | str:
    """Fresh trees whose roots hold every row, each split at a different (feature, bin) mask; each row's
    bin guessed as the lowest bin whose left side holds it (a refusal code if refused).

    Mask (f, k) is ``f * K + k`` on d8d2749 (a mask per bin) and ``f * (K - 1) + k`` now (a mask per
    threshold, in the party's order): the attacker names it as the protocol it talks to lays masks out."""
    n_features = client.info().n_features
    per_feature = n_masks // n_features
    rows = np.arange(n, dtype=np.int64)
    layout = Layout(n, n_masks, choose_block(n, n_masks))
    zeros = keys.encrypt(np.zeros(n, dtype=np.uint64), layout)
    picks = [(f * (n_bins - 1) + k, f, k) for f in range(n_features) for k in range(n_bins - 1)]
    try:
        client.histograms([NodeQuery(0, -1, rows=rows, gh=zeros, block=layout.block, tree=t) for t, _, _ in picks])
        lefts = client.splits([(t, 0, f * per_feature + k) for t, f, k in picks])
    except QueryRefusedError as exc:
        return getattr(exc, "code", "?")
    guess = np.full((n, n_features), n_bins - 1)
    for (_, f, k), left in zip(picks[::-1], lefts[::-1]):  # the lowest k whose left side holds the row wins
        guess[np.asarray(left, dtype=np.int64), f] = k
    return guess


def split_masks(dep: Deployment, *, n_bins: int = 32, unit: str = "masks") -> dict[str, Any]:
    """Every (feature, bin) mask on a fresh tree whose root holds every row: no crafted gradients (zeros),
    two requests (all roots, then all splits).  The left rows of mask (f, k) are the rows with bin <= k."""
    n = dep.peek(lambda p: p.n_rows)
    client, keys, n_masks, _ = _session(dep, unit, n_bins, "plain", np.arange(n, dtype=np.int64))
    guess = _split_attack(client, keys, n, n_masks, n_bins)
    out: dict[str, Any] = {"requests": 2, "trees": client.info().n_features * (n_bins - 1), "n_rows": n}
    if isinstance(guess, str):
        return {**out, "refused": guess, "bins_right": 0.0, "rows_all_bins_right": 0}
    truth = dep.peek(lambda p: true_bins(_worker(p, unit)))
    right = guess == truth
    majority = np.mean([np.mean(truth[:, f] == np.bincount(truth[:, f]).argmax()) for f in range(truth.shape[1])])
    return {**out, "bins_right": float(right.mean()), "rows_all_bins_right": int(np.all(right, axis=1).sum()),
            "majority_bin_share": float(majority), "guess": guess}


def value_from_bins(bins: np.ndarray, x: np.ndarray, n_bins: int) -> dict[str, float]:
    """How well bin indices place each row's value: the estimate ``(bin + 1/2) / K`` of its position in the
    range, and the best straight line from bin to value (fitted on the truth: the attacker's upper bound)."""
    position = (x - x.min()) / (x.max() - x.min())
    estimate = (bins + 0.5) / n_bins
    slope, intercept = np.polyfit(bins, position, 1)
    fitted = np.abs(slope * bins + intercept - position)
    return {"r": float(np.corrcoef(bins, x)[0, 1]),
            "median_error_of_range": float(np.median(np.abs(estimate - position))),
            "max_error_of_range": float(np.max(np.abs(estimate - position))),
            "best_line_median_error_of_range": float(np.median(fitted))}


def shrunken_bins(dep: Deployment, *, feature: int = 0, n_bins: int = 256, unit: str = "shrunk") -> dict[str, Any]:
    """A training opened with ``train_rows = [argmin x, argmax x]`` and 256 bins: quantile edges of two rows
    are a uniform grid over the whole range, applied to every row, so each row's bin is its value.

    The attacker learns the two rows with the split-mask attack in a first training (all rows, the same
    bin count, or the party's cap), opens the second and reads every row's bin with the split-mask
    attack again.  ``handed_over`` scores the bins the party really used (as if the attacker had read
    them all: what the binning alone gives away)."""
    n = dep.peek(lambda p: p.n_rows)
    x = dep.peek(lambda p: np.asarray(p._X[:, feature]))
    keys = secret_context("plain")
    out: dict[str, Any] = {"n_rows": n, "n_bins_asked": n_bins}

    def opened(name: str, rows: np.ndarray) -> tuple[Any, int, int, str]:
        client = dep.admit(name)
        try:
            return client, client.open_session(keys.public_context(), n_bins, rows), n_bins, name
        except QueryRefusedError as exc:  # the party caps the bins: take what it allows, in a new training
            out["refused_n_bins"] = getattr(exc, "code", "?")
            allowed = dep.peek(lambda p: getattr(p, "_max_bins", n_bins))
            client = dep.admit(name + "-capped")
            return client, client.open_session(keys.public_context(), allowed, rows), allowed, name + "-capped"

    client, n_masks, used, _ = opened(unit + "-ranks", np.arange(n, dtype=np.int64))
    ranks = _split_attack(client, keys, n, n_masks, used)
    if isinstance(ranks, str):
        out["ranks_refused"] = ranks
        ranks = np.zeros((n, n_masks // used), dtype=np.int64)
    low, high = int(np.argmin(ranks[:, feature])), int(np.argmax(ranks[:, feature]))
    extremes = np.array(sorted({low, high}), dtype=np.int64)
    out["extremes_right"] = bool(set(extremes.tolist()) == {int(np.argmin(x)), int(np.argmax(x))})
    client, n_masks, used, name = opened(unit, extremes)
    out.update({"train_rows": extremes.tolist(), "n_bins_used": used})
    read = _split_attack(client, keys, n, n_masks, used)
    if isinstance(read, str):
        out["read_refused"] = read
    else:
        out["read"] = value_from_bins(read[:, feature], x, used)
    out["handed_over"] = value_from_bins(dep.peek(lambda p: true_bins(_worker(p, name))[:, feature]), x, used)
    return out
