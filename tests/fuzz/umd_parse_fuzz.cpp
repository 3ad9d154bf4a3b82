// SPDX-License-Identifier: GPL-2.0
// libFuzzer target: librbln's parsers of text and bytes it does not control.
// The first input byte picks the parser, the rest is its input:
//   0  AllocatorConfig::parse      RBLN_ALLOC_CONF (the user's environment)
//   1  parse_fdinfo                /proc/<pid>/fdinfo/<fd> (any driver's)
//   2  parse_fdinfo_size           one size value of fdinfo
//   3  rbln_parse_device           "rbln:N" from a framework (C ABI)
//   4  fw::parse_control_block     the card's control block (BAR or sysfs)
// What must hold: a parser returns a value or a typed rbln::Error with a
// message (never another exception, a crash or undefined behaviour), and
// what it returns keeps the limits its documentation states.
// RBLN_FUZZ_SEEDS=DIR writes a seed corpus and exits.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <string_view>

#include "fuzz_seeds.h"
#include "kernel/fw_ctrl.hpp"
#include "rbln/allocator.hpp"
#include "rbln/fdinfo.hpp"
#include "rbln/rbln.h"
#include "rbln_fw_ctrl.h"

namespace {

[[noreturn]] void die(const char* what) {
    std::fprintf(stderr, "umd_parse_fuzz: %s\n", what);
    std::abort();
}

void check_error(const rbln::Error& e, rbln::Errc code) {
    if (e.code() != code)
        die("a parser failed with an unexpected error code");
    if (std::strlen(e.what()) == 0)
        die("an error without a message");
}

void alloc_conf(std::string_view text) {
    try {
        const rbln::AllocatorConfig c = rbln::AllocatorConfig::parse(text, "RBLN_ALLOC_CONF");
        if (c.garbage_collection_threshold < 0.0 || c.garbage_collection_threshold >= 1.0)
            die("garbage_collection_threshold accepted outside [0, 1)");
    } catch (const rbln::Error& e) {
        check_error(e, rbln::Errc::BadConfig);
    }
}

void fdinfo(std::string_view text) {
    const rbln::FdinfoRecord r = rbln::parse_fdinfo(text);
    if (r.hbm.size() > RBLN_FW_MAX_CHIPLETS)
        die("parse_fdinfo made more chiplets than the uAPI has");
}

void fdinfo_size(std::string_view text) {
    (void)rbln::parse_fdinfo_size(text);
}

void device_string(std::string_view text) {
    const std::string s(text); // the C ABI takes a NUL-terminated string
    int index = -2;
    const rbln_status st = rbln_parse_device(s.c_str(), &index);
    if (st == RBLN_OK && index < -1)
        die("rbln_parse_device succeeded without an index");
}

void control_block(std::span<const std::byte> bytes) {
    const auto r = rbln::fw::parse_control_block(bytes, "fuzz");
    if (!r) {
        check_error(r.error(), rbln::Errc::BadControlBlock);
        return;
    }
    if (r->chiplet_count < 1 || r->chiplet_count > RBLN_FW_MAX_CHIPLETS ||
        r->hbm.size() != r->chiplet_count)
        die("a control block accepted with a bad chiplet count");
    for (const rbln::fw::HbmRegion& h : r->hbm) {
        if (h.bar_offset > r->bar_size || h.size > r->bar_size - h.bar_offset)
            die("a control block accepted with HBM outside the BAR");
    }
}

void write_seeds(const std::filesystem::path& dir) {
    std::filesystem::create_directories(dir);
    auto put = [&](const std::string& name, char which, std::string_view body) {
        std::ofstream f(dir / name, std::ios::binary);
        f.put(which);
        f.write(body.data(), static_cast<std::streamsize>(body.size()));
    };
    put("conf", 0,
        "max_split_size_mb:64,roundup_power2_divisions:[256:1,512:2,>:4],"
        "garbage_collection_threshold:0.6");
    put("conf_short", 0, "roundup_power2_divisions:8");
    put("fdinfo", 1,
        "pos:\t0\nflags:\t02100002\nmnt_id:\t27\ndrm-driver:\trbln\n"
        "drm-pdev:\t0000:00:03.0\ndrm-client-id:\t7\ndrm-total-memory:\t4 KiB\n"
        "drm-total-hbm0:\t2 MiB\ndrm-resident-hbm3:\t1024\nrbln-pinned-memory:\t8 KiB\n"
        "rbln-asid:\t1\nrbln-mmu-faults:\t0\ndrm-engine-chiplet0:\t123 ns\n");
    put("size", 2, "15 MiB");
    put("device", 3, "rbln:1");
    // The control block of a 4-chiplet card with 256 MiB per chiplet.
    rbln_fw_ctrl c{};
    c.magic = RBLN_FW_MAGIC;
    c.iface_major = RBLN_FW_IFACE_MAJOR;
    c.iface_minor = RBLN_FW_IFACE_MINOR;
    c.ctrl_size = sizeof(c);
    c.family = RBLN_FW_FAMILY_REBEL100;
    c.chiplet_count = 4;
    c.num_vectors = 3;
    c.bar_size = 2ULL << 30;
    for (unsigned i = 0; i < 4; i++) {
        c.hbm[i].bar_offset = (2ULL << 20) + i * (256ULL << 20);
        c.hbm[i].size = 256ULL << 20;
    }
    std::memcpy(c.serial, "RBLNFUZZ-0001", 13);
    std::memcpy(c.fw_version, "1.2.0", 5);
    put("ctrl", 4, std::string_view(reinterpret_cast<const char*>(&c), sizeof(c)));
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
    rbln::fuzz::write_seeds_if_asked(write_seeds);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0)
        return 0;
    const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
    switch (data[0] % 5) {
    case 0:
        alloc_conf(text);
        break;
    case 1:
        fdinfo(text);
        break;
    case 2:
        fdinfo_size(text);
        break;
    case 3:
        device_string(text);
        break;
    default:
        control_block(std::as_bytes(std::span(data + 1, size - 1)));
        break;
    }
    return 0;
}
