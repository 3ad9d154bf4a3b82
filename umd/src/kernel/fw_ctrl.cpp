// SPDX-License-Identifier: GPL-2.0
// fw_ctrl.cpp - decoding and validating the firmware-iface control block.

#include "kernel/fw_ctrl.hpp"

#include <array>
#include <bit>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <optional>

#include "rbln_fw_ctrl.h"

namespace rbln::fw {

static_assert(sizeof(rbln_fw_ctrl) == 0x1000, "firmware-iface control block is 4 KiB");
static_assert(offsetof(rbln_fw_ctrl, serial) == 0x30);
static_assert(offsetof(rbln_fw_ctrl, bar_size) == 0x70);
static_assert(offsetof(rbln_fw_ctrl, fw_state) == 0xf8);
static_assert(offsetof(rbln_fw_ctrl, host_ctrl) == 0x150);
static_assert(offsetof(rbln_fw_ctrl, event_head) == 0x180);

namespace {

// Little-endian reader over the raw bytes (the block is LE on every host).
class Reader {
public:
    explicit Reader(std::span<const std::byte> bytes) : bytes_(bytes) {}

    template <typename T> T le(std::size_t offset) const {
        T v = 0;
        for (std::size_t i = 0; i < sizeof(T); i++)
            v |= static_cast<T>(static_cast<T>(std::to_integer<unsigned>(bytes_[offset + i]))
                                << (8 * i));
        return v;
    }

