// SPDX-License-Identifier: GPL-2.0
// The C ABI of operators and storage copies (rbln_ops.h, rbln_storage.h,
// rbln_alloc.h), over a fake sysfs tree whose card opens as a FakeKernel
// that runs its copies (its LAUNCH computes nothing): a C translation unit
// drives the whole path, and errors name the operator and the operand.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "fake_kernel.hpp"
#include "fake_sysfs.hpp"
#include "rbln/device.hpp"
#include "rbln/rbln.h"
#include "rbln/rbln_ops.h"
#include "rbln/rbln_storage.h"
#include "rbln/storage.hpp"
#include "testing.hpp"

extern "C" int rbln_test_ops_from_c(int device, int check_values, char* message, size_t len);

namespace rbln::test::c_api_ops_test {
namespace {

using ::testing::HasSubstr;

class COps : public ::testing::Test {
protected:
    void SetUp() override {
        fake.load_driver("0.1.0");
        for (unsigned i = 0; i < 2; i++) {
            CardSpec c;
            c.minor = i;
            c.bdf = "0000:00:0" + std::to_string(4 + i) + ".0";
            fake.add_card(c);
        }
        ProcessOptions p;
        p.runtime.root = fake.root();
        p.runtime.env = [](std::string_view) { return std::optional<std::string>(); };
        p.device.submitter.use_io_uring = false;
        p.device.submitter.warn = [](const std::string&) {};
        p.opener = [](const std::string& node) -> Result<std::unique_ptr<KernelInterface>> {
            auto k = std::make_unique<FakeKernel>(node);
            k->run_packets = true;
            return std::unique_ptr<KernelInterface>(std::move(k));
        };
        reset_process_for_tests(std::move(p));
    }
    void TearDown() override { reset_process_for_tests(); }

    static rbln_storage* storage(int device, std::uint64_t bytes) {
        rbln_storage* s = nullptr;
        EXPECT_EQ(rbln_storage_create(device, bytes, RBLN_STORAGE_FP32, &s), RBLN_OK)
            << rbln_last_error_message();
        return s;
    }

