// SPDX-License-Identifier: GPL-2.0
// rbln-smi's formatting: JSON escaping and writer, units, views.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <sstream>

#include "cli.hpp"
#include "format.hpp"
#include "json.hpp"

namespace rbln::smi::smi_format_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(JsonQuote, PlainTextIsQuoted) {
    EXPECT_EQ(json_quote("rbln-emu 0.1.0"), "\"rbln-emu 0.1.0\"");
}

TEST(JsonQuote, QuoteAndBackslashAreEscaped) {
    EXPECT_EQ(json_quote("a\"b\\c"), R"("a\"b\\c")");
}

TEST(JsonQuote, ControlCharactersAreEscaped) {
    EXPECT_EQ(json_quote("\n\r\t\b\f"), R"("\n\r\t\b\f")");
    EXPECT_EQ(json_quote(std::string("\x01\x1f\x7f", 3)), R"("\u0001\u001f\u007f")");
    EXPECT_EQ(json_quote(std::string("a\0b", 3)), R"("a\u0000b")");
}

TEST(JsonQuote, ValidUtf8PassesThrough) {
    EXPECT_EQ(json_quote("45\xc2\xb0"
                         "C \xe2\x82\xac \xf0\x9f\x98\x80"),
              "\"45\xc2\xb0"
              "C \xe2\x82\xac \xf0\x9f\x98\x80\"");
}

TEST(JsonQuote, InvalidUtf8BecomesReplacementCharacters) {
    EXPECT_EQ(json_quote("\xff"), R"("\ufffd")");
    EXPECT_EQ(json_quote("\xc0\xaf"), R"("\ufffd\ufffd")");                     // overlong '/'
    EXPECT_EQ(json_quote("\xed\xa0\x80"), R"("\ufffd\ufffd\ufffd")");           // surrogate
    EXPECT_EQ(json_quote("\xe2\x82"), R"("\ufffd\ufffd")");                     // truncated
    EXPECT_EQ(json_quote("\xf4\x90\x80\x80"), R"("\ufffd\ufffd\ufffd\ufffd")"); // > U+10FFFF
    EXPECT_EQ(json_quote("ok\x80ok"), R"("ok\ufffdok")");
}

TEST(JsonWriter, NestedDocumentIsPrettyPrinted) {
    JsonWriter w;
    w.begin_object();
    w.key("a");
    w.value(1);
    w.key("b");
    w.begin_array();
    w.value("x");
    w.null();
    w.value(true);
    w.end_array();
    w.key("e");
    w.begin_array();
    w.end_array();
    w.key("n");
    w.value(std::int64_t{-3});
    w.key("u");
    w.value(std::uint64_t{18446744073709551615ull});
    w.end_object();
    EXPECT_EQ(w.finish(), "{\n  \"a\": 1,\n  \"b\": [\n    \"x\",\n    null,\n    true\n  ],\n"
                          "  \"e\": [],\n  \"n\": -3,\n  \"u\": 18446744073709551615\n}\n");
}

