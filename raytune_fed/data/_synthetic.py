"""Generated datasets: CMOSB's Synthetic1/2 and ``geo5_sim``, a stand-in for RFMS's GEO sites.

Everything here is deterministic: each generator draws from its own
``numpy.random.default_rng`` seeded by a module constant (child streams come from
``numpy.random.SeedSequence(seed).spawn``), never from a global random state.

``geo5_sim`` imitates the five GEO breast-cancer studies used by the RFMS paper
(response to neoadjuvant chemotherapy, pCR vs residual disease) without using their
data, which are not available offline.  What it keeps from them:

* five sites of 114, 211, 178, 115 and 161 patients and 1,000 expression features
  (p >> n), on a log2-like scale (gene means between 4 and 12);
* a pCR (positive) rate near 30 % that differs from site to site;
* a shared low-rank correlation structure: genes belong to co-expressed modules driven
  by a few latent factors, as gene modules are;
* batch effects: every site (chip type, lab) shifts each gene's mean and rescales its
  spread;
* labelling that differs between sites: the class-mean difference is a shared
  direction plus a site-specific perturbation, so a model fitted on one site transfers
  only partly to another.

The signal is tuned so that 5-fold L2 logistic regression within a site reaches an AUC
of roughly 0.65-0.85, while training on one site and testing on another is clearly
worse (``tests/test_datasets.py`` checks both).
"""

from __future__ import annotations

import numpy as np

from raytune_fed.data._validate import Dataset

SYNTHETIC1_SEED = 20230101
SYNTHETIC2_SEED = 20230102
GEO5_SEED = 20190125

GEO5_SITE_NAMES = ("GSE16446_sim", "GSE20194_sim", "GSE20271_sim", "GSE32646_sim", "GSE6861_sim")
GEO5_SITE_SIZES = (114, 211, 178, 115, 161)
GEO5_POSITIVE_RATES = (0.22, 0.27, 0.30, 0.35, 0.32)
GEO5_N_FEATURES = 1000

# Shape of the simulated biology; changing any of these changes the data.
_N_MODULES = 10  # latent factors (gene modules)
_MODULE_FRACTION = 0.5  # share of genes that belong to a module
_N_SHARED_MARKERS = 40  # genes whose mean differs between classes at every site
_N_SITE_MARKERS = 25  # extra genes per site that carry signal only there
_SHARED_EFFECT = 0.37  # class-mean shift of a shared marker, in noise sd units
_SITE_EFFECT = 0.37  # class-mean shift of a site-only marker
_EFFECT_JITTER = 0.5  # sd of the per-site multiplicative jitter on shared effects
_MODULE_EFFECT = 0.35  # class shift of the first two latent factors
_BATCH_SHIFT_SD = 0.6  # per-site, per-gene mean offset (log2 units)
_BATCH_LOG_SCALE_SD = 0.25  # per-site, per-gene log spread factor


def load_synthetic1() -> Dataset:
    """CMOSB's Synthetic1: 2,000 x 10, two classes (``make_classification``).

    The paper gives the shape; the other arguments are those of the authors' code (all
    ten features informative, none redundant, three clusters per class), which decide
    how well the instance clustering attack works.
    """
    from sklearn.datasets import make_classification

    X, y = make_classification(
        n_samples=2000, n_features=10, n_informative=10, n_redundant=0, n_classes=2,
        n_clusters_per_class=3, class_sep=1.0, flip_y=0.01, random_state=SYNTHETIC1_SEED,
    )
    return _from_codes(
        "synthetic1", X, y, 2,
        "generated: sklearn make_classification(n_samples=2000, n_features=10, n_informative=10, "
        f"n_redundant=0, n_clusters_per_class=3, flip_y=0.01, random_state={SYNTHETIC1_SEED})",
    )


def load_synthetic2() -> Dataset:
    """CMOSB's Synthetic2: 10,000 x 10 with ten classes (``make_classification``, the
    authors' arguments: all features informative, one cluster per class)."""
    from sklearn.datasets import make_classification

    X, y = make_classification(
        n_samples=10000, n_features=10, n_informative=10, n_redundant=0, n_classes=10,
        n_clusters_per_class=1, class_sep=1.0, flip_y=0.01, random_state=SYNTHETIC2_SEED,
    )
    return _from_codes(
        "synthetic2", X, y, 10,
        "generated: sklearn make_classification(n_samples=10000, n_features=10, "
        "n_informative=10, n_redundant=0, n_classes=10, n_clusters_per_class=1, "
        f"flip_y=0.01, random_state={SYNTHETIC2_SEED})",
    )


