// SPDX-License-Identifier: GPL-2.0
// The admin ring: reading requests, validating them, answering them.
#include <algorithm>
#include <cstring>

#include "card.h"

namespace rbln::emu {

namespace {

bool args_zero(const rbln_fw_admin_req& req, std::size_t from) {
    return std::all_of(std::begin(req.args) + static_cast<std::ptrdiff_t>(from), std::end(req.args),
                       [](std::uint32_t a) { return a == 0; });
}

struct Reject {
    std::uint16_t status;
    const char* why;
};

// Checks shared by every request: flags, reserved, unused args, and the
// data buffer (needed: `payload` bytes; not needed: address and length 0).
std::optional<Reject> check_common(const rbln_fw_admin_req& req, std::size_t used_args,
                                   std::size_t payload, GuestMemory& ram) {
    if (req.flags != 0)
        return Reject{RBLN_FW_ST_BAD_FIELD, "flags not zero"};
    if (req.reserved != 0)
        return Reject{RBLN_FW_ST_BAD_FIELD, "reserved not zero"};
    if (!args_zero(req, used_args))
        return Reject{RBLN_FW_ST_BAD_FIELD, "unused args not zero"};
    if (payload == 0) {
        if (req.data_addr != 0 || req.data_len != 0)
            return Reject{RBLN_FW_ST_BAD_FIELD, "data buffer given to a request without data"};
        return std::nullopt;
    }
    if (req.data_addr == 0)
        return Reject{RBLN_FW_ST_BAD_ADDRESS, "no data buffer"};
    if (req.data_len < payload)
        return Reject{RBLN_FW_ST_SHORT_BUFFER, "data buffer too small"};
    if (!ram.contains(req.data_addr, payload))
        return Reject{RBLN_FW_ST_BAD_ADDRESS, "data buffer not in guest RAM"};
    return std::nullopt;
}

const char* opcode_name(std::uint16_t op) {
    switch (op) {
    case RBLN_FW_OP_IDENTIFY:
        return "IDENTIFY";
    case RBLN_FW_OP_HEARTBEAT:
        return "HEARTBEAT";
    case RBLN_FW_OP_GET_TELEMETRY:
        return "GET_TELEMETRY";
    case RBLN_FW_OP_RESET_CHIPLET:
        return "RESET_CHIPLET";
    default:
        return "unknown";
    }
}

} // namespace

void Card::process_admin() {
    Rings& r = *rings_;
    bool completed = false;
    // Doorbells merge: take everything the host published, re-reading the
    // tail until it stops moving.
    while (state_ == RBLN_FW_STATE_READY) {
        const std::uint32_t tail = host_read(ctrl_->admin_sq_tail);
        if (tail >= r.entries) {
            if (r.reported_bad_tail != tail) {
                r.reported_bad_tail = tail;
                stats_.bad_requests++;
                log_.warn("admin_sq_tail %u out of range (%u entries): ignored", tail, r.entries);
                const std::array<std::uint64_t, 3> data{0, 0, tail};
                post_event(RBLN_FW_EV_BAD_REQUEST, RBLN_FW_ST_BAD_FIELD, kWholeCard, data);
            }
            break;
        }
        r.reported_bad_tail.reset();
        if (r.sq_head == tail)
            break;
        // Never overwrite a completion the host has not consumed.
        if ((r.cq.tail + 1) % r.entries == host_read(ctrl_->admin_cq_head)) {
            if (!r.cq_stalled) {
                stats_.cq_stalls++;
                log_.debug("completion ring full: waiting for the host");
            }
            r.cq_stalled = true;
            break;
        }
        r.cq_stalled = false;

        rbln_fw_admin_req req{};
        if (!ram_.read(r.sq_addr + std::uint64_t{r.sq_head} * kRecordSize, &req, sizeof(req))) {
            enter_fault(RBLN_FW_FAULT_INTERNAL, "request ring not readable");
            break;
        }
        stats_.admin_requests++;
        const Outcome out = execute(req);
        r.sq_head = (r.sq_head + 1) % r.entries;

        rbln_fw_admin_cpl cpl{};
        cpl.seq = req.seq;
        cpl.status = out.status;
        cpl.data_len = out.data_len;
        cpl.sq_head = r.sq_head;
        std::copy(out.result.begin(), out.result.end(), std::begin(cpl.result));
        (void)write_record(r.cq, host_read(ctrl_->admin_cq_head), &cpl); // space checked above
        stats_.completions++;
        card_write(ctrl_->admin_sq_head, r.sq_head);
        completed = true;

        if (out.status != RBLN_FW_ST_OK) {
            stats_.bad_requests++;
            log_.warn("request seq %u opcode %u (%s) rejected, status %u: %s", req.seq, req.opcode,
                      opcode_name(req.opcode), out.status, out.why != nullptr ? out.why : "?");
            const std::array<std::uint64_t, 2> data{req.seq, req.opcode};
            post_event(RBLN_FW_EV_BAD_REQUEST, out.status, kWholeCard, data);
        } else {
            log_.debug("request seq %u %s done", req.seq, opcode_name(req.opcode));
        }
        if (out.reset_chiplet) {
            const std::array<std::uint64_t, 0> none{};
            post_event(RBLN_FW_EV_CHIPLET_RESET, 0, *out.reset_chiplet, none);
        }
    }
    if (completed)
        pending_irqs_ |= 1U << RBLN_FW_IRQ_ADMIN;
}

Card::Outcome Card::execute(const rbln_fw_admin_req& req) {
    Outcome out;
    auto reject = [&out](const Reject& rej) {
        out.status = rej.status;
        out.why = rej.why;
        return out;
    };
    switch (req.opcode) {
    case RBLN_FW_OP_IDENTIFY: {
        if (auto rej = check_common(req, 0, sizeof(rbln_fw_identify), ram_))
            return reject(*rej);
        rbln_fw_identify idf{};
        idf.family = family_code(id_.family);
        idf.chiplet_count = id_.layout.chiplets;
        idf.iface_minor = RBLN_FW_IFACE_MINOR;
        idf.iface_major = RBLN_FW_IFACE_MAJOR;
        std::memcpy(idf.uuid, id_.uuid.data(), sizeof(idf.uuid));
        // From the card's own copy: the host can scribble over the BAR.
        std::memcpy(idf.serial, id_.serial.data(),
                    std::min(id_.serial.size(), sizeof(idf.serial) - 1));
        std::memcpy(idf.fw_version, id_.fw_version.data(),
                    std::min(id_.fw_version.size(), sizeof(idf.fw_version) - 1));
        for (unsigned i = 0; i < id_.layout.chiplets; i++)
            idf.hbm_size[i] = id_.layout.hbm.at(i).size;
        (void)ram_.write(req.data_addr, &idf, sizeof(idf));
        out.data_len = sizeof(idf);
        return out;
    }
    case RBLN_FW_OP_HEARTBEAT:
        if (auto rej = check_common(req, 0, 0, ram_))
            return reject(*rej);
        out.result[0] = heartbeat_;
        out.result[1] = now_ns() - start_ns_;
        return out;
    case RBLN_FW_OP_GET_TELEMETRY: {
        if (auto rej = check_common(req, 0, sizeof(rbln_fw_telemetry), ram_))
            return reject(*rej);
        rbln_fw_telemetry t{};
        t.timestamp_ns = now_ns() - start_ns_;
        t.temp_mc = telemetry_.temp_mc;
        t.chiplet_count = id_.layout.chiplets;
        t.power_uw = telemetry_.power_uw;
        for (unsigned i = 0; i < id_.layout.chiplets; i++) {
            const ChipletTelemetry& c = telemetry_.chiplet.at(i);
            t.chiplet[i].temp_mc = c.temp_mc;
            t.chiplet[i].clock_mhz = c.clock_mhz;
            t.chiplet[i].mem_clock_mhz = c.mem_clock_mhz;
            t.chiplet[i].busy_ns = c.busy_ns;
            // The card figure is its hottest sensor (firmware-iface).
            t.temp_mc = std::max(t.temp_mc, c.temp_mc);
        }
        (void)ram_.write(req.data_addr, &t, sizeof(t));
        out.data_len = sizeof(t);
        return out;
    }
    case RBLN_FW_OP_RESET_CHIPLET:
        if (auto rej = check_common(req, 1, 0, ram_))
            return reject(*rej);
        if (req.args[0] >= id_.layout.chiplets)
            return reject({RBLN_FW_ST_BAD_ARG, "chiplet index out of range"});
        stats_.chiplet_resets.at(req.args[0])++;
        log_.info("chiplet %u reset", req.args[0]);
        out.reset_chiplet = req.args[0];
        return out;
    default:
        return reject({RBLN_FW_ST_BAD_OPCODE, "unknown opcode"});
    }
}

} // namespace rbln::emu
