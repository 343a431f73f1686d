"""Where cells can run, from the nodes' declared resources (no Ray: node tables as data)."""

import re

import pytest

from raytune_fed.errors import ConfigError
from raytune_fed.grid import Demand, Slots, alive_totals, capacity, requirement, why_unplaceable
from raytune_fed.grid._placement import autoscaler_request

# two general nodes and a site node that declares site:a but gives no CPU to the cluster
NODES = [{"Alive": True, "Resources": {"CPU": 2.0, "memory": 1e9}},
         {"Alive": True, "Resources": {"CPU": 1.0}},
         {"Alive": True, "Resources": {"CPU": 0.0, "site:a": 1.0}},
         {"Alive": False, "Resources": {"CPU": 8.0, "site:b": 1.0}}]


def test_site_pins_follow_what_live_nodes_declare():
    totals = alive_totals(NODES)
    assert len(totals) == 3
    assert requirement(Demand(site="a"), totals) == (("CPU", 1.0), ("site:a", 0.001))
    assert requirement(Demand(site="b"), totals) == (("CPU", 1.0),)  # its only node is dead: run anywhere
    assert requirement(Demand(num_cpus=0, resources={"gpu": 1}), totals) == (("gpu", 1.0),)


def test_site_pins_follow_node_types_the_autoscaler_can_start():
    """A site whose node type the cluster announced is pinned before its node runs: the cell waits, and its
    demand (site:<name>) is what makes the autoscaler start that node."""
    totals = alive_totals(NODES)
    need = requirement(Demand(site="c"), totals, offered=["site:c"])
    assert need == (("CPU", 1.0), ("site:c", 0.001))
    assert capacity(need, totals) == 0  # no live node yet: it waits (placement_timeout bounds the wait)
    assert requirement(Demand(site="c"), totals, offered=["site:d"]) == (("CPU", 1.0),)
    assert requirement(Demand(), totals, offered=["site:c"]) == (("CPU", 1.0),)


# cluster.yaml's shape as the fake cluster declares it: head, two general workers, one site node
GROUPS = [({"CPU": 1.0}, 1), ({"CPU": 1.0, "memory": 1e9}, 2), ({"CPU": 1.0, "site:s": 1.0}, 1)]
PINNED = (("CPU", 1.0), ("site:s", 0.001))
FREE = (("CPU", 1.0),)


@pytest.mark.parametrize("backlog, groups, expected", [
    # two cells pinned to the one site node of one CPU: only one can be asked for, or nothing starts
    ([PINNED, PINNED, FREE, FREE], GROUPS, [dict(PINNED), dict(FREE), dict(FREE)]),
    # the free cells fill the head and both workers; the site node holds its own cell
    ([FREE] * 6 + [PINNED], GROUPS, [dict(PINNED)] + [dict(FREE)] * 3),
    # the site node may take free cells when no pinned cell needs it
    ([FREE] * 6, GROUPS, [dict(FREE)] * 4),
    # a cell needing nothing is not a bundle; an empty backlog withdraws the request
    ([(), FREE], GROUPS, [dict(FREE)]),
    ([], GROUPS, []),
    # nothing announced, or a node type whose CPUs are unknown: the backlog as it is
    ([PINNED, PINNED, FREE], [], [dict(PINNED), dict(PINNED), dict(FREE)]),
    ([PINNED, PINNED], [({"site:s": 1.0}, 1)], [dict(PINNED), dict(PINNED)]),
    # a node type that may run no node offers nothing
    ([PINNED], [({"CPU": 1.0, "site:s": 1.0}, 0), ({"CPU": 4.0}, 1)], []),
], ids=["pinned-beyond-site-node", "more-free-than-cpus", "site-node-takes-free", "empty-need", "nothing-left",
        "no-node-types", "cpus-unknown", "type-never-started"])
def test_the_autoscaler_is_asked_only_for_what_the_node_types_can_hold(backlog, groups, expected):
    assert autoscaler_request(backlog, groups) == expected


def test_the_autoscaler_request_is_bounded():
    assert len(autoscaler_request([FREE] * 50, [({"CPU": 8.0}, 100)], limit=7)) == 7
    assert len(autoscaler_request([FREE] * 50, [], limit=7)) == 7


@pytest.mark.parametrize("demand, n, reason", [
    (Demand(), 3, None),
    (Demand(num_cpus=2), 1, None),
    (Demand(site="a"), 0, r"the 1 node\(s\) declaring site:a offer at most 0 CPU \(the cell needs 1 CPU, "
                          r"0.001 site:a\)"),
    (Demand(resources={"gpu": 1}), 0, r"no live node declares resource 'gpu'"),
    (Demand(num_cpus=4), 0, r"the largest live node offers 2 CPU \(the cell needs 4 CPU\)"),
])
def test_capacity_and_the_reason_a_cell_cannot_be_placed(demand, n, reason):
    totals = alive_totals(NODES)
    need = requirement(demand, totals)
    assert capacity(need, totals) == n
    if reason is not None:
        assert re.search(reason, why_unplaceable(need, totals))


def test_no_live_node_at_all():
    assert "no live node" in why_unplaceable((("CPU", 1.0),), alive_totals([]))


def test_cells_waiting_for_a_busy_site_node_leave_the_other_cpus_to_other_cells():
    """The old throttle counted every submitted cell as running: cells pinned to a site node
    filled every slot while only one of them could run, and nothing else was submitted."""
    nodes = [{"Alive": True, "Resources": {"CPU": 3.0}}, {"Alive": True, "Resources": {"CPU": 1.0, "site:a": 1.0}}]
    totals = alive_totals(nodes)
    pinned, free = requirement(Demand(site="a"), totals), requirement(Demand(), totals)
    slots = Slots()
    assert slots.fits(pinned, totals)
    slots.add(pinned)
    assert not slots.fits(pinned, totals)  # the site node's one CPU is spoken for
    for _ in range(3):
        assert slots.fits(free, totals)
        slots.add(free)
    assert not slots.fits(free, totals) and len(slots) == 4  # one cell per CPU of the cluster
    slots.remove(pinned)
    assert slots.fits(pinned, totals)


@pytest.mark.parametrize("kwargs, message", [
    ({"num_cpus": -1}, "num_cpus must be a finite number >= 0.0, got -1"),
    ({"resources": {"gpu": 0}}, "resource 'gpu' must be a positive amount, got 0"),
    ({"resources": {"": 1}}, "resource names must be non-empty strings"),
])
def test_bad_demands(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        Demand(**kwargs)


def test_the_sites_a_cell_queries_must_have_a_live_node_once_the_cluster_declares_them():
    from raytune_fed.grid._placement import declared, needed_sites, why_sites_missing

    totals = alive_totals(NODES)
    demand = Demand(site="a", needs=("a", "b", "elsewhere"))
    # site b's only node is dead and nobody declares "elsewhere": neither binds the cell (they run anywhere)
    assert needed_sites(demand, totals) == ("site:a",)
    assert declared(("site:a",), totals)
    gone = [t for t in totals if "site:a" not in t]  # site a's node is lost
    assert not declared(("site:a",), gone)
    assert why_sites_missing(("site:a",), gone).startswith("no live node declares 'site:a', so the actor of a site "
                                                            "this cell queries has nowhere to run")
    with pytest.raises(ConfigError, match="needs must be a tuple of site names"):
        Demand(needs=["a"])
