# SPDX-License-Identifier: GPL-2.0
"""The runtime's documented Python examples, on the emulated card."""

import copy
import gc
import os
import re
import time

import pytest
import torch
import torch_rbln
from conftest import on_card, run_python

pytestmark = pytest.mark.card
DEVICE = torch_rbln.DEVICE_TYPE


def test_memory_allocated_is_zero_after_placing_and_rises_after_the_first_operation(dev):
    gc.collect()
    assert torch_rbln.memory_allocated() == 0, "an earlier test kept a device tensor"
    torch_rbln.reset_peak_memory_stats()
    x = torch.randn(128, 128, dtype=torch.float16).to(dev)
    assert torch_rbln.memory_allocated() == 0, "placing a tensor commits no device memory"
    y = x + x
    tensor_bytes = 128 * 128 * 2
    assert torch_rbln.memory_allocated() == 2 * tensor_bytes  # x, committed at its use, and y
    assert torch_rbln.max_memory_allocated() == torch_rbln.memory_allocated()
    assert torch_rbln.memory_reserved() > torch_rbln.memory_allocated()
    stats = torch_rbln.memory_stats()
    assert stats["allocated_bytes.all.current"] == 2 * tensor_bytes
    assert stats["allocation.all.current"] == 2
    assert torch.equal(y.cpu(), x.cpu() + x.cpu())


def test_tensors_made_in_a_device_context_stay_on_that_device_and_add(dev):
    with torch_rbln.device(0):
        x = torch.tensor([1, 2], dtype=torch.float16, device=DEVICE)
        y = torch.tensor([3, 4], dtype=torch.float16, device=DEVICE)
    assert x.device == torch.device(DEVICE, 0) and y.device == x.device
    z = on_card(lambda: x + y)
    assert z.device == x.device
    assert str(z.cpu()) == "tensor([4., 6.], dtype=torch.float16)"
    assert repr(z) == f"tensor([4., 6.], device='{DEVICE}:0', dtype=torch.float16)"


def test_a_device_context_of_the_second_device_places_its_tensors_there(dev, dev1):
    with torch_rbln.device(1):
        assert torch_rbln.current_device() == 1
        x = torch.ones(3, device=DEVICE)
    assert torch_rbln.current_device() == 0
    assert x.device == dev1
    assert torch.equal((x + x).cpu(), torch.full((3,), 2.0))


@pytest.mark.skipif(os.environ.get("RBLN_VM_FAMILY", "rebel100") != "rebel100",
                    reason="the per-chiplet table of a Rebel100-class card")
def test_the_memory_summary_after_one_fp16_matmul_has_a_row_per_npu_and_chiplet(dev):
    a = torch.randn(64, 64, dtype=torch.float16).to(dev)
    b = torch.randn(64, 64, dtype=torch.float16).to(dev)
    c = on_card(lambda: a @ b)
    torch_rbln.synchronize()
    summary = torch_rbln.memory_summary()
    rows = [line.split() for line in summary.splitlines()]
    chiplet_rows = [r for r in rows if len(r) == 8 and r[0] == "0" and r[1].isdigit()]
    assert [r[1] for r in chiplet_rows] == ["0", "1", "2", "3"], summary
    assert float(chiplet_rows[0][4]) > 0, "chiplet 0 reserved a segment for the matmul"
    assert all(float(r[4]) == 0 for r in chiplet_rows[1:]), summary
    assert any(r and r[0] == "total" for r in rows), summary
    assert re.search(r"alloc retries: 0\s+ooms: 0", summary), summary
    per = torch_rbln.memory_stats_per_chiplet()
    assert per["npu.0.chiplet.0.allocated_bytes.all.current"] == 3 * 64 * 64 * 2
    del c


