"""The instance clustering attack (Algorithm 2, eq. 3) and the privacy leakage (eq. 6).

The attacker is a passive party and uses only its :class:`PassiveView`: per federated
tree, the finest partition of training rows it can infer.  On a class-balanced sample
``I_pl`` of training rows:

1. similarity (eq. 3): ``sim(a, b)`` = share of the trees seen so far in which ``a`` and
   ``b`` fall in the same cell (plus the identity, so every row is similar to itself);
2. spectral clustering of ``sim`` into as many clusters as classes (scikit-learn's recipe:
   the normalised Laplacian's eigenvectors of the smallest eigenvalues, ``cluster_qr``
   labelling; :func:`spectral_clusters`);
3. each cluster takes the label of one instance in it whose label the attacker knows
   (``known_per_cluster`` > 1: the majority of that many known labels, the stronger
   attacker of the authors' code).

``eps_p`` is the attack's accuracy on the sample (eq. 6), computed after every federated
round on the trees seen so far and maximised over rounds (Algorithm 4, line 21).  With
nothing seen (every node kept local), the attacker can only guess: ``1 / n_classes``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.linalg
from scipy.sparse import csgraph
from threadpoolctl import threadpool_limits

from raytune_fed._checks import check_int
from raytune_fed.errors import ConfigError
from raytune_fed.random import Seed, as_generator, derive, seed_int

N_SAMPLE = 1000


def balanced_sample(labels: np.ndarray, rows: np.ndarray, n_sample: int, seed: Seed) -> np.ndarray:
    """Sorted ids of ``n_sample // n_classes`` rows of every class (fewer if a class is smaller)."""
    labels, rows = np.asarray(labels), np.asarray(rows)
    classes = np.unique(labels)
    per_class = max(1, n_sample // classes.size)
    rng = as_generator(seed)
    picked = [rng.choice(rows[labels == c], min(per_class, int(np.sum(labels == c))), replace=False)
              for c in classes]
    return np.sort(np.concatenate(picked))


def cooccurrence(cells: Sequence[np.ndarray], sample: np.ndarray) -> np.ndarray:
    """``(n, n)`` 0/1 matrix: do two sample rows share a cell of this partition?"""
    where = np.full(sample.size, -1, dtype=np.int64)
    for c, cell in enumerate(cells):
        hit = np.isin(sample, cell, assume_unique=True)
        where[hit] = c
    known = where >= 0
    Z = np.zeros((sample.size, len(cells)), dtype=np.float32)
    Z[np.flatnonzero(known), where[known]] = 1.0
    return Z @ Z.T


def spectral_clusters(affinity: np.ndarray, n_clusters: int) -> np.ndarray:
    """Spectral clustering of a symmetric non-negative ``affinity`` into ``n_clusters`` labels.

    scikit-learn's recipe (``SpectralClustering(affinity="precomputed",
    assign_labels="cluster_qr")``): the eigenvectors of the normalised Laplacian's
    ``n_clusters`` smallest eigenvalues, divided by the square roots of the degrees, labelled
    by ``cluster_qr`` (Damle, Minden and Ying 2019).  The eigenvectors come from a dense
    symmetric eigensolver (LAPACK ``syevr``) on one thread, not ARPACK: with few trees the
    graph falls apart into many components and the eigenvalue 0 repeats, and ARPACK (scipy
    1.17, scikit-learn's solver) then returned another basis of that eigenspace on every call
    with the same matrix and start vector, so the same view gave another eps_p from one
    trial to the next.  ``syevr`` gives the same basis for the same matrix, and the exact
    one: a graph of ``n_clusters`` components is split into them (ARPACK missed a component
    of one row).

    A graph of *more* components than clusters has the eigenvalue 0 more often than
    ``n_clusters`` times, and the recipe is then undefined: any ``n_clusters`` vectors of that
    eigenspace are "the" eigenvectors, and which ones LAPACK returns depends on the CPU's
    BLAS kernel (the same view gave eps_p 0.507, 0.533, 0.540 and 0.567 under OpenBLAS's
    Prescott, SkylakeX, Haswell and Sandybridge kernels).  Every grouping of whole components
    then has normalised cut 0, so each is optimal for the objective spectral clustering
    relaxes; :func:`component_clusters` picks the most balanced one by exact integer rules.
    """
    affinity = np.asarray(affinity, dtype=np.float64)
    n_components, component = csgraph.connected_components(affinity > 0, directed=False)
    if n_components > n_clusters:
        return component_clusters(component, n_clusters)
    with threadpool_limits(limits=1):
        laplacian, sqrt_degree = csgraph.laplacian(affinity, normed=True, return_diag=True)
        _, vectors = scipy.linalg.eigh(laplacian, subset_by_index=[0, n_clusters - 1], driver="evr")
        embedding = vectors / sqrt_degree[:, None]
        _, _, pivots = scipy.linalg.qr(embedding.T, pivoting=True)
        u, _, vt = scipy.linalg.svd(embedding[pivots[:n_clusters], :].T)
        return np.abs(embedding @ (u @ vt)).argmax(axis=1)


def component_clusters(component: np.ndarray, n_clusters: int) -> np.ndarray:
    """Whole components grouped into ``n_clusters`` clusters of sizes as equal as greedy packing makes them.

    Components are taken largest first (ties: the one holding the lowest row), each into the
    cluster that is smallest so far (ties: the lowest cluster); so the ``n_clusters`` largest
    components seed one cluster each, and the result depends on the graph alone.  The
    attack's sample is class-balanced, so balanced clusters are the prior it has.
    """
    component = np.asarray(component, dtype=np.int64)
    sizes = np.bincount(component)
    first_row = np.full(sizes.size, component.size, dtype=np.int64)
    np.minimum.at(first_row, component, np.arange(component.size))
    order = np.lexsort((first_row, -sizes))
    cluster_of = np.empty(sizes.size, dtype=np.int64)
    filled = np.zeros(n_clusters, dtype=np.int64)
    for comp in order:
        target = int(np.argmin(filled))
        cluster_of[comp] = target
        filled[target] += sizes[comp]
    return cluster_of[component]


def cluster_and_label(similarity: np.ndarray, true_labels: np.ndarray, n_classes: int, known_per_cluster: int,
                      seed: Seed) -> np.ndarray:
    """Algorithm 2, lines 2-7: spectral clusters (:func:`spectral_clusters`), each labelled from known
    instances in it."""
    rng = as_generator(seed)
    seed_int(rng)  # this draw seeded ARPACK's start vector; still drawn, so the known instances below are as before
    clusters = spectral_clusters(similarity, n_classes)
    predicted = np.empty_like(true_labels)
    for c in np.unique(clusters):
        members = np.flatnonzero(clusters == c)
        known = rng.choice(members, min(known_per_cluster, members.size), replace=False)
        counts = np.bincount(true_labels[known], minlength=n_classes)
        predicted[members] = int(np.argmax(counts))
    return predicted


@dataclass(frozen=True)
class Leakage:
    """``value`` = eps_p (max over rounds); ``per_round`` = accuracy after each federated round seen."""

    value: float
    per_round: tuple[tuple[int, float], ...]
    n_sample: int


def privacy_leakage(view: Any, labels: np.ndarray, *, n_outputs: int = 1, rows: np.ndarray | None = None,
                    n_sample: int = N_SAMPLE, known_per_cluster: int = 1, every_round: bool = True,
                    seed: Seed = 0) -> Leakage:
    """eps_p of ``view`` (eq. 6); ``labels[i]`` is the true class code of global row id ``rows[i]``.

    ``view`` is a :class:`PassiveView` or anything with its ``partitions()`` method (a
    party's view record).  ``rows`` defaults to ``0 .. len(labels) - 1``; ``n_outputs`` is
    trees per round (one per class for multi-class), so tree ``t`` belongs to round
    ``t // n_outputs``.  ``every_round=False`` attacks only after the last round (faster;
    a lower bound of eps_p).
    """
    labels = np.asarray(labels)
    rows = np.arange(labels.size) if rows is None else np.asarray(rows)
    if rows.shape != labels.shape or labels.ndim != 1:
        raise ConfigError(f"labels and rows must be 1-D of equal length, got {labels.shape} and {rows.shape}")
    check_int("n_sample", n_sample, 2)
    check_int("known_per_cluster", known_per_cluster, 1)
    check_int("n_outputs", n_outputs, 1)
    classes = np.unique(labels)
    sample = balanced_sample(labels, rows, n_sample, derive(seed, "sample"))
    truth = np.searchsorted(classes, labels[np.searchsorted(rows, sample)])
    by_round: dict[int, list[list[np.ndarray]]] = {}
    for tree, cells in view.partitions():
        by_round.setdefault(tree // n_outputs, []).append(cells)
    if not by_round:
        return Leakage(1.0 / classes.size, (), sample.size)
    sim = np.zeros((sample.size, sample.size), dtype=np.float64)
    n_trees, per_round = 0, []
    for rnd in sorted(by_round):
        for cells in by_round[rnd]:
            sim += cooccurrence(cells, sample)
            n_trees += 1
        if not every_round and rnd != max(by_round):
            continue
        affinity = sim / n_trees + np.eye(sample.size)
        predicted = cluster_and_label(affinity, truth, classes.size, known_per_cluster, derive(seed, "cluster", rnd))
        per_round.append((rnd, float(np.mean(predicted == truth))))
    return Leakage(max(acc for _, acc in per_round), tuple(per_round), sample.size)