TEST(JsonWriter, KeysAreEscapedToo) {
    JsonWriter w;
    w.begin_object();
    w.key("we\"ird");
    w.value(0);
    w.end_object();
    EXPECT_THAT(w.finish(), HasSubstr(R"("we\"ird": 0)"));
}

TEST(JsonWriter, MisuseIsALogicError) {
    JsonWriter a;
    a.begin_object();
    EXPECT_THROW(a.value(1), std::logic_error); // member without key
    EXPECT_THROW(a.finish(), std::logic_error); // unclosed
    JsonWriter b;
    b.begin_array();
    EXPECT_THROW(b.key("k"), std::logic_error);
    EXPECT_THROW(b.end_object(), std::logic_error);
}

TEST(Units, TemperatureHasOneDecimalRounded) {
    EXPECT_EQ(format_temperature(45000), "45.0 C");
    EXPECT_EQ(format_temperature(45049), "45.0 C");
    EXPECT_EQ(format_temperature(45050), "45.1 C");
    EXPECT_EQ(format_temperature(-1250), "-1.3 C");
    EXPECT_EQ(format_temperature(-40), "0.0 C");
    EXPECT_EQ(format_temperature(std::nullopt), "N/A");
}

TEST(Units, PowerHasOneDecimalRounded) {
    EXPECT_EQ(format_power(75000000), "75.0 W");
    EXPECT_EQ(format_power(75049999), "75.0 W");
    EXPECT_EQ(format_power(75050000), "75.1 W");
    EXPECT_EQ(format_power(999999), "1.0 W");
    EXPECT_EQ(format_power(0), "0.0 W");
    EXPECT_EQ(format_power(std::nullopt), "N/A");
}

TEST(Units, MemoryInMibBelowTenGibThenGib) {
    EXPECT_EQ(format_bytes(256ull << 20), "256 MiB");
    EXPECT_EQ(format_bytes(1024ull << 20), "1024 MiB");
    EXPECT_EQ(format_bytes(9ull << 30), "9216 MiB");
    EXPECT_EQ(format_bytes(36ull << 30), "36.0 GiB");
    EXPECT_EQ(format_bytes((144ull << 30) + (512ull << 20)), "144.5 GiB");
    EXPECT_EQ(format_bytes(4096), "4 KiB");
    EXPECT_EQ(format_bytes(0), "0 B");
}

Discovery sample() {
    Discovery d;
    d.driver.version = "0.1.0";
    CardInfo c;
    c.index = 0;
    c.accel_minor = 0;
    c.accel_name = "accel0";
    c.accel_node = "/dev/accel/accel0";
    c.pci_bdf = "0000:00:04.0";
    c.family = Family::Rebel100;
    c.family_name = "rebel100";
    c.chiplet_count = 4;
    c.hbm_total_bytes = 1024ull << 20;
    const std::array<std::uint64_t, 4> used = {2ull << 20, 0, 0, 4096};
    for (unsigned i = 0; i < 4; i++)
        c.chiplets.push_back({i, 256ull << 20, std::nullopt, used[i], (256ull << 20) - used[i]});
    c.hbm_used_bytes = (2ull << 20) + 4096;
    c.fw_version = "rbln-emu 0.1.0";
    c.fw_iface_major = 1;
    c.serial = "RBLNEMU-0001";
    c.state = "ready";
    c.runtime_status = "active";
    c.temperature_mc = 45000;
    c.power_uw = 75000000;
    d.cards.push_back(c);
    CardInfo a = c;
    a.index = 1;
    a.accel_minor = 1;
    a.accel_name = "accel1";
    a.accel_node = "/dev/accel/accel1";
    a.pci_bdf = "0000:00:05.0";
    a.family = Family::Atom;
    a.family_name = "atom";
    a.chiplet_count = 1;
    a.hbm_total_bytes = 16ull << 30;
    a.chiplets = {{0, 16ull << 30, std::nullopt, std::nullopt, std::nullopt}}; // an older rbln.ko
    a.hbm_used_bytes.reset();
    a.serial = "RBLNEMU-\"quoted\"";
    a.suspended = true;
    a.runtime_status = "suspended";
    a.temperature_mc.reset();
    a.power_uw.reset();
    d.cards.push_back(a);
    return d;
}

TEST(Views, ListHasOneLinePerCard) {
    EXPECT_EQ(render_list(sample()),
              "NPU 0: Rebel100 (4 chiplets, 1024 MiB HBM) accel0 0000:00:04.0 serial "
              "RBLNEMU-0001 fw rbln-emu 0.1.0\n"
              "NPU 1: ATOM (1 chiplet, 16.0 GiB HBM) accel1 0000:00:05.0 serial "
              "RBLNEMU-\"quoted\" fw rbln-emu 0.1.0\n");
}

TEST(Views, JsonHasNumbersAsNumbersAndNullForUnavailableTelemetry) {
    const std::string j = render_json(sample());
    EXPECT_THAT(j, HasSubstr("\"schema_version\": 2,"));
    EXPECT_THAT(
        j, HasSubstr("\"driver\": {\n    \"name\": \"rbln\",\n    \"version\": \"0.1.0\"\n  }"));
    EXPECT_THAT(j, HasSubstr("\"temperature_mc\": 45000,"));
    EXPECT_THAT(j, HasSubstr("\"power_uw\": 75000000,"));
    EXPECT_THAT(j, HasSubstr("\"temperature_mc\": null,"));
    EXPECT_THAT(j, HasSubstr("\"power_uw\": null,"));
    EXPECT_THAT(j, HasSubstr("\"hbm_total_bytes\": 17179869184,"));
    EXPECT_THAT(j, HasSubstr("\"numa_node\": -1,"));
    EXPECT_THAT(j, HasSubstr("\"fw_iface_version\": \"1.0\""));
    EXPECT_THAT(j, HasSubstr(R"("serial": "RBLNEMU-\"quoted\"")"));
    EXPECT_THAT(j, HasSubstr("\"runtime_status\": \"suspended\""));
    EXPECT_THAT(j, HasSubstr("\"chiplets\": [\n        {\n          \"index\": 0,\n"
                             "          \"hbm_total_bytes\": 268435456,\n"
                             "          \"temperature_mc\": null,\n"
                             "          \"hbm_used_bytes\": 2097152,\n"
                             "          \"hbm_largest_free_bytes\": 266338304,\n"
                             "          \"busy_ns\": null,\n"
                             "          \"utilization_percent\": null\n        },"));
    EXPECT_THAT(j,
                HasSubstr("\"hbm_total_bytes\": 1073741824,\n      \"hbm_used_bytes\": 2101248,"));
    // The ATOM card's module exports no memory counters.
    EXPECT_THAT(j, HasSubstr("\"hbm_total_bytes\": 17179869184,\n      \"hbm_used_bytes\": null,"));
    EXPECT_THAT(j,
                HasSubstr("\"hbm_used_bytes\": null,\n          \"hbm_largest_free_bytes\": null"));
    // Without a process scan the processes are unknown, not absent.
    EXPECT_THAT(j, HasSubstr("\"processes\": null,\n  \"processes_not_inspected\": null\n}"));
}

TEST(Views, TableLinesAllHaveTheSameWidth) {
    const std::string t = render_table(sample());
    std::istringstream in(t);
    std::string line;
    std::size_t width = 0;
    int lines = 0;
    while (std::getline(in, line)) {
        if (width == 0)
            width = line.size();
        EXPECT_EQ(line.size(), width) << "line: " << line;
        EXPECT_TRUE(line.front() == '|' || line.front() == '+') << line;
        lines++;
    }
    // header 3, titles 2, card 0: row + 4 chiplets + rule, card 1: row + 1 + rule
    EXPECT_EQ(lines, 3 + 2 + 6 + 3);
}

TEST(Views, TableShowsVersionsUnitsAndSuspendedCards) {
    const std::string t = render_table(sample());
    EXPECT_THAT(t, HasSubstr("Driver (rbln.ko): 0.1.0"));
    EXPECT_THAT(t, HasSubstr("librbln: "));
    EXPECT_THAT(t, HasSubstr("| 0000:00:04.0 | 45.0 C | 75.0 W |"));
    EXPECT_THAT(t, HasSubstr("| 0000:00:05.0 |    N/A |    N/A |"));
    EXPECT_THAT(t, HasSubstr("ready (suspended)"));
    EXPECT_THAT(t, HasSubstr("| chiplet 0: HBM 2 / 256 MiB, largest free 254 MiB "));
    EXPECT_THAT(t, HasSubstr("| chiplet 1: HBM 0 / 256 MiB, largest free 256 MiB "));
    EXPECT_THAT(t, HasSubstr("| chiplet 3: HBM 1 / 256 MiB, largest free 255 MiB "));
    EXPECT_THAT(t, Not(HasSubstr("Processes"))); // not scanned: no section
}

TEST(Views, TableShowsHbmUsedOverTotalAndNaForAnOlderModule) {
    const std::string t = render_table(sample());
    EXPECT_THAT(t, HasSubstr("| HBM used / total |"));
    EXPECT_THAT(t, HasSubstr("|     3 / 1024 MiB |")); // 2 MiB + 4 KiB, rounded up
    EXPECT_THAT(t, HasSubstr("|  N/A / 16384 MiB |"));
    EXPECT_THAT(t, HasSubstr("| chiplet 0: HBM N/A / 16384 MiB "));
    EXPECT_THAT(t, Not(HasSubstr("largest free 16384")));
}

TEST(Units, UsedOverTotalInMibWithUsedRoundedUp) {
    EXPECT_EQ(format_used_total(2ull << 20, 256ull << 20), "2 / 256 MiB");
    EXPECT_EQ(format_used_total(0, 256ull << 20), "0 / 256 MiB");
    EXPECT_EQ(format_used_total(4096, 256ull << 20), "1 / 256 MiB");
    EXPECT_EQ(format_used_total((2ull << 20) + 1, 256ull << 20), "3 / 256 MiB");
    EXPECT_EQ(format_used_total(16ull << 30, 16ull << 30), "16384 / 16384 MiB");
    EXPECT_EQ(format_used_total(std::nullopt, 256ull << 20), "N/A / 256 MiB");
}

ClientScan sample_clients() {
    ClientScan s;
    AccelClient a;
    a.pid = 1234;
    a.comm = "python3";
    a.holders = {{1234, "python3"}, {1300, "worker"}};
    a.info.driver = "rbln";
    a.info.pdev = "0000:00:04.0";
    a.info.client_id = 7;
    a.info.hbm.resize(4);
    a.info.hbm[0].total_bytes = 2ull << 20;
    for (unsigned i = 1; i < 4; i++)
        a.info.hbm[i].total_bytes = 0;
    a.info.host.total_bytes = 64 * 1024;
    a.info.host.resident_bytes = 4096;
    a.info.pinned_bytes = 0;
    a.info.asid = 5;
    a.info.mmu_faults = 0;
    s.clients.push_back(a);

    AccelClient b;
    b.pid = 2000;
    b.comm = std::string("atom\x01job\xc3\xa9", 10);
    b.holders = {{2000, b.comm}};
    b.accel_minor = 1;
    b.info.driver = "rbln";
    b.info.pdev = "0000:00:05.0";
    b.info.client_id = 9;
    b.info.hbm.resize(1);
    b.info.hbm[0].total_bytes = 1ull << 30;
    s.clients.push_back(b);

    AccelClient c; // a card this discovery does not know (unbound since)
    c.pid = 3000;
    c.comm = "orphan";
    c.holders = {{3000, "orphan"}};
    c.info.driver = "rbln";
    c.info.pdev = "0000:00:09.0";
    c.info.client_id = 11;
    s.clients.push_back(c);
    s.processes_denied = 3;
    return s;
}

TEST(Views, ProcessesSectionHasOneRowPerClientWithItsCardAndMemory) {
    const ClientScan clients = sample_clients();
    const std::string t = render_table(sample(), &clients);
    const auto at = t.find("| Processes ");
    ASSERT_NE(at, std::string::npos) << t;
    const std::string p = t.substr(at);
    EXPECT_THAT(p,
                HasSubstr("|  PID  Process name  NPU      HBM0  HBM1  HBM2  HBM3  Host memory "));
    EXPECT_THAT(p,
                HasSubstr("| 1234  python3         0     2 MiB   0 B   0 B   0 B       64 KiB "));
    EXPECT_THAT(p, HasSubstr("|       also held by PID 1300 (worker) "));
    // The ATOM card has one chiplet: "-" where it has none; the name is
    // made printable for the table.
    EXPECT_THAT(p,
                HasSubstr("| 2000  atom?job??      1  1024 MiB     -     -     -          N/A "));
    // Not one of the cards, and no hbm keys: NPU "?", no chiplets; a
    // figure the kernel did not print is "N/A".
    EXPECT_THAT(p,
                HasSubstr("| 3000  orphan          ?         -     -     -     -          N/A "));
    EXPECT_THAT(
        p, HasSubstr("| 3 processes could not be inspected (permission denied; run as root) "));
    EXPECT_THAT(p, Not(HasSubstr("No running processes found")));
}

TEST(Views, ProcessesSectionWithoutClientsSaysSo) {
    ClientScan none;
    const std::string t = render_table(sample(), &none);
    EXPECT_THAT(t, HasSubstr("| No running processes found "));
    EXPECT_THAT(t, Not(HasSubstr("could not be inspected")));
    none.processes_denied = 1;
    EXPECT_THAT(render_table(sample(), &none),
                HasSubstr("| 1 process could not be inspected (permission denied; run as root) "));
}

TEST(Views, TableWithProcessesKeepsEveryLineTheSameWidth) {
    const ClientScan clients = sample_clients();
    std::istringstream in(render_table(sample(), &clients));
    std::string line;
    std::size_t width = 0;
    while (std::getline(in, line)) {
        if (line.empty())
            continue; // between the device table and the Processes box
        if (width == 0)
            width = line.size();
        EXPECT_EQ(line.size(), width) << "line: " << line;
    }
}

TEST(Views, JsonListsProcessesWithHoldersCardAndBytes) {
    const ClientScan clients = sample_clients();
    const std::string j = render_json(sample(), &clients);
    EXPECT_THAT(j, HasSubstr(R"("processes": [
    {
      "pid": 1234,
      "name": "python3",
      "holders": [
        {
          "pid": 1234,
          "name": "python3"
        },
        {
          "pid": 1300,
          "name": "worker"
        }
      ],
      "card_index": 0,
      "pci_bdf": "0000:00:04.0",
      "accel_minor": 0,
      "client_id": 7,
      "hbm": [
        {
          "chiplet": 0,
          "total_bytes": 2097152,
          "shared_bytes": null,
          "resident_bytes": null
        },)"));
    EXPECT_THAT(j, HasSubstr(R"("host_memory": {
        "total_bytes": 65536,
        "shared_bytes": null,
        "resident_bytes": 4096
      },
      "pinned_bytes": 0,
      "asid": 5,
      "mmu_faults": 0
    },)"));
    EXPECT_THAT(j, HasSubstr("\"name\": \"atom\\u0001job\xc3\xa9\""));
    EXPECT_THAT(j, HasSubstr("\"card_index\": null,\n      \"pci_bdf\": \"0000:00:09.0\""));
    EXPECT_THAT(j, HasSubstr("\"processes_not_inspected\": 3\n}"));
}

TEST(ExitCodes, ErrorsMapToDocumentedCodes) {
    EXPECT_EQ(exit_code_for(Error(Errc::DriverNotLoaded, "", "", 0, "")), 3);
    EXPECT_EQ(exit_code_for(Error(Errc::NoDevice, "", "", 0, "")), 4);
    EXPECT_EQ(exit_code_for(Error::from_errno("open", "/dev/accel/accel0", EACCES)), 5);
    EXPECT_EQ(exit_code_for(Error(Errc::BadValue, "", "", 0, "")), 1);
}

int run_args(std::initializer_list<std::string_view> args, std::string& out, std::string& err) {
    std::ostringstream o;
    std::ostringstream e;
    const std::vector<std::string_view> v(args);
    const int rc = run(v, o, e);
    out = o.str();
    err = e.str();
    return rc;
}

TEST(Cli, UsageErrorsExitTwo) {
    std::string out;
    std::string err;
    EXPECT_EQ(run_args({"--bogus"}, out, err), 2);
    EXPECT_THAT(err, HasSubstr("unknown option '--bogus'"));
    EXPECT_EQ(run_args({"-L", "-j"}, out, err), 2);
    EXPECT_EQ(run_args({"--root"}, out, err), 2);
    EXPECT_THAT(err, HasSubstr("needs an argument"));
    EXPECT_EQ(run_args({"extra"}, out, err), 2);
}

TEST(Cli, HelpDocumentsEveryExitCode) {
    std::string out;
    std::string err;
    EXPECT_EQ(run_args({"--help"}, out, err), 0);
    for (const char* code : {"  0  ", "  1  ", "  2  ", "  3  ", "  4  ", "  5  "})
        EXPECT_THAT(out, HasSubstr(code));
    EXPECT_THAT(out, HasSubstr("--json"));
}

} // namespace
} // namespace rbln::smi::smi_format_test
