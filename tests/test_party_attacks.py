"""A deviating active party against the passive party, on every transport (the attacks of issue 16, leak 6).

The attacker (``party_attacker``) holds trainings the owner admitted and speaks only the
protocol.  On d8d2749 each attack here succeeded completely (the one-off
``attacks_on_d8d2749_party.py``, in git history; ``experiments/measured/attacks_on_d8d2749_party.json``).
"""

import numpy as np
import pytest
from party_attacker import (
    OWNER,
    X_PASSIVE,
    _worker,
    crafted_powers,
    decrypted_noise,
    deployed,
    shrunken_bins,
    split_masks,
    true_bins,
    used_bins,
)

from raytune_fed.crypto import Layout, choose_block, secret_context
from raytune_fed.errors import QueryRefusedError
from raytune_fed.federation.parties import PassiveClient, PassiveParty
from raytune_fed.models.secureboost import NodeQuery
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


def test_split_masks_on_fresh_trees_no_longer_name_bins(kind):
    """d8d2749: naming every (feature, bin) mask in ``splits`` on fresh trees whose roots hold every row gave every
    row's bin of every feature in two requests, with zero gradients.  Now a split names a place in the tree's
    secret order of candidates: the bins come out at chance."""
    with deployed(kind) as dep:
        result = split_masks(dep)
    assert "refused" not in result and result["trees"] == 6 * 31
    assert result["bins_right"] < 0.1 and result["rows_all_bins_right"] == 0  # 1.0 and 160 on d8d2749


def test_nodes_the_protocol_did_not_derive_are_refused(kind):
    """Fresh node ids deeper in a tree, a node answered twice, a split of a node of an earlier level, roots of
    rows outside the training: each refused with the fixed 'protocol' text, nothing answered."""
    with deployed(kind) as dep:
        client = dep.admit("fresh")
        keys = secret_context("plain")
        n_masks = client.open_session(keys.public_context(), 8, np.arange(100))

        def node(tree, node_id, parent, rows=None, sibling=-1):
            if rows is None:
                return NodeQuery(node_id, parent, sibling=sibling, tree=tree)
            layout = Layout(len(rows), n_masks, choose_block(len(rows), n_masks))
            return NodeQuery(node_id, parent, rows=np.asarray(rows, dtype=np.int64), block=layout.block, tree=tree,
                             gh=keys.encrypt(np.zeros(len(rows), dtype=np.uint64), layout))

        for queries in ([node(0, 5, 2, np.arange(10))], [node(0, 0, -1, np.arange(90, 120))],
                        [node(0, 0, -1, np.arange(50)), node(0, 1, 0, np.arange(20))]):
            with pytest.raises(QueryRefusedError, match="does not follow the protocol") as info:
                client.histograms(queries)
            assert info.value.code == "protocol"
        assert len(client.histograms([node(0, 0, -1, np.arange(100))])) == 1
        for queries in ([node(0, 0, -1, np.arange(100))], [node(0, 3, 1, np.arange(10))],
                        [node(0, 2, 0, sibling=1)]):
            with pytest.raises(QueryRefusedError, match="does not follow the protocol"):
                client.histograms(queries)
        for picks in ([(0, 1, 0)], [(3, 0, 0)], [(0, 0, n_masks)]):
            with pytest.raises(QueryRefusedError, match="does not follow the protocol"):
                client.splits(picks)


def test_crafted_powers_read_only_the_moved_bins(kind):
    """d8d2749: one histograms request of encrypted powers of two read every row's bin of every feature (160 of
    160 rows).  The attacker still reads every mask the party uses, but the party uses bins moved once by the
    geometric mechanism (epsilon 1 by default): about half of the values' bins come out right (the mechanism
    keeps a bin with probability tanh(1/2) = 0.46 inside the range), and almost no row has all six right."""
    with deployed(kind) as dep:
        result = crafted_powers(dep, scheme="bfv" if kind == "local" else "plain")
    assert result["rows_read"] == 160  # the sums are exact: the defence is what the sums are of
    assert 0.3 < result["value_bins_right"] < 0.65 and result["rows_all_value_bins_right"] <= 16


