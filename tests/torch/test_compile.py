# SPDX-License-Identifier: GPL-2.0
"""torch_rbln.compile: functions and modules as one graph on the card.

Pins: the documented ``relu(x + y)`` example equals eager, byte for byte,
replays for the same shape (one GRAPH_EXEC job per call) and compiles again
for a new shape or a new Python scalar; a 2-layer MLP step is one graph
whose result equals the eager module's; explain() counts the replays and
recompiles and shows the upload line; an operator that does not lower
runs the function on the CPU with a warning, or raises with
TORCH_RBLN_DISABLE_FALLBACK=compile_error; arguments that are neither
tensors nor numbers are refused.
"""

import pytest
import torch
import torch_rbln

from conftest import on_card

pytestmark = pytest.mark.card


@pytest.fixture(autouse=True)
def settled():
    """Each test ends with the card idle, so the blocks of its tensors are
    back in the allocator's pool (a block freed while a job used it is
    held until the job is reaped) and the next test starts from zero."""
    yield
    import gc
    gc.collect()
    torch_rbln.synchronize()


def test_the_documented_relu_of_a_sum_replays_for_one_shape_and_recompiles_for_another(dev):
    @torch_rbln.compile
    def f(x, y):
        return torch.relu(x + y)

    x = torch.randn(8, 16).to(dev)
    y = torch.randn(8, 16).to(dev)
    before = torch_rbln._C.graph_stats(0)
    out = on_card(f, x, y)
    assert torch.equal(out.cpu(), torch.relu(x + y).cpu())
    out2 = on_card(f, x, y)
    assert torch.equal(out2.cpu(), out.cpu())
    s = f.stats()
    assert (s["recompiles"], s["replays"]) == (1, 1)
    after = torch_rbln._C.graph_stats(0)
    assert after["replays"] - before["replays"] == 2, "one GRAPH_EXEC job per call"

    a = torch.randn(4, 32).to(dev)
    b = torch.randn(4, 32).to(dev)
    assert torch.equal(f(a, b).cpu(), torch.relu(a + b).cpu())
    assert f.stats()["recompiles"] == 2, "a new shape is a new profile"


def test_a_python_scalar_is_part_of_the_profile(dev):
    @torch_rbln.compile
    def scaled(x, s):
        return torch.relu(x) * s

    x = torch.randn(16, 16).to(dev)
    assert torch.equal(scaled(x, 2.0).cpu(), (torch.relu(x) * 2.0).cpu())
    assert torch.equal(scaled(x, 2.0).cpu(), (torch.relu(x) * 2.0).cpu())
    assert torch.equal(scaled(x, 0.5).cpu(), (torch.relu(x) * 0.5).cpu())
    s = scaled.stats()
    assert (s["recompiles"], s["replays"]) == (2, 1)


def test_a_two_layer_mlp_step_is_one_graph_equal_to_eager(dev):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 16)).to(dev)
    compiled = torch_rbln.compile(model)
    x = torch.randn(8, 32).to(dev)
    with torch.no_grad():
        want = on_card(model, x).cpu()
        before = torch_rbln._C.graph_stats(0)["replays"]
        got = on_card(compiled, x).cpu()
        again = on_card(compiled, x).cpu()
    assert torch.equal(got, want)
    assert torch.equal(again, want)
    assert torch_rbln._C.graph_stats(0)["replays"] - before == 2
    assert compiled.stats()["recompiles"] == 1


def test_explain_counts_replays_and_recompiles(dev):
    @torch_rbln.compile
    def f(x, y):
        return x * y + x

    x = torch.randn(8, 8).to(dev)
    y = torch.randn(8, 8).to(dev)
    with torch_rbln.explain() as e:
        f(x, y)
        f(x, y)
    report = e.report()
    # every call is a GRAPH_EXEC job (the first one after its capture)
    assert "graphs: 2 replays, 1 recompiles" in report, report
    assert "graph_upload defs=" in report, report


def test_an_operator_that_does_not_lower_runs_on_the_cpu_with_a_warning(dev):
    def g(x):
        return torch.sigmoid(x) + x

    x = torch.randn(4, 4).to(dev)
    compiled = torch_rbln.compile(g)
    with pytest.warns(RuntimeWarning, match="sigmoid"):
        out = compiled(x)
    assert out.device == x.device
    assert torch.allclose(out.cpu(), torch.sigmoid(x.cpu()) + x.cpu())


def test_compile_error_forbids_the_cpu(dev, monkeypatch):
    monkeypatch.setenv("TORCH_RBLN_DISABLE_FALLBACK", "compile_error")

    def g(x):
        return torch.sigmoid(x)

    with pytest.raises(RuntimeError, match="sigmoid.*compile_error"):
        torch_rbln.compile(g)


def test_arguments_other_than_tensors_and_numbers_are_refused(dev):
    @torch_rbln.compile
    def f(x, y):
        return x + y

    with pytest.raises(TypeError, match="argument 1 is a str"):
        f(torch.ones(2).to(dev), "two")