def test_a_non_blocking_copy_from_pinned_memory_into_bound_memory_returns_before_it_is_done(dev):
    n = 8 << 20  # 32 MiB of float32
    src = torch_rbln.empty_pinned(n, dtype=torch.float32)
    src.fill_(1.5)
    assert torch_rbln.is_pinned(src)
    dst = torch_rbln.bind_device_memory(torch.empty(n, device=dev))
    a = torch.randn(2048, 2048).to(dev)
    start = torch_rbln.Event(enable_timing=True)
    done = torch_rbln.Event(enable_timing=True)
    start.record()
    busy = a @ a  # about a second of card time before the copy on the stream
    with torch_rbln.explain("copy") as e:
        t0 = time.monotonic()
        dst.copy_(src, non_blocking=True)
        host_ms = (time.monotonic() - t0) * 1000
    done.record()
    assert e.counts["async_transfers"] == 1 and e.counts["sync_waits"] == 0, e.report()
    torch_rbln.synchronize()  # waits for the copy
    assert done.query()
    card_ms = start.elapsed_time(done)
    assert host_ms < card_ms / 2, f"copy_ took {host_ms:.1f} ms of the card's {card_ms:.1f} ms"
    assert torch.equal(dst.cpu(), src)
    del busy


def test_non_blocking_copies_outside_the_rule_are_synchronous(dev):
    pinned = torch_rbln.pin_memory(torch.arange(1024.0))
    lazy = torch.empty(1024, device=dev)
    with torch_rbln.explain("into a lazy tensor") as e:
        lazy.copy_(pinned, non_blocking=True)
    assert e.counts["async_transfers"] == 0
    assert torch_rbln.storage_info(lazy)["coherence"] == "host-latest"
    assert not torch_rbln.storage_info(lazy)["resident"], "nothing committed"
    pageable = torch.arange(1024.0)
    bound = torch_rbln.bind_device_memory(torch.empty(1024, device=dev))
    with torch_rbln.explain("from pageable memory") as e:
        bound.copy_(pageable, non_blocking=True)
    assert e.counts["async_transfers"] == 0
    assert torch.equal(bound.cpu(), pageable) and torch.equal(lazy.cpu(), pinned)


def test_a_non_blocking_download_into_pinned_memory_is_asynchronous(dev):
    x = torch_rbln.bind_device_memory(torch.empty(4096, device=dev))
    x.fill_(3.0)
    out = torch_rbln.empty_pinned(4096, dtype=torch.float32)
    with torch_rbln.explain("download") as e:
        out.copy_(x, non_blocking=True)
    assert e.counts["async_transfers"] == 1 and e.counts["downloads"] == 0, e.report()
    torch_rbln.synchronize()
    assert torch.equal(out, torch.full((4096,), 3.0))


def test_a_stream_waiting_on_another_streams_event_holds_the_device_not_the_host(dev):
    a = torch.randn(2048, 2048).to(dev)
    # x already on the card: an upload would be a synchronous copy in s2's
    # order, which waits for the event too.
    x = torch.arange(16.0).to(dev) * 1
    torch_rbln.synchronize()
    s1 = torch_rbln.Stream()
    s2 = torch_rbln.Stream()
    begin = torch_rbln.Event(enable_timing=True)
    e1 = torch_rbln.Event(enable_timing=True)
    with torch_rbln.stream(s1):
        assert torch_rbln.current_stream() == s1
        begin.record()
        busy = a @ a  # about a second of card time
        e1.record()
    assert torch_rbln.current_stream() == torch_rbln.default_stream()
    e2 = torch_rbln.Event(enable_timing=True)
    with torch_rbln.explain("wait") as ex:
        t0 = time.monotonic()
        s2.wait_event(e1)
        with torch_rbln.stream(s2):
            y = x + x
            e2.record()
        host_ms = (time.monotonic() - t0) * 1000
    assert ex.counts["sync_waits"] == 0, ex.report()
    s2.synchronize()
    assert e1.query(), "s2 finished, so the event it waited for is done"
    card_ms = begin.elapsed_time(e1)
    assert host_ms < card_ms / 2, f"the host waited {host_ms:.1f} ms of s1's {card_ms:.1f} ms"
    assert e1.elapsed_time(e2) >= 0, "s2's work ran after s1's event"
    assert torch.equal(y.cpu(), torch.arange(16.0) * 2)
    del busy


