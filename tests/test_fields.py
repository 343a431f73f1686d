"""One declarative field system checks both directions of the boundary: what a site is asked
(the request fields its ``@restricted`` methods declare) and what it answers (the ``FIELDS`` of
its records).  Each refuses a malformed value naming the field, never quoting a request's value."""

from __future__ import annotations

import numpy as np
import pytest

from raytune_fed.errors import BoundaryViolationError
from raytune_fed.federation import Site, Struct
from raytune_fed.federation._fields import FieldError
from raytune_fed.federation._records import from_wire
from raytune_fed.federation.parties import PassiveParty

MODEL = {"learner": "svm", "config": {"C": 1.0}, "arrays": {"w": np.zeros(3)}}


@pytest.mark.parametrize("method, request_args, field", [
    ("query", {"model": MODEL, "mechanism": "lasso"}, "mechanism"),
    ("query", {"model": MODEL, "mechanism": "exact", "train_loss": 1.5}, "train_loss"),
    ("query", {"model": {**MODEL, "learner": 7}, "mechanism": "exact"}, "model.learner"),
    ("final_evaluation", {"models": [MODEL, {**MODEL, "config": []}]}, "models[1].config"),
    ("open_session", {"unit": "u", "role": "owner"}, "role"),
])
def test_a_malformed_request_is_refused_naming_its_field(method, request_args, field):
    declared = Struct(Site.PROTOCOL[method].request)  # what the site itself parses before a handler runs
    with pytest.raises(FieldError) as refused:
        declared.parse(request_args)
    assert refused.value.code == "malformed" and refused.value.field == field
    assert str(refused.value).startswith(f"{field} must be")
    assert "lasso" not in str(refused.value) and "1.5" not in str(refused.value)  # the request's values stay out


def test_a_passive_party_request_is_parsed_by_the_same_fields():
    declared = Struct(PassiveParty.PROTOCOL["route"].request)
    bad_keys = np.zeros((2, 3), dtype=np.int64)  # keys are (tree, node) pairs: two columns
    with pytest.raises(FieldError) as refused:
        declared.parse({"keys": bad_keys, "rows": np.arange(3, dtype=np.int64)})
    assert refused.value.field == "keys" and "2 columns" in refused.value.rule


@pytest.mark.parametrize("answer, message", [
    ({"type": "Loss", "fields": {"value": 0.2, "n_rows": 0}}, r"^Loss\.n_rows must be an int >= 1, got 0$"),
    ({"type": "FinalLosses", "fields": {"values": [0.1, "x"], "n_rows": 3}},
     r"^FinalLosses\.values\[1\] must be a float, got \(0\.1, 'x'\)$"),
    ({"type": "SessionTicket", "fields": {"token": "t" * 20, "site": "s", "role": "curator", "unit": "u",
                                          "n_rows": 3}},
     r"^SessionTicket\.token must be a str of 32\.\.128 characters, got a str of 20 characters$"),
    ({"type": "RowIds", "fields": {"count": 2, "data": b"123"}}, r"^RowIds\.data must be 16 bytes, got bytes of 3$"),
])
def test_a_malformed_answer_is_refused_naming_its_field(answer, message):
    """What the analyst's client rebuilds from a reply (``from_wire``) is checked by the records' declared fields."""
    with pytest.raises(BoundaryViolationError, match=message):
        from_wire(answer)