def _from_codes(name: str, X: np.ndarray, y: np.ndarray, n_classes: int, source: str) -> Dataset:
    return Dataset(
        name=name,
        X=np.asarray(X, dtype=np.float64),
        y=np.asarray(y, dtype=np.int64),
        feature_names=tuple(f"x{j + 1}" for j in range(X.shape[1])),
        class_names=tuple(str(k) for k in range(n_classes)),
        source=source,
    )


def generate_geo5_sim() -> Dataset:
    """Build ``geo5_sim`` (779 x 1000, five sites, binary pCR label); see the module docstring."""
    n_sites = len(GEO5_SITE_SIZES)
    p = GEO5_N_FEATURES
    shared_seq, *site_seqs = np.random.SeedSequence(GEO5_SEED).spawn(1 + n_sites)
    rng = np.random.default_rng(shared_seq)

    # Gene-level constants shared by all sites.
    gene_mean = rng.uniform(4.0, 12.0, size=p)
    gene_sd = rng.uniform(0.3, 1.2, size=p)
    module_of = np.where(rng.random(p) < _MODULE_FRACTION, rng.integers(0, _N_MODULES, size=p), -1)
    loadings = np.zeros((p, _N_MODULES))
    in_module = module_of >= 0
    loadings[in_module, module_of[in_module]] = rng.normal(0.9, 0.25, size=in_module.sum()) * rng.choice(
        [-1.0, 1.0], size=in_module.sum())
    markers = rng.choice(p, size=_N_SHARED_MARKERS, replace=False)
    shared_effect = np.zeros(p)
    shared_effect[markers] = _SHARED_EFFECT * rng.choice([-1.0, 1.0], size=_N_SHARED_MARKERS)
    factor_effect = np.zeros(_N_MODULES)
    factor_effect[:2] = _MODULE_EFFECT * np.array([1.0, -1.0])

    blocks_X, blocks_y, blocks_site = [], [], []
    for s, (n_rows, rate, seq) in enumerate(zip(GEO5_SITE_SIZES, GEO5_POSITIVE_RATES, site_seqs)):
        site_rng = np.random.default_rng(seq)
        n_pos = int(round(rate * n_rows))
        y = np.zeros(n_rows, dtype=np.int64)
        y[:n_pos] = 1
        y = site_rng.permutation(y)

        # Site-specific labelling: shared effects jittered, plus markers only this site has.
        effect = shared_effect * (1.0 + _EFFECT_JITTER * site_rng.standard_normal(p))
        own = site_rng.choice(p, size=_N_SITE_MARKERS, replace=False)
        effect[own] += _SITE_EFFECT * site_rng.choice([-1.0, 1.0], size=_N_SITE_MARKERS)

        factors = site_rng.standard_normal((n_rows, _N_MODULES)) + np.outer(y, factor_effect)
        standardized = factors @ loadings.T + site_rng.standard_normal((n_rows, p)) + np.outer(y, effect)

        # Batch effect of the site's platform: per-gene offset and spread.
        batch_shift = _BATCH_SHIFT_SD * site_rng.standard_normal(p)
        batch_scale = np.exp(_BATCH_LOG_SCALE_SD * site_rng.standard_normal(p))
        blocks_X.append(gene_mean + batch_shift + gene_sd * batch_scale * standardized)
        blocks_y.append(y)
        blocks_site.append(np.full(n_rows, s, dtype=np.int64))

    return Dataset(
        name="geo5_sim",
        X=np.vstack(blocks_X),
        y=np.concatenate(blocks_y),
        feature_names=tuple(f"g{j:04d}" for j in range(p)),
        class_names=("RD", "pCR"),
        sites=np.concatenate(blocks_site),
        site_names=GEO5_SITE_NAMES,
        source=(f"generated (seed {GEO5_SEED}): simulated stand-in for the five GEO breast-cancer "
                "studies of the RFMS paper (site sizes, p >> n, ~30 % pCR, batch effects, gene "
                "modules, site-specific labelling); no real patient data"),
    )
