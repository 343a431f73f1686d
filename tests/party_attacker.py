"""A deviating active party against a SecureBoost passive party, and the party in three deployments.

The attacker is the active party of trainings the passive party's owner admitted: it holds
session tokens, its own key pair and the (public) protocol, and sends hand-made requests
through :class:`PassiveClient` over whatever transport reaches the party.  It does not know
the passive party's feature values.  Each attack returns what it recovered; the evaluator
(:class:`Deployment.peek`, playing the party's owner) reads the truth from the party object
where it runs and scores it.  Only the protocol is used, so the same attacks run against
any revision (the one-off ``attacks_on_d8d2749_party.py``, in git history, ran them on the code of d8d2749).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

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
        from raytune_fed.serve import HttpTransport, serve

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


def used_bins(worker: Any) -> np.ndarray:
    """Every row's bin of every feature, ``(n_rows, n_features)``, as the session's answers use them."""
    if hasattr(worker, "_bins"):
        return np.asarray(worker._bins, dtype=np.int64)
    return np.asarray(worker._ids, dtype=np.int64) - np.arange(worker.n_features) * worker._n_bins


def true_bins(worker: Any) -> np.ndarray:
    """Every row's bin of every feature by its value (what a mechanism on the bins hides), ``(n_rows, n_features)``."""
    from raytune_fed.models.secureboost._binning import apply_bins

    if hasattr(worker, "_bins"):
        return np.asarray(apply_bins(worker._X, worker._edges), dtype=np.int64)
    return used_bins(worker)


def bins_of_members(worker: Any, tree: int, members: np.ndarray) -> np.ndarray:
    """The bins that masks memberships ``(rows, n_masks)`` spell, once each mask is labelled (the attacker's
    best case: telling a tree's masks apart and ordering them from what it read)."""
    k = worker._n_bins
    if hasattr(worker, "_trees"):  # a mask per threshold, in the tree's order: bin = thresholds not reached
        per_candidate = members[:, worker._trees[tree].slot_of].reshape(members.shape[0], -1, k - 1)
        return (k - 1) - per_candidate.sum(axis=2)
    return members.reshape(members.shape[0], -1, k).argmax(axis=2)  # a mask per bin


def true_members(worker: Any, tree: int, rows: np.ndarray) -> np.ndarray:
    """Which of the session's masks each of ``rows`` falls into in ``tree``: ``(len(rows), n_masks)`` bools."""
    if hasattr(worker, "members"):
        return np.asarray(worker.members(tree, rows))
    ids = np.asarray(worker._ids)[rows]
    out = np.zeros((rows.size, worker.n_features * worker._n_bins), dtype=bool)
    out[np.repeat(np.arange(rows.size), ids.shape[1]), ids.ravel()] = True
    return out


# ---------------------------------------------------------------------------------------- the attacks

def _read(sums: np.ndarray, n_rows: int) -> np.ndarray:
    """Bit ``j`` of each per-mask sum (``uint64``): row ``j`` of the node is in that mask; ``(n_masks, n_rows)``."""
    sums = np.asarray(sums, dtype=np.uint64)
    return ((sums[:, None] >> np.arange(n_rows, dtype=np.uint64)) & np.uint64(1)).astype(bool)


def _session(dep: Deployment, unit: str, n_bins: int, scheme: str, rows: np.ndarray) -> tuple[Any, Any, int, Any]:
    keys = secret_context(scheme)
    client = dep.admit(unit)
    terms = client.open_session(keys.public_context(), n_bins, rows)
    return client, keys, getattr(terms, "n_masks", terms), client.info()  # d8d2749 answered the mask count


def crafted_powers(dep: Deployment, *, n_bins: int = 32, scheme: str = "bfv", unit: str = "powers") -> dict[str, Any]:
    """One ``histograms`` request whose "gradients" are distinct powers of two, a fresh tree per 59 rows.

    Each returned per-mask sum is, bit by bit, the set of the node's rows in that mask: every row's
    mask of every feature (bins on d8d2749; thresholds in the tree's order now)."""
    n = dep.peek(lambda p: p.n_rows)
    client, keys, n_masks, _ = _session(dep, unit, n_bins, scheme, np.arange(n, dtype=np.int64))
    chunks = [np.arange(lo, min(lo + PLAIN_BITS, n), dtype=np.int64) for lo in range(0, n, PLAIN_BITS)]
    queries, layouts = [], []
    for t, rows in enumerate(chunks):
        layout = Layout(rows.size, n_masks, choose_block(rows.size, n_masks))
        layouts.append(layout)
        values = np.left_shift(np.uint64(1), np.arange(rows.size, dtype=np.uint64))
        queries.append(NodeQuery(0, -1, rows=rows, gh=keys.encrypt(values, layout), block=layout.block, tree=t))
    try:
        replies = client.histograms(queries)
    except QueryRefusedError as exc:
        return {"refused": getattr(exc, "code", "?"), "rows_read": 0, "n_rows": n}
    reads = [_read(keys.decrypt_sums(reply, layout), rows.size).T
             for rows, layout, reply in zip(chunks, layouts, replies)]
    return {"requests": 1, "nodes": len(chunks), "n_rows": n, **_score(dep, unit, chunks, reads)}


