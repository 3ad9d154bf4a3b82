# SPDX-License-Identifier: GPL-2.0
"""pytest configuration of torch_rbln's tests (tests/torch/README.md).

Markers: ``card`` needs an emulated card (the VM); ``atom4`` needs four
ATOM-class cards; ``full`` runs only in ``make test-torch`` (it starts
Python processes of its own, each paying PyTorch's import).  Tests skip
when what they need is absent, so the same files run on the host (the
pure-Python part) and in each VM configuration.
"""

import gc
import os

import pytest
import torch_rbln


def pytest_configure(config):
    config.addinivalue_line("markers", "card: needs an emulated rbln card")
    config.addinivalue_line("markers", "atom4: needs four ATOM-class cards")
    config.addinivalue_line("markers", "full: only in make test-torch (slow)")


def pytest_collection_modifyitems(config, items):
    have_card = torch_rbln.is_available()
    family = os.environ.get("RBLN_VM_FAMILY", "")
    cards = int(os.environ.get("RBLN_VM_CARDS", "0") or 0)
    for item in items:
        if "card" in item.keywords and not have_card:
            item.add_marker(pytest.mark.skip(reason="no rbln device (run in the VM)"))
        if "atom4" in item.keywords and (family != "atom" or cards < 4):
            item.add_marker(pytest.mark.skip(reason="needs 4 ATOM cards"))


@pytest.fixture
def dev():
    """Logical device 0, with every earlier test's tensors gone."""
    gc.collect()
    return torch_rbln.device_of(0)


@pytest.fixture
def dev1():
    if torch_rbln.device_count() < 2:
        pytest.skip("needs two logical devices")
    return torch_rbln.device_of(1)


def on_card(fn, *args):
    """fn(*args), asserting that no operator took the CPU fallback."""
    before = torch_rbln._C.fallback_count()
    out = fn(*args)
    assert torch_rbln._C.fallback_count() == before, torch_rbln.fallback_ops()
    return out


def run_python(code, env=None, timeout=600):
    """Runs ``code`` in a fresh /usr/bin/python3 (fresh device mapping);
    returns its stdout, failing the test with its stderr."""
    import subprocess
    full = dict(os.environ)
    full.update(env or {})
    p = subprocess.run(["/usr/bin/python3", "-c", code], env=full, capture_output=True,
                       text=True, timeout=timeout)
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout
