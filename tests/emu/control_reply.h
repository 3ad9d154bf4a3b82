// SPDX-License-Identifier: GPL-2.0
// The key=value words of a control interface reply: "ok a=1 b=2" ->
// {a: 1, b: 2}.  A reply that is not "ok ..." or a word without '=' fails
// the calling test.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>

namespace rbln::emu::test {

inline std::map<std::string, std::string> parse_ok_reply(const std::string& reply) {
    EXPECT_EQ(reply.rfind("ok ", 0), 0U) << reply;
    std::map<std::string, std::string> kv;
    if (reply.size() < 3)
        return kv;
    std::istringstream in(reply.substr(3));
    std::string word;
    while (in >> word) {
        const auto eq = word.find('=');
        EXPECT_NE(eq, std::string::npos) << word;
        kv[word.substr(0, eq)] = eq == std::string::npos ? "" : word.substr(eq + 1);
    }
    return kv;
}

} // namespace rbln::emu::test
