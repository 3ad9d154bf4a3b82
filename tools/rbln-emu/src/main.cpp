// SPDX-License-Identifier: GPL-2.0
// rbln-emu: one emulated rbln card behind QEMU's ivshmem-doorbell device.
#include <cstdio>
#include <exception>
#include <string_view>
#include <vector>

#include "ctl_client.h"
#include "emulator.h"
#include "log.h"
#include "options.h"

int main(int argc, char** argv) {
    using namespace rbln::emu;
    try {
        const std::vector<std::string_view> args(argv + 1, argv + argc);
        if (!args.empty() && args[0] == "ctl")
            return run_ctl(parse_ctl_options(std::span(args).subspan(1)));
        const Options opt = parse_options(args);
        if (opt.help) {
            std::fputs(usage_text(), stdout);
            return 0;
        }
        Logger log(opt.log_level);
        try {
            return run_emulator(opt, log);
        } catch (const std::exception& e) {
            log.error("%s", e.what());
            return 1;
        }
    } catch (const UsageError& e) {
        std::fprintf(stderr, "rbln-emu: %s (see --help)\n", e.what());
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "rbln-emu: %s\n", e.what());
        return 1;
    }
}
