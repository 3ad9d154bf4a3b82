# SPDX-License-Identifier: GPL-2.0
"""Operators on the card against the CPU, views, copies, the CPU fallback
and the errors (torch_rbln's own behaviour beyond the examples)."""

import logging

import pytest
import torch
import torch_rbln
from conftest import on_card

pytestmark = pytest.mark.card
FLOATS = [torch.float32, torch.float16, torch.bfloat16]
TOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 2e-2}


def close(dev_result, cpu_result, dtype):
    tol = TOL[dtype]
    torch.testing.assert_close(dev_result.cpu().float(), cpu_result.float(), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", FLOATS)
def test_elementwise_operators_run_on_the_card_and_match_the_cpu(dev, dtype):
    a = torch.randn(4, 33).to(dtype)
    b = torch.randn(4, 33).to(dtype)
    row = torch.randn(33).to(dtype)
    da, db, drow = a.to(dev), b.to(dev), row.to(dev)
    close(on_card(lambda: da + db), a.float() + b.float(), dtype)
    close(on_card(lambda: da - db), a.float() - b.float(), dtype)
    close(on_card(lambda: da * db), a.float() * b.float(), dtype)
    close(on_card(lambda: torch.relu(da)), torch.relu(a.float()), dtype)
    close(on_card(lambda: da * 0.5), a.float() * 0.5, dtype)
    close(on_card(lambda: da + drow), a.float() + row.float(), dtype)  # broadcast
    close(on_card(lambda: torch.add(da, db, alpha=2)), a.float() + 2 * b.float(), dtype)
    c = da.clone()
    on_card(lambda: c.add_(db))
    on_card(lambda: c.mul_(2))
    on_card(lambda: c.relu_())
    close(c, torch.relu((a.float() + b.float()) * 2), dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_matmul_mm_addmm_and_linear_accumulate_in_fp32_on_the_card(dev, dtype):
    a = torch.randn(16, 24).to(dtype)
    b = torch.randn(24, 8).to(dtype)
    bias = torch.randn(8).to(dtype)
    ref = a.float() @ b.float()
    close(on_card(lambda: a.to(dev) @ b.to(dev)), ref, dtype)
    close(on_card(lambda: torch.mm(a.to(dev), b.to(dev))), ref, dtype)
    close(on_card(lambda: torch.addmm(bias.to(dev), a.to(dev), b.to(dev), beta=0.5, alpha=2)),
          0.5 * bias.float() + 2 * ref, dtype)
    w = b.t().contiguous()
    close(on_card(lambda: torch.nn.functional.linear(a.to(dev), w.to(dev), bias.to(dev))),
          ref + bias.float(), dtype)


@pytest.mark.parametrize("src,dst", [(torch.float32, torch.float16),
                                     (torch.float16, torch.bfloat16),
                                     (torch.bfloat16, torch.float32)])
def test_to_dtype_converts_on_the_card_through_cast(dev, src, dst):
    x = torch.randn(5, 7).to(src)
    d = x.to(dev)
    d.add_(0)  # device-latest: the conversion must read the card's copy
    y = on_card(lambda: d.to(dst))
    assert y.dtype == dst and y.device == dev
    assert torch.equal(y.cpu(), x.to(dst))


def test_view_operators_are_metadata_over_one_storage(dev):
    x = torch.arange(24.0).reshape(2, 3, 4).to(dev)
    x.add_(0)  # committed: data_ptr() is the device VA
    info = torch_rbln.storage_info(x)
    assert x.data_ptr() == info["va"]
    cpu = x.cpu()
    views = {
        "view": (lambda t: t.view(4, 6)),
        "reshape": (lambda t: t.reshape(6, 4)),
        "as_strided": (lambda t: t.as_strided((3, 2), (1, 3), 2)),
        "permute": (lambda t: t.permute(2, 0, 1)),
        "transpose": (lambda t: t.transpose(0, 2)),
        "narrow": (lambda t: t.narrow(2, 1, 2)),
        "select": (lambda t: t.select(1, 1)),
        "expand": (lambda t: t[:, :1].expand(2, 3, 4)),
        "squeeze": (lambda t: t.unsqueeze(0).squeeze(0)),
        "unsqueeze": (lambda t: t.unsqueeze(1)),
    }
    for name, f in views.items():
        with torch_rbln.explain(name) as e:
            v = on_card(lambda: f(x))
        assert torch_rbln.storage_info(v)["id"] == info["id"], name
        assert e.counts["lazy_commits"] == 0 and e.counts["pushes"] == 0, name
        assert v.data_ptr() == info["va"] + v.storage_offset() * 4, name
        assert torch.equal(v.cpu(), f(cpu)), name


def test_contiguous_of_a_strided_view_is_one_gather_on_the_card(dev):
    x = torch.randn(6, 10).to(dev)
    t = x.t()
    assert not t.is_contiguous()
    c = on_card(lambda: t.contiguous())
    assert c.is_contiguous()
    assert torch_rbln.storage_info(c)["id"] != torch_rbln.storage_info(x)["id"]
    assert torch.equal(c.cpu(), x.cpu().t())


def test_copies_between_host_and_device_in_every_direction(dev):
    x = torch.randn(3, 5)
    d = x.to(dev)
    assert torch.equal(d.cpu(), x)
    e = torch.empty(3, 5, device=dev)
    e.copy_(d)  # device to device
    assert torch.equal(e.cpu(), x)
    t = torch.empty(5, 3, device=dev)
    t.copy_(x.t())  # a strided host source
    assert torch.equal(t.cpu(), x.t())
    part = torch.zeros(3, 5).to(dev)
    part[:, 1:3].copy_(x[:, 1:3])  # into a strided device view
    expect = torch.zeros(3, 5)
    expect[:, 1:3] = x[:, 1:3]
    assert torch.equal(part.cpu(), expect)
    ints = torch.arange(10, dtype=torch.int64)
    assert torch.equal(ints.to(dev).cpu(), ints)  # integers are stored, not computed


def test_fill_and_zero_fill_on_the_card(dev):
    for dtype in (torch.float32, torch.float16, torch.int64, torch.bool):
        t = torch.empty(37, dtype=dtype, device=dev)
        on_card(lambda: t.fill_(1))
        assert torch.equal(t.cpu(), torch.ones(37, dtype=dtype))
        on_card(lambda: t.zero_())
        assert torch.equal(t.cpu(), torch.zeros(37, dtype=dtype))


def test_a_fresh_tensor_commits_nothing_until_a_device_operation(dev):
    before = torch_rbln.memory_allocated()
    x = torch.empty(1 << 20, device=dev)
    info = torch_rbln.storage_info(x)
    assert not info["resident"] and torch_rbln.memory_allocated() == before
    x.fill_(0)
    assert torch_rbln.storage_info(x)["resident"]
    assert torch_rbln.memory_allocated() == before + (4 << 20)
    assert x.data_ptr() == torch_rbln.storage_info(x)["va"]


def test_unsupported_operators_fall_back_to_the_cpu_logging_once(dev, caplog):
    caplog.set_level(logging.INFO, logger="torch_rbln")
    x = torch.randn(8).to(dev)
    y1 = torch.expm1(x)
    y2 = torch.expm1(x)
    assert y1.device == dev
    assert torch.allclose(y1.cpu(), torch.expm1(x.cpu())) and torch.equal(y1.cpu(), y2.cpu())
    logged = [r for r in caplog.records if "aten::expm1" in r.getMessage()]
    assert len(logged) == 1 and logged[0].levelno == logging.INFO
    assert "aten::expm1.out" in torch_rbln.fallback_ops() or \
        "aten::expm1" in torch_rbln.fallback_ops()


def test_disable_fallback_unsupported_op_raises_instead(dev, monkeypatch):
    x = torch.randn(8).to(dev)
    monkeypatch.setenv("TORCH_RBLN_DISABLE_FALLBACK", "unsupported_op")
    with pytest.raises(NotImplementedError, match="TORCH_RBLN_DISABLE_FALLBACK"):
        torch.sigmoid(x)
    on_card(lambda: x + x)  # supported operators still run


def test_a_tensor_on_another_device_is_refused_like_pytorch(dev):
    x = torch.randn(4).to(dev)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        x + torch.randn(4)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.mm(x.view(2, 2), torch.randn(2, 2))


def test_tensors_of_two_devices_are_refused(dev, dev1):
    with pytest.raises(RuntimeError, match="same device"):
        torch.ones(3, device=dev) + torch.ones(3, device=dev1)


def test_an_unsupported_dtype_is_refused_saying_what_to_do(dev):
    with pytest.raises(TypeError, match="do not support ComplexFloat.*convert"):
        torch.zeros(2, dtype=torch.complex64, device=dev)


def test_a_device_index_out_of_range_is_refused(dev):
    n = torch_rbln.device_count()
    with pytest.raises(IndexError, match="invalid device ordinal"):
        torch.empty(2, device=torch_rbln.device_of(n))
    with pytest.raises(IndexError, match="invalid device ordinal"):
        torch_rbln.set_device(n)


def test_huge_host_memory_is_pinned_and_copies_asynchronously(dev):
    h = torch_rbln.huge_host_empty(1 << 20, dtype=torch.float32)
    assert h.rbln_backing in ("hugetlb", "thp", "small-pages")
    assert h.data_ptr() % (2 << 20) == 0 and torch_rbln.is_pinned(h)
    h.fill_(2.0)
    d = torch_rbln.bind_device_memory(torch.empty(1 << 20, device=dev))
    with torch_rbln.explain("huge") as e:
        d.copy_(h, non_blocking=True)
    assert e.counts["async_transfers"] == 1, e.report()
    torch_rbln.synchronize()
    assert torch.equal(d.cpu(), h)


def test_offload_pages_host_copies_out_and_brings_them_back(dev, tmp_path):
    with torch_rbln.offload() as scope:
        t = torch.empty(1 << 18, device=dev)
        t.copy_(torch.full((1 << 18,), 7.0))  # the host copy (lazy: not on the card)
    assert scope.stats()["writes"] == 1 and scope.stats()["bytes_offloaded"] == 1 << 20
    assert torch.equal(t.cpu(), torch.full((1 << 18,), 7.0))
    assert scope.stats()["reads"] == 1


def test_set_device_layout_like_gives_the_layout_without_moving_data(dev):
    ref = torch_rbln.bind_device_memory(torch.zeros(64, device=dev))
    t = torch.empty(64, device=dev)
    with torch_rbln.explain("layout") as e:
        torch_rbln.set_device_layout_like(t, ref)
    assert e.counts["pushes"] == 0 and e.counts["downloads"] == 0
    info = torch_rbln.storage_info
    assert info(t)["layout_format"] == info(ref)["layout_format"]
    with pytest.raises(RuntimeError):
        torch_rbln.set_device_layout_like(torch.empty(32, device=dev), ref)


def test_empty_cache_gives_unused_segments_back(dev):
    x = torch.ones(1 << 20, device=dev)
    assert torch_rbln.memory_reserved() > 0
    del x
    torch_rbln.synchronize()
    torch_rbln.empty_cache()
    assert torch_rbln.memory_allocated() == 0 and torch_rbln.memory_reserved() == 0


@pytest.mark.parametrize("make", [lambda t: t.t(), lambda t: t[:, 1:4], lambda t: t[::2]],
                         ids=["transpose", "narrow", "step"])
def test_contiguous_of_integer_views_uses_the_strided_copy_engine(dev, make):
    x = torch.arange(48, dtype=torch.int64).reshape(6, 8)
    d = x.to(dev)
    d.fill_(0)
    d.copy_(x)  # host copy written; the next device use uploads it
    d.fill_(1)  # device-latest
    expect = make(torch.ones(6, 8, dtype=torch.int64))
    with torch_rbln.explain("contiguous") as e:
        c = on_card(lambda: make(d).contiguous())
    assert e.counts["downloads"] == 0 and e.counts["pushes"] == 0, e.report()
    assert torch.equal(c.cpu(), expect)
    host = torch.arange(48, dtype=torch.int32).reshape(6, 8)
    assert torch.equal(make(host.to(dev)).contiguous().cpu(), make(host))  # host-latest source


def test_common_operators_without_a_kernel_work_through_the_fallback(dev):
    x = torch.tensor([[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]])
    d = x.to(dev)
    assert torch.equal(torch.cat([d, d]).cpu(), torch.cat([x, x]))  # a tensor list
    assert d[1, 2].item() == -6.0  # a Python number back
    assert d.sum().item() == x.sum().item()
    mask = d > 0
    assert mask.device == dev and torch.equal(mask.cpu(), x > 0)  # bool on the device
    assert torch.equal(d.argmax(dim=1).cpu(), x.argmax(dim=1))  # int64 on the device
    assert torch.equal(d[mask].cpu(), x[x > 0])  # indexing by a device mask
