// SPDX-License-Identifier: GPL-2.0
// A C++ program built against an installed librbln through
// find_package(rbln) (tests/install/install_test.sh): prints the library
// version and the number of logical devices (0 without a card).
//
// It is written as a framework backend would be, against the umbrella
// header alone: with a card it runs a small workload on logical device 0
// (a stream, storages, an operator, a copy back, an event, the caching
// allocator's statistics); without one it still compiles and links all of
// that, so every call below must be declared by an installed header and
// exported by librbln.so.
#include <rbln/rbln.hpp>

#include <array>
#include <cstddef>
#include <iostream>
#include <span>

namespace {

// relu of 4 floats on device 0; returns whether the result is right.
bool run_workload(std::ostream& out) {
    const std::shared_ptr<rbln::Device> device = rbln::Device::get(0);
    rbln::Stream stream(device);
    const std::array<float, 4> in{-1.0F, 2.0F, -3.0F, 4.0F};
    auto a = rbln::Storage::create(0, sizeof(in), rbln::ElementType::Fp32);
    auto b = rbln::Storage::create(0, sizeof(in), rbln::ElementType::Fp32);
    rbln::ops::from_host(rbln::StorageView::whole(a), std::as_bytes(std::span(in)));
    rbln::Event start;
    start.record(stream);
    rbln::ops::relu(stream, rbln::StorageView::whole(b), rbln::StorageView::whole(a));
    std::array<float, 4> got{};
    rbln::ops::to_host(rbln::StorageView::whole(b), std::as_writable_bytes(std::span(got)));
    stream.synchronize();

    const rbln::DeviceAllocator& allocator = rbln::process_allocator(0);
    const rbln::MemoryStats stats = allocator.memory_stats();
    out << "  " << device->node_path() << ": relu -> " << got[0] << " " << got[1] << " " << got[2]
        << " " << got[3] << ", allocated.all.current " << stats.at("allocation.all.current") << ", "
        << rbln::format_bytes(allocator.memory_reserved()) << " reserved\n";
    return got == std::array<float, 4>{0.0F, 2.0F, 0.0F, 4.0F};
}

} // namespace

int main() {
    // Parsing needs no card: a library call that runs everywhere.
    const rbln::AllocatorConfig config = rbln::AllocatorConfig::parse("max_split_size_mb:128");
    if (config.max_split_size != 128ULL << 20) {
        std::cerr << "AllocatorConfig::parse gave " << config.max_split_size << "\n";
        return 1;
    }
    unsigned count = 0;
    try {
        count = rbln::Runtime::process().device_count();
        std::cout << "c++ (" << RBLN_CONSUMER_KIND << "): librbln " << rbln::library_version()
                  << ", " << count << " logical devices\n";
        if (count > 0 && !run_workload(std::cout))
            return 1;
    } catch (const rbln::Error& e) {
        std::cerr << "rbln::Error: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
