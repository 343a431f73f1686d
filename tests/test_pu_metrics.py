"""PU evaluators: closed forms, Theorem 1 on data with known labels, the control variate, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import expit

from raytune_fed.errors import ConfigError, DatasetError
from raytune_fed.metrics import (
    DensityRatio,
    auc,
    auc_pu,
    bounded_scores,
    control_variate,
    ipm_pu,
    nnpu_risk,
    pu_contributions,
    pu_score,
    upu_risk,
)

S = np.array([1, 1, 0, 0, 0])
SCORES = np.array([0.9, 0.4, 0.5, 0.1, 0.4])


# ------------------------------------------------------------------ closed forms on tiny inputs

def test_auc_pu_and_ipm_pu_on_a_hand_made_example():
    # 0.9 beats all three unlabelled rows; 0.4 beats 0.1, ties 0.4, loses to 0.5: (3 + 1.5) / 6
    assert auc_pu(S, SCORES) == pytest.approx(0.75)
    assert ipm_pu(S, SCORES) == pytest.approx(0.65 - 1.0 / 3.0)
    assert pu_contributions(S, SCORES, "auc") == pytest.approx([1.0, 0.5])
    assert pu_contributions(S, SCORES, "ipm") == pytest.approx([0.9 - 1 / 3, 0.4 - 1 / 3])
    assert pu_score(S, SCORES, evaluator="auc") == pytest.approx(0.75)


def test_rank_contributions_agree_with_the_scorer_auc():
    rng = np.random.default_rng(1)
    s = (rng.random(500) < 0.2).astype(int)
    scores = np.round(rng.normal(size=500) + s, 1)                 # many ties
    assert pu_contributions(s, scores, "auc").mean() == pytest.approx(auc(s, scores))
    pairs = np.mean([(p > u) + 0.5 * (p == u) for p in scores[s == 1] for u in scores[s == 0]])
    assert auc_pu(s, scores) == pytest.approx(pairs)


def test_upu_and_nnpu_risks_on_a_hand_made_example():
    decision = SCORES - 0.45          # P: 0.45, -0.05 -> err_P = 1/2; U: 0.05, -0.35, -0.05 -> err_U = 1/3
    assert upu_risk(S, decision, 0.2) == pytest.approx(2 * 0.2 * 0.5 + 1 / 3 - 0.2)
    assert nnpu_risk(S, decision, 0.2) == pytest.approx(0.2 * 0.5 + (1 / 3 - 0.2 * 0.5))
    # with pi = 0.8 the negative part 1/3 - 0.8 * 0.5 < 0: uPU goes below nnPU, which clips it at 0
    assert upu_risk(S, decision, 0.8) == pytest.approx(0.8 * 0.5 + 1 / 3 - 0.4)
    assert nnpu_risk(S, decision, 0.8) == pytest.approx(0.8 * 0.5)
    sig = upu_risk(S, decision, 0.2, loss="sigmoid")
    fp, fu = decision[:2], decision[2:]
    assert sig == pytest.approx(0.2 * expit(-fp).mean() - 0.2 * expit(fp).mean() + expit(fu).mean())


def test_bounded_scores_are_a_scale_free_sigmoid():
    z = np.sqrt(1.5)                                           # [0, 1, 2] standardised: [-z, 0, z]
    assert bounded_scores([0.0, 1.0, 2.0]) == pytest.approx(expit([-z, 0.0, z]))
    assert bounded_scores([0.0, 10.0, 20.0]) == pytest.approx(bounded_scores([5.0, 6.0, 7.0]))
    assert bounded_scores([3.0, 3.0]).tolist() == [0.5, 0.5]
    assert ipm_pu(S, bounded_scores(SCORES * 100)) == pytest.approx(ipm_pu(S, bounded_scores(SCORES)))


def test_control_variate_closed_form():
    a, w = np.array([1.0, 2.0, 3.0]), np.array([1.0, 1.5, 2.0])
    estimate, eta = control_variate(a, w)        # cov = 0.5, var = 0.25, mean(w) - 1 = 0.5
    assert eta == pytest.approx(-2.0) and estimate == pytest.approx(2.0 - 2.0 * 0.5)
    assert control_variate(a, np.ones(3)) == (pytest.approx(2.0), 0.0)     # constant ratio: no correction
    assert control_variate(np.array([0.7]), np.array([3.0])) == (pytest.approx(0.7), 0.0)
    assert control_variate(a, w, min_rows=4) == (pytest.approx(2.0), 0.0)  # below the count: off
    assert pu_score(S, SCORES, evaluator="ipm", ratio=[1.0, 1.5]) == pytest.approx(
        control_variate(pu_contributions(S, SCORES, "ipm"), [1.0, 1.5])[0])


def test_shrunk_eta_keeps_a_clear_slope_and_drops_a_noisy_one():
    w = np.array([0.2, 0.6, 1.0, 1.4, 1.8])
    exact = 3.0 - 0.5 * w                                     # a exactly linear in w: se = 0, no shrinkage
    assert control_variate(exact, w, shrink=True)[1] == pytest.approx(0.5)
    noisy = np.array([1.0, -1.0, 0.9, -1.1, 1.05])            # slope far inside its standard error
    raw = control_variate(noisy, w)[1]
    assert raw != 0.0 and control_variate(noisy, w, shrink=True)[1] == 0.0
    middling = exact + np.array([0.05, -0.05, 0.0, 0.05, -0.05])
    shrunk = control_variate(middling, w, shrink=True)[1]
    assert 0.0 < shrunk < control_variate(middling, w)[1]
    assert control_variate(exact[:2], w[:2], shrink=True)[1] == 0.0   # two rows cannot give a standard error


# ------------------------------------------------------------------ Theorem 1 on data with known labels

def _pu_sample(rng, n_p, n_u, pi, d=4):
    mu = np.r_[1.2, 0.6, np.zeros(d - 2)]
    P = rng.normal(size=(n_p, d)) + mu
    hidden = rng.random(n_u) < pi
    U = rng.normal(size=(n_u, d)) + np.where(hidden[:, None], mu, 0.0)
    return P, U, hidden


def test_auc_pu_tracks_auc_pn_by_theorem_1_and_ranks_models_alike():
    rng = np.random.default_rng(7)
    pi = 0.35
    P, U, hidden = _pu_sample(rng, 3000, 6000, pi)
    pi_hat = hidden.mean()
    directions = [np.r_[1.0, 0.5, 0, 0], np.r_[1.0, 0.0, 0, 0], np.r_[0.3, 1.0, 0.5, 0], np.r_[0.0, 0.2, 1.0, 0],
                  np.r_[0.0, 0.0, 1.0, 1.0]]
    pn, from_pu, ipm_pn, ipm_from_pu = [], [], [], []
    for w in directions:
        sp, su = P @ w, U @ w
        s = np.r_[np.ones(P.shape[0]), np.zeros(U.shape[0])]
        a_pu = auc_pu(s, np.r_[sp, su])
        a_pn = auc(np.r_[np.ones(sp.size), np.zeros((~hidden).sum())], np.r_[sp, su[~hidden]])
        pn.append(a_pn)
        from_pu.append(a_pu / (1 - pi_hat) - pi_hat / (2 * (1 - pi_hat)))
        h_p, h_u = expit(sp), expit(su)
        ipm_pn.append(h_p.mean() - h_u[~hidden].mean())
        ipm_from_pu.append(ipm_pu(s, np.r_[h_p, h_u]) / (1 - pi_hat))
    # sampling error of an AUC on thousands of rows is about 0.005; the P-vs-hidden-P half adds as much
    assert np.abs(np.array(pn) - np.array(from_pu)).max() < 0.03
    assert np.abs(np.array(ipm_pn) - np.array(ipm_from_pu)).max() < 0.03
    assert np.argsort(pn).tolist() == np.argsort(from_pu).tolist()
    assert np.argsort(ipm_pn).tolist() == np.argsort(ipm_from_pu).tolist()
    assert max(pn) - min(pn) > 0.2                      # the models really differ


def test_control_variate_lowers_the_variance_over_resamples():
    rng = np.random.default_rng(0)
    pi = 0.4
    P, U, _ = _pu_sample(rng, 400, 4000, pi, d=5)
    ratio = DensityRatio(seed=0).fit(np.vstack([P, U]), np.r_[np.ones(400), np.zeros(4000)].astype(int))
    w_model = np.r_[0.8, 1.2, 0.3, 0.0, 0.0]
    for evaluator in ("ipm", "auc"):
        plain, reduced = [], []
        for _ in range(300):
            Pv, Uv, _ = _pu_sample(rng, 30, 300, pi, d=5)
            s = np.r_[np.ones(30), np.zeros(300)].astype(int)
            scores = expit(np.vstack([Pv, Uv]) @ w_model)
            plain.append(pu_score(s, scores, evaluator=evaluator))
            reduced.append(pu_score(s, scores, evaluator=evaluator, ratio=ratio.ratio(Pv)))
        assert np.var(reduced) < 0.8 * np.var(plain), evaluator


def test_the_correction_averages_what_eq_13_leaves_of_it():
    # R* - R_PU = eta (mean_P w - 1).  By eq. 13 E_P[w] = 1, so an unbiased variate's correction averages 0; what it
    # does average is eta times the identity's residual E_P[w] - 1 (here estimated on 50,000 fresh positives), and
    # the normalised ratio keeps that residual within three relative standard errors of its normaliser, so the
    # correction's mean is bounded by them.  The classifier's raw odds break the bound.
    rng = np.random.default_rng(0)
    P, U, _ = _pu_sample(rng, 400, 4000, 0.4, d=5)
    ratio = DensityRatio(seed=0).fit(np.vstack([P, U]), np.r_[np.ones(400), np.zeros(4000)].astype(int))
    fresh, _, _ = _pu_sample(rng, 50000, 1, 0.4, d=5)
    residual = ratio.ratio(fresh).mean() - 1.0
    rel_se = ratio.normaliser_se_ / ratio.normaliser_
    assert abs(residual) < 3.0 * rel_se
    w_model = np.r_[0.8, 1.2, 0.3, 0.0, 0.0]
    shipped, raw = [], []
    for _ in range(300):
        Pv, Uv, _ = _pu_sample(rng, 30, 300, 0.4, d=5)
        s = np.r_[np.ones(30), np.zeros(300)].astype(int)
        a = pu_contributions(s, expit(np.vstack([Pv, Uv]) @ w_model), "ipm")
        estimate, eta = control_variate(a, ratio.ratio(Pv))
        shipped.append((estimate - a.mean(), eta))
        raw.append(control_variate(a, ratio.raw_ratio(Pv))[0] - a.mean())
    correction, eta = np.array(shipped).T
    se = correction.std(ddof=1) / np.sqrt(correction.size)
    assert abs(correction.mean() - eta.mean() * residual) < 3.0 * se          # the correction is eta (E_P w - 1)
    bound = abs(eta.mean()) * 3.0 * rel_se + 3.0 * se
    assert abs(correction.mean()) < bound < abs(np.mean(raw))


@pytest.mark.parametrize("n_p, d", [(400, 4), (100, 10)])
def test_density_ratio_has_mean_one_over_positives_it_has_not_seen(n_p, d):
    # eq. 13: E_P[p_U / p_P] = 1.  The ratio is normalised on the training positives (out of fold), so over
    # fresh positives its mean is 1 up to the normaliser's sampling error, which the tolerance states: three
    # standard errors of the normaliser plus three of the fresh sample's mean.  The regularised logistic
    # regression's own odds miss the identity by more than that.
    rng = np.random.default_rng(3)
    P, U, _ = _pu_sample(rng, n_p, 3000, 0.3, d=d)
    fresh, _, _ = _pu_sample(rng, 20000, 1, 0.3, d=d)
    ratio = DensityRatio(seed=1).fit(np.vstack([P, U]), np.r_[np.ones(n_p), np.zeros(3000)].astype(int))
    w = ratio.ratio(fresh)
    tolerance = 3.0 * (ratio.normaliser_se_ / ratio.normaliser_ + w.std() / np.sqrt(w.size))
    assert abs(w.mean() - 1.0) < tolerance
    assert abs(ratio.raw_ratio(fresh).mean() - 1.0) > tolerance
    assert np.all(w > 0)


# ------------------------------------------------------------------ bad input

BAD_INPUT = [
    (lambda: auc_pu([1, 1, 1], [0.1, 0.2, 0.3]), DatasetError,
     r"needs labelled and unlabelled rows; got 3 labelled of 3"),
    (lambda: auc_pu([0, 0], [0.1, 0.2]), DatasetError, r"got 0 labelled of 2"),
    (lambda: auc_pu([1, 2, 0], [0.1, 0.2, 0.3]), DatasetError, r"s must hold 1 \(labelled\) and 0 \(unlabelled\)"),
    (lambda: auc_pu([1, 0], [0.1]), DatasetError, r"same length, got shapes \(2,\) and \(1,\)"),
    (lambda: auc_pu([1, 0], [0.1, math.nan]), DatasetError, r"scores must be finite"),
    (lambda: ipm_pu([1, 0], [2.0, 0.1]), DatasetError, r"IPM_PU needs scores in \[0, 1\].*got range \[0.1, 2\]"),
    (lambda: upu_risk([1, 0], [0.1, -0.1], 1.0), ConfigError, r"prior must be a number in \(0, 1\), got 1.0"),
    (lambda: nnpu_risk([1, 0], [0.1, -0.1], 0.3, loss="hinge"), ConfigError, r"unknown loss 'hinge'"),
    (lambda: pu_score(S, SCORES, evaluator="f1"), ConfigError, r"unknown evaluator 'f1'; known evaluators: \['ipm', "
                                                               r"'auc'\]"),
    (lambda: pu_score(S, SCORES, ratio=[1.0]), DatasetError, r"ratio needs one value per labelled row \(2\)"),
    (lambda: control_variate([1.0, 2.0], [1.0, math.inf]), DatasetError, r"must be finite"),
]


@pytest.mark.parametrize("call, error, message", BAD_INPUT)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