def test_the_noise_of_returned_ciphertexts_no_longer_holds_the_masks(kind):
    """d8d2749: with the secret key, the noise of each returned BFV ciphertext divided by the noise of the
    zeros the attacker sent is the party's mask polynomial: every row's bin of every feature in one request.
    Now each result is flooded with uniform noise below 2**57 before it leaves."""
    with deployed(kind, bin_privacy=None) as dep:
        result = decrypted_noise(dep)
    assert result["coefficients_0_or_1"] < 0.01 and result["rows_read"] == 0
    assert result["value_bins_right"] < 0.1 and result["rows_all_value_bins_right"] == 0


def test_the_party_bins_every_row_whatever_training_rows_it_is_given():
    party = PassiveParty(X_PASSIVE, owner_secret=OWNER)
    public = secret_context("plain").public_context()
    bins = []
    for unit, rows in (("all", np.arange(160)), ("two", np.array([3, 99])), ("half", np.arange(0, 160, 2))):
        PassiveClient.admit(party, owner=OWNER, unit=unit).open_session(public, 8, rows)
        bins.append(true_bins(_worker(party, unit)))
        assert np.array_equal(used_bins(_worker(party, "all")), used_bins(_worker(party, unit)))
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


def test_the_mechanism_moves_bins_once_for_the_partys_lifetime(tmp_path):
    from raytune_fed.models.secureboost._binning import apply_bins, coarsen, grid_edges, randomised_bins

    public = secret_context("plain").public_context()
    reported = []
    for seed, unit in ((7, "a"), (7, "b"), (8, "a")):
        party = PassiveParty(X_PASSIVE, owner_secret=OWNER, seed=seed)
        PassiveClient.admit(party, owner=OWNER, unit=unit).open_session(public, 32, np.arange(160))
        reported.append(used_bins(_worker(party, unit)))
    assert np.array_equal(reported[0], reported[1]) and not np.array_equal(reported[0], reported[2])
    assert 0.3 < np.mean(reported[0] == true_bins(_worker(party, "a"))) < 0.65
    # the geometric mechanism: P(shift = d) = tanh(eps / 2) e^(-eps |d|) ... inside the range
    bins = np.full((20000, 1), 50)
    moved = randomised_bins(bins, [101], 1.0, np.random.default_rng(0))[:, 0] - 50
    assert abs(np.mean(moved == 0) - np.tanh(0.5)) < 0.02 and abs(np.mean(moved == 2) / np.mean(moved == 1)
                                                                  - np.exp(-1)) < 0.05
    # a session's bins are the grid's, coarsened
    grid = quantile_edges(X_PASSIVE, 32)
    for n_bins in (2, 5, 8, 32):
        edges = grid_edges(X_PASSIVE, n_bins, grid)
        assert np.array_equal(coarsen(apply_bins(X_PASSIVE, grid), grid, edges), apply_bins(X_PASSIVE, edges))


@pytest.mark.parametrize("value, message", [(0, "bin_privacy must be > 0 \\(None switches it off\\), got 0"),
                                            (-1.0, "bin_privacy must be a finite number >= 0"),
                                            (float("nan"), "bin_privacy must be a finite number >= 0")])
def test_bad_bin_privacy_is_one_line(value, message):
    with pytest.raises(Exception, match=message):
        PassiveParty(X_PASSIVE, bin_privacy=value)


def test_moves_known_seed_but_not_the_owner_credential_cannot_be_undone():
    """The moves come from the party's seed and its owner credential: an attacker who knows the code and the
    seed (0 here) but not the credential draws other moves, so subtracting its guess does not give the bins."""
    from raytune_fed.federation.parties._passive_party import privacy_seed
    from raytune_fed.models.secureboost import PassiveWorker

    public = secret_context("plain").public_context()
    party = PassiveParty(X_PASSIVE, owner_secret=OWNER, seed=0)
    PassiveClient.admit(party, owner=OWNER, unit="u").open_session(public, 32, np.arange(160))
    moved = used_bins(_worker(party, "u"))
    guess = PassiveWorker(X_PASSIVE, max_bins=32, bin_privacy=1.0, privacy_seed=privacy_seed(0, "another-owner" * 2))
    guess.open_session(public, 32, np.arange(160))
    undone = true_bins(_worker(party, "u")) + (moved - used_bins(guess))  # the attacker's "unmoving"
    assert np.mean(undone == true_bins(_worker(party, "u"))) < 0.6 and not np.array_equal(moved, used_bins(guess))