    FakeSysfs fake;
};

TEST_F(COps, AFrameworkWrittenInCDrivesStoragesCopiesOpsAndTheAllocator) {
    std::array<char, 512> message{};
    EXPECT_EQ(rbln_test_ops_from_c(0, 0, message.data(), message.size()), 0) << message.data();
}

TEST_F(COps, AnOperatorIsOneJobThatUploadsItsHostLatestInputsAndWritesItsOutput) {
    rbln_storage* a = storage(0, 64);
    rbln_storage* out = storage(0, 64);
    const std::array<float, 16> x{};
    ASSERT_EQ(rbln_storage_write(a, 0, x.data(), sizeof(x)), RBLN_OK);
    rbln_view va{};
    rbln_view vo{};
    ASSERT_EQ(rbln_view_contiguous(a, 0, nullptr, &va), RBLN_OK);
    const std::int64_t sizes[2] = {4, 4};
    ASSERT_EQ(rbln_view_contiguous(out, 2, sizes, &vo), RBLN_OK);
    EXPECT_EQ(vo.strides[0], 4);
    EXPECT_EQ(vo.strides[1], 1);
    va.ndim = 2;
    va.sizes[0] = 4;
    va.sizes[1] = 4;
    va.strides[0] = 4;
    va.strides[1] = 1;
    ASSERT_EQ(rbln_op_relu(nullptr, &vo, &va), RBLN_OK) << rbln_last_error_message();
    rbln_storage_info i{};
    i.struct_size = sizeof(i);
    ASSERT_EQ(rbln_storage_get_info(a, &i), RBLN_OK);
    EXPECT_EQ(i.uploads, 1u) << "the host-latest input went up once";
    ASSERT_EQ(rbln_storage_get_info(out, &i), RBLN_OK);
    EXPECT_EQ(i.coherence, RBLN_STORAGE_DEVICE_LATEST);
    EXPECT_EQ(i.uploads, 0u) << "an output covering its storage is not uploaded";
    ASSERT_EQ(rbln_storage_destroy(a), RBLN_OK);
    ASSERT_EQ(rbln_storage_destroy(out), RBLN_OK);
}

TEST_F(COps, OperatorErrorsNameTheOperatorAndTheOperand) {
    rbln_storage* a = storage(0, 64);
    rbln_storage* b = storage(0, 32);
    rbln_view va{};
    rbln_view vb{};
    ASSERT_EQ(rbln_view_contiguous(a, 0, nullptr, &va), RBLN_OK);
    ASSERT_EQ(rbln_view_contiguous(b, 0, nullptr, &vb), RBLN_OK);
    EXPECT_EQ(rbln_op_add(nullptr, &va, &va, &vb), RBLN_ERR_INVALID_ARGUMENT);
    EXPECT_THAT(rbln_last_error_message(), HasSubstr("add: b's sizes [8] differ from out's [16]"));
    EXPECT_EQ(rbln_op_cast(nullptr, &va, &vb), RBLN_ERR_INVALID_ARGUMENT);
    EXPECT_THAT(rbln_last_error_message(), HasSubstr("cast: a's sizes [8] differ from out's [16]"));
    EXPECT_EQ(rbln_op_mul(nullptr, &va, &va, nullptr), RBLN_ERR_INVALID_ARGUMENT);
    EXPECT_THAT(rbln_last_error_message(), HasSubstr("mul: b is NULL"));
    rbln_view old = va;
    old.struct_size = 8;
    EXPECT_EQ(rbln_op_scale(nullptr, &va, &old, 2.0F), RBLN_ERR_INVALID_ARGUMENT);
    EXPECT_THAT(rbln_last_error_message(), HasSubstr("sizeof(struct rbln_view)"));
    ASSERT_EQ(rbln_storage_destroy(a), RBLN_OK);
    ASSERT_EQ(rbln_storage_destroy(b), RBLN_OK);
}

TEST_F(COps, CopiesCheckTheirRangeAndTheStreamsDevice) {
    rbln_storage* a = storage(0, 64);
    std::array<std::uint8_t, 64> host{};
    EXPECT_EQ(rbln_storage_copy_from_host(a, 32, host.data(), 64, nullptr, 0),
              RBLN_ERR_INVALID_ARGUMENT);
    EXPECT_THAT(rbln_last_error_message(), HasSubstr("outside the storage of 64 bytes"));
    rbln_stream* other = nullptr;
    ASSERT_EQ(rbln_stream_create(1, &other), RBLN_OK) << rbln_last_error_message();
    EXPECT_EQ(rbln_storage_copy_to_host(host.data(), a, 0, 64, other, 1),
              RBLN_ERR_INVALID_ARGUMENT);
    EXPECT_THAT(rbln_last_error_message(), HasSubstr("the stream is on rbln:1"));
    rbln_storage* b = storage(0, 64);
    EXPECT_EQ(rbln_storage_copy(b, 2, a, 0, 4, nullptr, 0), RBLN_ERR_INVALID_ARGUMENT);
    EXPECT_THAT(rbln_last_error_message(), HasSubstr("whole numbers of 4-byte elements"));
    // A partial copy into a host-latest storage uploads the rest first.
    std::array<float, 16> x{};
    x.fill(3.0F);
    ASSERT_EQ(rbln_storage_write(b, 0, x.data(), sizeof(x)), RBLN_OK);
    const float one = 1.0F;
    ASSERT_EQ(rbln_storage_copy_from_host(b, 4, &one, sizeof(one), nullptr, 0), RBLN_OK)
        << rbln_last_error_message();
    std::array<float, 16> back{};
    ASSERT_EQ(rbln_storage_read(b, 0, back.data(), sizeof(back)), RBLN_OK);
    EXPECT_EQ(back[0], 3.0F);
    EXPECT_EQ(back[1], 1.0F);
    EXPECT_EQ(back[15], 3.0F);
    ASSERT_EQ(rbln_stream_destroy(other), RBLN_OK);
    ASSERT_EQ(rbln_storage_destroy(a), RBLN_OK);
    ASSERT_EQ(rbln_storage_destroy(b), RBLN_OK);
}

} // namespace
} // namespace rbln::test::c_api_ops_test
