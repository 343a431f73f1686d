"""A deviating active party against the passive party, on every transport (the attacks of issue 16, leak 6).

The attacker (``party_attacker``) holds trainings the owner admitted and speaks only the
protocol.  On d8d2749 each attack here succeeded completely (``python
experiments/attacks_on_d8d2749_party.py``, ``experiments/measured/attacks_on_d8d2749_party.json``).
"""

import numpy as np
import pytest

from party_attacker import OWNER, X_PASSIVE, _worker, deployed, shrunken_bins, true_bins
from raytune_fed.crypto import secret_context
from raytune_fed.errors import QueryRefusedError
from raytune_fed.federation.parties import PassiveClient, PassiveParty
from raytune_fed.models.secureboost._binning import grid_edges, quantile_edges

KINDS = ["local", "service", pytest.param("actor", marks=pytest.mark.ray)]


@pytest.fixture(params=KINDS)
def kind(request):
    if request.param == "actor":
        request.getfixturevalue("ray_session")
    return request.param


def test_shrunken_training_rows_and_many_bins_no_longer_give_values(kind):
    """d8d2749: train_rows = [argmin x0, argmax x0] with 256 bins put every row's x0 within 0.2 % of its range
    (r = 0.99999).  Now 256 bins are refused, and the bins of every row - even handed to the attacker - are
    the party's quantile bins over all its rows."""
    with deployed(kind) as dep:
        result = shrunken_bins(dep)
    assert result["refused_n_bins"] == "limit" and result["n_bins_used"] == 32
    for scored in (result["handed_over"], result.get("read")):
        if scored is None:
            continue
        # a uniform grid over the range would put rows within 1/512 of it; quantile bins leave ~10x more
        assert scored["max_error_of_range"] > 0.05 and scored["best_line_median_error_of_range"] > 0.01


def test_the_party_bins_every_row_whatever_training_rows_it_is_given():
    party = PassiveParty(X_PASSIVE, owner_secret=OWNER)
    public = secret_context("plain").public_context()
    bins = []
    for unit, rows in (("all", np.arange(160)), ("two", np.array([3, 99])), ("half", np.arange(0, 160, 2))):
        PassiveClient.admit(party, owner=OWNER, unit=unit).open_session(public, 8, rows)
        bins.append(true_bins(_worker(party, unit)))
    assert all(np.array_equal(bins[0], b) for b in bins[1:])
    assert np.array_equal(bins[0], np.column_stack([np.searchsorted(c, X_PASSIVE[:, j])
                                                    for j, c in enumerate(quantile_edges(X_PASSIVE, 8))]))


@pytest.mark.parametrize("n_bins", range(2, 33))
def test_every_bin_count_is_a_coarsening_of_the_owners_grid(n_bins):
    grid = quantile_edges(X_PASSIVE, 32)
    edges = grid_edges(X_PASSIVE, n_bins, grid)
    for cuts, allowed in zip(edges, grid):
        assert np.all(np.isin(cuts, allowed)) and np.all(np.diff(cuts) > 0)
    if 32 % n_bins == 0:  # the quantiles are grid points already: nothing moves
        assert all(np.array_equal(a, b) for a, b in zip(edges, quantile_edges(X_PASSIVE, n_bins)))


def test_bins_over_the_owners_cap_are_refused():
    party = PassiveParty(X_PASSIVE, owner_secret=OWNER, max_bins=16)
    client = PassiveClient.admit(party, owner=OWNER, unit="u")
    with pytest.raises(QueryRefusedError, match="exceeds a limit the party's owner set"):
        client.open_session(secret_context("plain").public_context(), 32, np.arange(160))
    with pytest.raises(Exception, match=r"max_bins must be an integer in \[2, 256\], got 300"):
        PassiveParty(X_PASSIVE, max_bins=300)
