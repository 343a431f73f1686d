"""nnPU (Kiryo, Niu, du Plessis & Sugiyama, NeurIPS 2017): a small numpy MLP on the non-negative risk.

The model is a multilayer perceptron (ReLU hidden layers, one linear output ``f(x)``,
He-normal initial weights from ``random_state``) trained with Adam on the sigmoid loss
``l(z) = sigmoid(-z)``.  Per minibatch, with ``pi`` the prior:

    R+ = pi mean_P l(f),   R- = mean_U l(-f) - pi mean_P l(-f)

and the step is on ``R+ + R-`` unless ``nnpu`` is on and ``R- < -beta``: then it is the
*defensive* step on ``-gamma R-`` (it pushes ``R-`` back up and ignores ``R+`` for that
batch), as in the reference implementation.  ``nnpu=False`` gives uPU with the same network.
Weight decay (``weight_decay * W`` added to the weight gradients; biases undecayed) as in
the reference's defaults (Adam, step 1e-3, decay 0.005).

Minibatches: every epoch the labelled and the unlabelled rows are shuffled separately and
cut into the same number of batches, ``min(ceil(n / batch_size), n_P)``, so every batch
holds labelled rows (with very few labelled positives a random batch would often have
none, and its ``R+`` would be undefined).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.special import expit

from raytune_fed._checks import check_float, check_int, check_share
from raytune_fed.errors import ConfigError
from raytune_fed.models.pu._base import PUClassifier, check_positive, check_prior

_ADAM_B1, _ADAM_B2, _ADAM_EPS = 0.9, 0.999, 1e-8


class NNPU(PUClassifier):
    """Non-negative PU learning with a numpy MLP (see the module docstring).

    Parameters: ``prior``, ``gamma`` (defensive step size, [0, 1]), ``beta`` (tolerated
    negative risk, >= 0), ``hidden_layer_sizes``, ``learning_rate``, ``weight_decay``,
    ``n_epochs``, ``batch_size``, ``nnpu`` (False: plain uPU risk), ``random_state``.
    Learned: ``coefs_``, ``intercepts_``, ``risk_curve_`` (reported risk per epoch).
    """

    def __init__(self, prior: float = 0.5, gamma: float = 1.0, beta: float = 0.0,
                 hidden_layer_sizes: tuple[int, ...] = (100,), learning_rate: float = 1e-3,
                 weight_decay: float = 5e-3, n_epochs: int = 50, batch_size: int = 512, nnpu: bool = True,
                 random_state: int = 0) -> None:
        self.prior = prior
        self.gamma = gamma
        self.beta = beta
        self.hidden_layer_sizes = hidden_layer_sizes
        self.learning_rate = learning_rate
        self.weight_decay = weight_decay
        self.n_epochs = n_epochs
        self.batch_size = batch_size
        self.nnpu = nnpu
        self.random_state = random_state

    def _check_params(self) -> float:
        pi = check_prior(self.prior)
        check_share("gamma", self.gamma, 0.0, 1.0, low_open=False)
        check_float("beta", self.beta, 0.0)
        check_positive("learning_rate", self.learning_rate)
        check_float("weight_decay", self.weight_decay, 0.0)
        check_int("n_epochs", self.n_epochs, 1)
        check_int("batch_size", self.batch_size, 1)
        sizes = self.hidden_layer_sizes
        if not isinstance(sizes, (tuple, list)) or not all(
                isinstance(h, (int, np.integer)) and not isinstance(h, bool) and h >= 1 for h in sizes):
            raise ConfigError(f"hidden_layer_sizes must be a tuple of integers >= 1, got {sizes!r}")
        if not isinstance(self.nnpu, (bool, np.bool_)):
            raise ConfigError(f"nnpu must be True or False, got {self.nnpu!r}")
        return pi

    # ------------------------------------------------------------------ the network
    def _forward(self, X: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        acts = [X]
        h = X
        for W, b in zip(self.coefs_[:-1], self.intercepts_[:-1]):
            h = np.maximum(h @ W + b, 0.0)
            acts.append(h)
        return (h @ self.coefs_[-1] + self.intercepts_[-1])[:, 0], acts

    def _backward(self, acts: list[np.ndarray], grad_out: np.ndarray) -> tuple[list, list]:
        gW, gb = [None] * len(self.coefs_), [None] * len(self.coefs_)
        delta = grad_out[:, None]
        for layer in range(len(self.coefs_) - 1, -1, -1):
            gW[layer] = acts[layer].T @ delta + self.weight_decay * self.coefs_[layer]
            gb[layer] = delta.sum(axis=0)
            if layer:
                delta = (delta @ self.coefs_[layer].T) * (acts[layer] > 0)
        return gW, gb

    def _batch_gradient(self, Xp: np.ndarray, Xu: np.ndarray, pi: float) -> tuple[list, list, float]:
        n_p = Xp.shape[0]
        f, acts = self._forward(np.vstack([Xp, Xu]))
        fp, fu = f[:n_p], f[n_p:]
        sig_p, sig_u = expit(fp), expit(fu)
        r_pos = pi * np.mean(1.0 - sig_p)                  # pi mean_P sigmoid(-f)
        r_neg = np.mean(sig_u) - pi * np.mean(sig_p)       # mean_U sigmoid(f) - pi mean_P sigmoid(f)
        dp, du = sig_p * (1.0 - sig_p), sig_u * (1.0 - sig_u)
        if self.nnpu and r_neg < -self.beta:
            grad = np.concatenate([self.gamma * pi * dp / n_p, -self.gamma * du / fu.size])
            reported = r_pos - self.beta
        else:
            grad = np.concatenate([-2.0 * pi * dp / n_p, du / fu.size])
            reported = r_pos + r_neg
        gW, gb = self._backward(acts, grad)
        return gW, gb, float(reported)

    # ------------------------------------------------------------------ estimator API
    def fit(self, X: Any, s: Any) -> NNPU:
        pi = self._check_params()
        X, s = self._validate_fit(X, s)
        rng = np.random.default_rng(self.random_state)
        sizes = [X.shape[1], *[int(h) for h in self.hidden_layer_sizes], 1]
        self.coefs_ = [rng.normal(0.0, math.sqrt(2.0 / a), size=(a, b)) for a, b in zip(sizes[:-1], sizes[1:])]
        self.intercepts_ = [np.zeros(b) for b in sizes[1:]]
        params = [*self.coefs_, *self.intercepts_]
        m = [np.zeros_like(p) for p in params]
        v = [np.zeros_like(p) for p in params]
        Xp, Xu = X[s == 1], X[s == 0]
        n_batches = max(1, min(math.ceil(X.shape[0] / self.batch_size), Xp.shape[0]))
        step, curve = 0, []
        for _ in range(int(self.n_epochs)):
            p_parts = np.array_split(rng.permutation(Xp.shape[0]), n_batches)
            u_parts = np.array_split(rng.permutation(Xu.shape[0]), n_batches)
            risks = []
            for pi_idx, ui_idx in zip(p_parts, u_parts):
                if ui_idx.size == 0:
                    continue
                gW, gb, risk = self._batch_gradient(Xp[pi_idx], Xu[ui_idx], pi)
                risks.append(risk)
                step += 1
                lr = self.learning_rate * math.sqrt(1.0 - _ADAM_B2 ** step) / (1.0 - _ADAM_B1 ** step)
                for k, (p, g) in enumerate(zip(params, [*gW, *gb])):
                    m[k] = _ADAM_B1 * m[k] + (1.0 - _ADAM_B1) * g
                    v[k] = _ADAM_B2 * v[k] + (1.0 - _ADAM_B2) * g * g
                    p -= lr * m[k] / (np.sqrt(v[k]) + _ADAM_EPS)
            curve.append(float(np.mean(risks)))
        self.risk_curve_ = np.asarray(curve)
        return self

    def decision_function(self, X: Any) -> np.ndarray:
        X = self._validate_predict(X)
        return self._forward(X)[0]