def _score(dep: Deployment, unit: str, chunks: list[np.ndarray], reads: list[np.ndarray]) -> dict[str, Any]:
    """Rows whose every mask membership the attacker read as the party used it, and how many bins of the
    values that spells (each tree ``t`` of ``chunks[t]`` labelled as the party labels it)."""

    def owner(p: Any) -> dict[str, Any]:
        worker = _worker(p, unit)
        exact, right, rows_right, total = 0, 0, 0, 0
        for t, (rows, read) in enumerate(zip(chunks, reads)):
            exact += int(np.all(read == true_members(worker, t, rows), axis=1).sum())
            ok = bins_of_members(worker, t, read) == true_bins(worker)[rows]
            right, rows_right, total = right + int(ok.sum()), rows_right + int(ok.all(axis=1).sum()), total + ok.size
        return {"rows_read": exact, "value_bins_right": right / total, "rows_all_value_bins_right": rows_right}

    return dep.peek(owner)


def _split_attack(client: Any, keys: Any, n: int, n_masks: int, n_bins: int) -> tuple[np.ndarray | str, int]:
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
    except QueryRefusedError as exc:
        return getattr(exc, "code", "?"), 1
    named = [(t, 0, f * per_feature + k) for t, f, k in picks]
    requests = 2
    try:
        lefts = client.splits(named)
    except QueryRefusedError as exc:
        requests += len(named)  # one pick the party would not apply spoils the request: one at a time
        lefts = []
        for pick in named:
            try:
                lefts.extend(client.splits([pick]))
            except QueryRefusedError:
                lefts.append(None)
        if all(left is None for left in lefts):
            return getattr(exc, "code", "?"), requests
    guess = np.full((n, n_features), n_bins - 1)
    for (_, f, k), left in zip(picks[::-1], lefts[::-1]):  # the lowest k whose left side holds the row wins
        if left is not None:
            guess[np.asarray(left, dtype=np.int64), f] = k
    return guess, requests