def test_events_time_the_card_with_enable_timing(dev):
    a = torch.randn(512, 512).to(dev)
    start = torch_rbln.Event(enable_timing=True)
    end = torch_rbln.Event(enable_timing=True)
    start.record()
    c = a @ a
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) > 0
    del c


def test_explain_tells_a_step_that_crosses_the_host_from_one_that_stays_on_the_device(dev):
    x = torch.randn(256, 256).to(dev)
    with torch_rbln.explain("on the device") as good:
        y = torch.relu(x * 2 + x)
        out = y.cpu()
    report = good.report()
    assert report.startswith("[clean]"), report
    assert good.counts["pushes"] == 1 and good.counts["downloads"] == 1, report
    assert good.counts["cpu_fallback"] == 0
    assert torch.allclose(out, torch.relu(x.cpu() * 3))

    x = torch.randn(256, 256).to(dev)
    with torch_rbln.explain("across the host") as bad:
        y = torch.sigmoid(x * 2) + x
        out = y.cpu()
    report = bad.report()
    assert report.startswith("[overhead:"), report
    assert "cpu_fallback: 1 (aten::sigmoid.out)" in report
    assert not bad.clean
    assert torch.allclose(out, torch.sigmoid(x.cpu() * 2) + x.cpu())


def test_nn_linear_forward_and_backward_on_the_device_match_the_cpu(dev):
    torch.manual_seed(0)
    lin = torch.nn.Linear(32, 16)
    lin_dev = copy.deepcopy(lin).to(dev)
    x = torch.randn(8, 32)
    x_dev = x.to(dev).requires_grad_()
    x.requires_grad_()
    out = lin(x)
    out_dev = lin_dev(x_dev)
    assert out_dev.device == dev
    torch.testing.assert_close(out_dev.cpu(), out, rtol=1e-5, atol=1e-5)
    (out * out).sum().backward()
    (out_dev * out_dev).sum().backward()
    torch.testing.assert_close(lin_dev.weight.grad.cpu(), lin.weight.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(lin_dev.bias.grad.cpu(), lin.bias.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(x_dev.grad.cpu(), x.grad, rtol=1e-5, atol=1e-5)


@pytest.mark.full
def test_a_forked_child_of_a_process_that_used_the_device_is_told_to_use_spawn(dev):
    x = torch.ones(4, device=dev)
    (x + x).cpu()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: any device use must fail
        os.close(r)
        try:
            (x + x).cpu()
            msg = "no error"
        except RuntimeError as err:
            msg = str(err)
        os.write(w, msg.encode())
        os._exit(0)
    os.close(w)
    msg = os.read(r, 4096).decode()
    os.waitpid(pid, 0)
    assert "spawn" in msg, msg


@pytest.mark.full
def test_the_mapping_commits_only_at_the_first_real_use(dev):
    out = run_python("""
import torch, torch_rbln
C = torch_rbln._C
n = torch_rbln.device_count(); p = torch_rbln.physical_device_count()
s = torch_rbln.memory_allocated()
x = torch.empty(8, device=torch_rbln.device_of(0))
before = C.committed()
x.fill_(1.0)
print(n, p, s, before, C.committed())
""")
    n, p, s, before, after = out.split()
    assert int(n) >= 1 and int(p) >= 1 and s == "0"
    assert before == "False", "queries, statistics and a lazy tensor commit nothing"
    assert after == "True"


def test_the_readme_example_prints_what_it_says(dev, capsys):
    readme = open(os.path.join(os.path.dirname(__file__), "../../README.md")).read()
    code = readme.split("```python\n", 1)[1].split("```", 1)[0]
    expected = [line.split("# ", 1)[1] for line in code.splitlines() if "print(" in line]
    gc.collect()
    exec(compile(code, "README.md", "exec"), {})
    assert capsys.readouterr().out.splitlines() == expected
