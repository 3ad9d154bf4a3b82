// SPDX-License-Identifier: GPL-2.0
// fake_kernel.hpp - a stateful fake of rbln.ko behind KernelInterface: it
// answers GET_INFO with the uAPI's size protocol.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "drm/rbln_accel.h"
#include "rbln/kernel.hpp"

namespace rbln::test {

class FakeKernel final : public KernelInterface {
public:
    explicit FakeKernel(std::string path = "/dev/accel/accel0") : path_(std::move(path)) {
        version_.name = "rbln";
        device.family = RBLN_FAMILY_REBEL100;
        device.chiplet_count = 4;
        device.fw_iface_major = 1;
        device.fw_iface_minor = 0;
        device.pci_bus = 0;
        device.pci_dev = 4;
        device.pci_func = 0;
        device.numa_node = -1;
        for (unsigned i = 0; i < 4; i++)
            device.hbm_size[i] = 512ull << 20;
        std::strcpy(device.fw_version, "rbln-emu 0.2.0");
        std::strcpy(device.serial, "RBLNEMU-KERNEL");
        for (unsigned i = 0; i < 16; i++)
            device.uuid[i] = static_cast<__u8>(i);
        telemetry.temp_mc = 51234;
        telemetry.power_uw = 12345678;
        telemetry.chiplet_count = 4;
    }

    const std::string& path() const override { return path_; }
    const DrmVersion& drm_version() const override { return version_; }

    std::uint32_t get_info(std::uint32_t type, std::span<std::byte> out) override {
        calls++;
        std::vector<std::byte> answer;
        if (type == RBLN_INFO_DEVICE) {
            // A newer kernel's answer is longer: the v1 prefix plus zeroes.
            answer.resize(std::max<std::size_t>(device_size, sizeof(device)));
            std::memcpy(answer.data(), &device, sizeof(device));
            answer.resize(device_size);
        } else if (type == RBLN_INFO_TELEMETRY) {
            if (telemetry_errno != 0)
                throw Error::from_errno("ioctl GET_INFO(type 2)", path_, telemetry_errno);
            answer.resize(sizeof(telemetry));
            std::memcpy(answer.data(), &telemetry, sizeof(telemetry));
        } else {
            throw Error::from_errno("ioctl GET_INFO", path_, EINVAL);
        }
        const auto full = static_cast<std::uint32_t>(answer.size());
        // The kernel writes min(in, full) bytes and nothing past them.
        std::memcpy(out.data(), answer.data(), std::min<std::size_t>(out.size(), full));
        return full;
    }

    drm_rbln_info_device device{};
    drm_rbln_info_telemetry telemetry{};
    std::uint32_t device_size = sizeof(drm_rbln_info_device);
    int telemetry_errno = 0;
    int calls = 0;

private:
    std::string path_;
    DrmVersion version_;
};

} // namespace rbln::test
