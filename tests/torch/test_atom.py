# SPDX-License-Identifier: GPL-2.0
"""Logical devices over four ATOM-class cards (fresh processes: the
mapping variables are read until the first real use)."""

import json

import pytest
from conftest import run_python

pytestmark = [pytest.mark.card, pytest.mark.atom4, pytest.mark.full]

PROBE = """
import json, torch, torch_rbln
C = torch_rbln._C
r = {"count": torch_rbln.device_count(), "physical": torch_rbln.physical_device_count(),
     "npus": [C.npus_of(i) for i in range(torch_rbln.device_count())],
     "after_queries": C.committed()}
with torch_rbln.device(1):
    x = torch.empty(4, dtype=torch.float16, device=torch_rbln.DEVICE_TYPE)
r["device"] = str(x.device)
r["after_lazy_tensor"] = C.committed()
x.fill_(1)
y = x + x
r["after_use"] = C.committed()
r["sum"] = y.cpu().tolist()
print(json.dumps(r))
"""


def test_npus_per_device_2_over_four_atom_cards_gives_two_logical_devices_committed_late():
    r = json.loads(run_python(PROBE, env={"RBLN_NPUS_PER_DEVICE": "2"}))
    assert r["count"] == 2 and r["physical"] == 4
    assert r["npus"] == [[0, 1], [2, 3]]
    assert r["after_queries"] is False and r["after_lazy_tensor"] is False
    assert r["after_use"] is True
    assert r["device"].endswith(":1") and r["sum"] == [2.0, 2.0, 2.0, 2.0]


def test_without_grouping_each_atom_card_is_a_logical_device():
    r = json.loads(run_python(PROBE, env={"RBLN_NPUS_PER_DEVICE": ""}))
    assert r["count"] == 4 and r["physical"] == 4


def test_a_bad_grouping_variable_is_refused_naming_it():
    out = run_python("""
import torch, torch_rbln
print(torch_rbln.device_count())
try:
    torch_rbln.physical_device_count()
    print("accepted")
except RuntimeError as e:
    print(e)
""", env={"RBLN_NPUS_PER_DEVICE": "3"})
    assert out.splitlines()[0] == "0" and "RBLN_NPUS_PER_DEVICE" in out