def split_masks(dep: Deployment, *, n_bins: int = 32, unit: str = "masks") -> dict[str, Any]:
    """Every (feature, bin) mask on a fresh tree whose root holds every row: no crafted gradients (zeros),
    two requests (all roots, then all splits; the splits one by one if the party refuses the batch).  The
    left rows of mask (f, k) are the rows with bin <= k."""
    n = dep.peek(lambda p: p.n_rows)
    client, keys, n_masks, _ = _session(dep, unit, n_bins, "plain", np.arange(n, dtype=np.int64))
    guess, requests = _split_attack(client, keys, n, n_masks, n_bins)
    out: dict[str, Any] = {"requests": requests, "trees": client.info().n_features * (n_bins - 1), "n_rows": n}
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
            terms = client.open_session(keys.public_context(), n_bins, rows)
            return client, getattr(terms, "n_masks", terms), n_bins, name
        except QueryRefusedError as exc:  # the party caps the bins: take what it allows, in a new training
            out["refused_n_bins"] = getattr(exc, "code", "?")
            allowed = dep.peek(lambda p: getattr(p, "_max_bins", n_bins))
            client = dep.admit(name + "-capped")
            terms = client.open_session(keys.public_context(), allowed, rows)
            return client, getattr(terms, "n_masks", terms), allowed, name + "-capped"

    client, n_masks, used, _ = opened(unit + "-ranks", np.arange(n, dtype=np.int64))
    ranks, _ = _split_attack(client, keys, n, n_masks, used)
    if isinstance(ranks, str):
        out["ranks_refused"] = ranks
        ranks = np.zeros((n, n_masks // used), dtype=np.int64)
    low, high = int(np.argmin(ranks[:, feature])), int(np.argmax(ranks[:, feature]))
    extremes = np.array(sorted({low, high}), dtype=np.int64)
    out["extremes_right"] = bool(set(extremes.tolist()) == {int(np.argmin(x)), int(np.argmax(x))})
    client, n_masks, used, name = opened(unit, extremes)
    out.update({"train_rows": extremes.tolist(), "n_bins_used": used})
    read, _ = _split_attack(client, keys, n, n_masks, used)
    if isinstance(read, str):
        out["read_refused"] = read
    else:
        out["read"] = value_from_bins(read[:, feature], x, used)
    out["handed_over"] = value_from_bins(dep.peek(lambda p: used_bins(_worker(p, name))[:, feature]), x, used)
    return out


class _NoiseReader:
    """The key holder's arithmetic on BFV ciphertexts (the attacker's own tools; SEAL's NTT through ``sealapi``).

    For a ciphertext ``(c0, c1)`` under secret key ``s`` the *phase* ``c0 + c1 s = Delta m + v`` carries
    the noise ``v``; the attacker knows it for every ciphertext it made.  A histogram result of a one-block
    node whose values encrypt zero is ``ct * P + scaled(R)``: its phase is ``v P + scaled(R)`` with ``R``
    the decrypted plaintext, so ``P = (phase - scaled(R)) / v`` in the NTT domain.
    """

    def __init__(self, keys: Any) -> None:
        self.seal = keys._seal
        self.n = self.seal.poly_degree
        self.q = [m.value() for m in self.seal.context.first_context_data().parms().coeff_modulus()]
        self.t = self.seal.plain_modulus
        secret = keys._ts.secret_key().data.data()  # NTT form, one row per prime of the key level
        self.s = [np.array([secret[j * self.n + i] for i in range(self.n)], dtype=object) for j in range(len(self.q))]
        big_q = math.prod(self.q)
        self.delta, self.q_mod_t = big_q // self.t, big_q % self.t

    def _residues(self, ct: Any) -> np.ndarray:
        d = ct.dyn_array()
        return np.array([d.at(i) for i in range(ct.size() * len(self.q) * self.n)], dtype=object).reshape(
            ct.size(), len(self.q), self.n)

    def _ciphertext(self, c0: list[np.ndarray], ntt: bool) -> Any:
        import struct

        from raytune_fed.crypto._seal import _scratch

        k = len(self.q)
        data = np.concatenate([np.asarray(np.stack(c0), dtype=np.uint64).ravel(), np.ones(self.n * k, np.uint64)])
        inner = self.seal._seal_header(24 + 8 * data.size) + struct.pack("<Q", data.size) + data.tobytes()
        body = struct.pack("<4QB3QdQ", *self.seal.parms_id, int(ntt), 2, self.n, k, 1.0, 1) + inner
        path = _scratch("attack")
        with open(path, "wb") as fh:
            fh.write(self.seal._seal_header(16 + len(body)) + body)
        ct = self.seal.s.Ciphertext()
        ct.load(self.seal.context, path)
        return ct

    def _phase_ntt(self, ct: Any) -> list[np.ndarray]:
        out = self.seal.s.Ciphertext()
        self.seal.evaluator.transform_to_ntt(ct, out)
        r = self._residues(out)
        return [(r[0, j] + r[1, j] * self.s[j]) % q for j, q in enumerate(self.q)]

    def masks(self, sent: Any, result: Any) -> np.ndarray:
        """The mask polynomial ``P`` of ``result`` (coefficients mod the first prime)."""
        pt = self.seal.s.Plaintext()
        self.seal.decryptor.decrypt(result, pt)
        plain = [pt[i] for i in range(pt.coeff_count())] + [0] * (self.n - pt.coeff_count())
        scaled = [self.delta * m + (m * self.q_mod_t + (self.t + 1) // 2) // self.t for m in plain]
        ct = self._ciphertext([np.array([x % q for x in scaled], dtype=np.uint64) for q in self.q], ntt=False)
        self.seal.evaluator.transform_to_ntt_inplace(ct)
        scaled_ntt = self._residues(ct)[0]
        v, phase = self._phase_ntt(sent), self._phase_ntt(result)
        p_ntt = [np.array([(int(a) - int(b)) * pow(int(c), -1, q) % q
                           for a, b, c in zip(phase[j], scaled_ntt[j], v[j])], dtype=np.uint64)
                 for j, q in enumerate(self.q)]
        ct = self._ciphertext(p_ntt, ntt=True)
        self.seal.evaluator.transform_from_ntt_inplace(ct)
        return np.array(self._residues(ct)[0, 0], dtype=object)


def decrypted_noise(dep: Deployment, *, n_bins: int = 32, unit: str = "noise") -> dict[str, Any]:
    """One ``histograms`` request of zeros in one block (BFV): the masks come back in the results' noise.

    The sums are all zero; the attacker ignores them and divides each result's noise by its own."""
    n = min(dep.peek(lambda p: p.n_rows), 4096)
    client, keys, n_masks, _ = _session(dep, unit, n_bins, "bfv", np.arange(n, dtype=np.int64))
    rows = np.arange(n, dtype=np.int64)
    block = 1 << max(0, (n - 1).bit_length())
    layout = Layout(n, n_masks, block)
    gh = keys.encrypt(np.zeros(n, dtype=np.uint64), layout)
    try:
        (reply,) = client.histograms([NodeQuery(0, -1, rows=rows, gh=gh, block=block, tree=0)])
    except QueryRefusedError as exc:
        return {"refused": getattr(exc, "code", "?"), "rows_read": 0, "n_rows": n}
    reader = _NoiseReader(keys)
    sent = keys._seal.ciphertext(gh.blobs[0])
    read = np.zeros((n, layout.n_groups * layout.masks_per_product), dtype=bool)
    zero_one = 0
    for g, blob in enumerate(reply.blobs):
        if not blob:
            continue
        poly = reader.masks(sent, keys._seal.ciphertext(blob)).reshape(layout.masks_per_product, block)
        zero_one += int(np.isin(poly, (0, 1)).sum())
        read[:, g * layout.masks_per_product:(g + 1) * layout.masks_per_product] = \
            (poly[:, block - 1 - rows] == 1).T
    return {"requests": 1, "nodes": 1, "n_rows": n, "coefficients_0_or_1": zero_one / (len(reply.blobs) * reader.n),
            **_score(dep, unit, [rows], [read[:, :n_masks]])}
