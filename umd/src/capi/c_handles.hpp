// SPDX-License-Identifier: GPL-2.0
// c_handles.hpp - the opaque handles of the C ABI (private to librbln: the
// c_api*.cpp files that hand them out or take them).
#pragma once

#include <memory>

#include "rbln/device.hpp"
#include "rbln/memory.hpp"
#include "rbln/storage.hpp"
#include "rbln/stream.hpp"

// rbln.h
struct rbln_stream {
    rbln::Stream stream;
};
struct rbln_event {
    rbln::Event event;
};
struct rbln_buffer {
    std::shared_ptr<rbln::Device> device;
    std::shared_ptr<rbln::Memory> memory;
};

// rbln_storage.h
struct rbln_storage {
    std::shared_ptr<rbln::Storage> storage;
};
