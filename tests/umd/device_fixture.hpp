// SPDX-License-Identifier: GPL-2.0
// device_fixture.hpp - a Device over a FakeKernel whose jobs run their
// packets, on the io_uring path (FakeRing) or the ioctl path.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "fake_kernel.hpp"
#include "fake_ring.hpp"
#include "rbln/device.hpp"

namespace rbln::test {

enum class Path { Uring, Ioctl };

inline std::string path_name(const ::testing::TestParamInfo<Path>& info) {
    return info.param == Path::Uring ? "IoUring" : "Ioctl";
}

inline std::shared_ptr<Device> fake_device(const std::shared_ptr<FakeKernel>& k, Path path,
                                           DeviceOptions o = {}) {
    k->run_packets = true;
    o.submitter.warn = [](const std::string&) {};
    if (path == Path::Uring)
        k->rings = fake_ring_factory(*k);
    else
        o.submitter.use_io_uring = false;
    return Device::open(k, 0, o);
}

class DeviceTest : public ::testing::TestWithParam<Path> {
protected:
    void SetUp() override { dev = fake_device(k, GetParam(), options()); }
    virtual DeviceOptions options() { return {}; }
    std::shared_ptr<FakeKernel> k = std::make_shared<FakeKernel>();
    std::shared_ptr<Device> dev;
};

} // namespace rbln::test