    // A NUL-terminated string in a fixed field; nullopt if unterminated.
    std::optional<std::string> str(std::size_t offset, std::size_t size) const {
        const auto* p = reinterpret_cast<const char*>(bytes_.data() + offset);
        const void* nul = std::memchr(p, '\0', size);
        if (nul == nullptr)
            return std::nullopt;
        return std::string(p, static_cast<const char*>(nul));
    }

private:
    std::span<const std::byte> bytes_;
};

std::string hex(std::uint64_t v) {
    std::array<char, 24> buf{};
    std::snprintf(buf.data(), buf.size(), "0x%llx", static_cast<unsigned long long>(v));
    return buf.data();
}

} // namespace

std::string fw_state_name(std::uint32_t state) {
    switch (state) {
    case RBLN_FW_STATE_RESET:
        return "reset";
    case RBLN_FW_STATE_BOOTING:
        return "booting";
    case RBLN_FW_STATE_READY:
        return "ready";
    case RBLN_FW_STATE_FAULT:
        return "fault";
    default:
        return "unknown(" + std::to_string(state) + ")";
    }
}

std::string fault_code_name(std::uint32_t code) {
    switch (code) {
    case RBLN_FW_FAULT_NONE:
        return "none";
    case RBLN_FW_FAULT_BAD_RING_CONFIG:
        return "bad-ring-config";
    case RBLN_FW_FAULT_BAD_IFACE:
        return "bad-iface";
    case RBLN_FW_FAULT_INTERNAL:
        return "internal";
    case RBLN_FW_FAULT_THERMAL:
        return "thermal";
    default:
        return "unknown(" + std::to_string(code) + ")";
    }
}

Result<ControlBlock> parse_control_block(std::span<const std::byte> bytes,
                                         std::string_view source) {
    const std::string src(source);
    auto fail = [&src](const std::string& why) {
        return Error(Errc::BadControlBlock, "parse", src, 0, why);
    };

    if (bytes.size() < sizeof(rbln_fw_ctrl))
        return fail(std::to_string(bytes.size()) + " bytes, but a control block has " +
                    std::to_string(sizeof(rbln_fw_ctrl)));

    const Reader r(bytes);
    ControlBlock cb;
    const auto magic = r.le<std::uint32_t>(offsetof(rbln_fw_ctrl, magic));
    if (magic != RBLN_FW_MAGIC)
        return fail("bad magic " + hex(magic) + " (expected " + hex(RBLN_FW_MAGIC) +
                    ", \"RBLN\"): not an rbln firmware-iface device");

    cb.iface_major = r.le<std::uint16_t>(offsetof(rbln_fw_ctrl, iface_major));
    cb.iface_minor = r.le<std::uint16_t>(offsetof(rbln_fw_ctrl, iface_minor));
    if (cb.iface_major != RBLN_FW_IFACE_MAJOR)
        return fail("firmware-iface major version " + std::to_string(cb.iface_major) +
                    " is not supported (this host speaks " + std::to_string(RBLN_FW_IFACE_MAJOR) +
                    ".x)");

    cb.ctrl_size = r.le<std::uint32_t>(offsetof(rbln_fw_ctrl, ctrl_size));
    if (cb.ctrl_size < sizeof(rbln_fw_ctrl))
        return fail("ctrl_size " + std::to_string(cb.ctrl_size) + " is smaller than the " +
                    std::to_string(sizeof(rbln_fw_ctrl)) + " bytes of firmware-iface v1");

    cb.family = r.le<std::uint32_t>(offsetof(rbln_fw_ctrl, family));
    if (cb.family != RBLN_FW_FAMILY_REBEL100 && cb.family != RBLN_FW_FAMILY_ATOM)
        return fail("unknown family " + std::to_string(cb.family));

    cb.chiplet_count = r.le<std::uint32_t>(offsetof(rbln_fw_ctrl, chiplet_count));
    if (cb.chiplet_count < 1 || cb.chiplet_count > RBLN_FW_MAX_CHIPLETS)
        return fail("chiplet_count " + std::to_string(cb.chiplet_count) + " is outside 1.." +
                    std::to_string(RBLN_FW_MAX_CHIPLETS));

    cb.doorbell_peer_id = r.le<std::uint32_t>(offsetof(rbln_fw_ctrl, doorbell_peer_id));
    cb.num_vectors = r.le<std::uint32_t>(offsetof(rbln_fw_ctrl, num_vectors));
    if (cb.num_vectors < RBLN_FW_MIN_VECTORS)
        return fail("num_vectors " + std::to_string(cb.num_vectors) + " is below the " +
                    std::to_string(RBLN_FW_MIN_VECTORS) + " the host needs");

    for (std::size_t i = 0; i < cb.uuid.size(); i++)
        cb.uuid[i] = r.le<std::uint8_t>(offsetof(rbln_fw_ctrl, uuid) + i);

    auto serial = r.str(offsetof(rbln_fw_ctrl, serial), sizeof(rbln_fw_ctrl::serial));
    if (!serial)
        return fail("serial is not NUL-terminated");
    cb.serial = std::move(*serial);
    auto fw_version = r.str(offsetof(rbln_fw_ctrl, fw_version), sizeof(rbln_fw_ctrl::fw_version));
    if (!fw_version)
        return fail("fw_version is not NUL-terminated");
    cb.fw_version = std::move(*fw_version);

    cb.bar_size = r.le<std::uint64_t>(offsetof(rbln_fw_ctrl, bar_size));
    if (!std::has_single_bit(cb.bar_size) || cb.bar_size <= RBLN_FW_CTRL_REGION_SIZE)
        return fail("bar_size " + hex(cb.bar_size) +
                    " is not a power of two larger than the control region");

    for (std::uint32_t i = 0; i < cb.chiplet_count; i++) {
        const std::size_t at = offsetof(rbln_fw_ctrl, hbm) + i * sizeof(rbln_fw_hbm_region);
        HbmRegion h{r.le<std::uint64_t>(at), r.le<std::uint64_t>(at + 8)};
        const std::string name = "hbm[" + std::to_string(i) + "]";
        if (h.size == 0 || h.size % RBLN_FW_HBM_ALIGN != 0 || h.bar_offset % RBLN_FW_HBM_ALIGN != 0)
            return fail(name + " (offset " + hex(h.bar_offset) + ", size " + hex(h.size) +
                        ") is empty or not 2 MiB aligned");
        if (h.bar_offset < RBLN_FW_CTRL_REGION_SIZE)
            return fail(name + " at " + hex(h.bar_offset) + " overlaps the control region");
        if (h.bar_offset > cb.bar_size || h.size > cb.bar_size - h.bar_offset)
            return fail(name + " (offset " + hex(h.bar_offset) + ", size " + hex(h.size) +
                        ") lies outside the BAR of " + hex(cb.bar_size) + " bytes");
        for (std::uint32_t j = 0; j < i; j++) {
            const HbmRegion& o = cb.hbm[j];
            if (h.bar_offset < o.bar_offset + o.size && o.bar_offset < h.bar_offset + h.size)
                return fail(name + " overlaps hbm[" + std::to_string(j) + "]");
        }
        cb.hbm.push_back(h);
    }

    cb.fw_state = r.le<std::uint32_t>(offsetof(rbln_fw_ctrl, fw_state));
    cb.fault_code = r.le<std::uint32_t>(offsetof(rbln_fw_ctrl, fault_code));
    auto reason = r.str(offsetof(rbln_fw_ctrl, fault_reason), sizeof(rbln_fw_ctrl::fault_reason));
    if (!reason)
        return fail("fault_reason is not NUL-terminated");
    cb.fault_reason = std::move(*reason);
    cb.host_ack = r.le<std::uint32_t>(offsetof(rbln_fw_ctrl, host_ack));
    cb.admin_sq_head = r.le<std::uint32_t>(offsetof(rbln_fw_ctrl, admin_sq_head));
    cb.heartbeat = r.le<std::uint64_t>(offsetof(rbln_fw_ctrl, heartbeat));
    cb.host_ctrl = r.le<std::uint32_t>(offsetof(rbln_fw_ctrl, host_ctrl));
    cb.host_gen = r.le<std::uint32_t>(offsetof(rbln_fw_ctrl, host_gen));
    cb.ring_entries = r.le<std::uint32_t>(offsetof(rbln_fw_ctrl, ring_entries));
    return cb;
}

} // namespace rbln::fw
