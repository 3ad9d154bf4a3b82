// SPDX-License-Identifier: GPL-2.0
// demo_test.cpp - host tests of rbln-demo: the fp16/bf16 conversions
// against an independent rounding (in double), the options, the reference
// and its bound, and the whole workload and command line through librbln
// against a fake card that runs the packets (fake_card.hpp).

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cli.hpp"
#include "dtype.hpp"
#include "fake_card.hpp"
#include "memory/segment_provider.hpp"
#include "reference.hpp"
#include "workload.hpp"

namespace rbln::demo {
namespace {

// ---- element types ----------------------------------------------------------

// The value of @t nearest to @v (ties to even), computed in double: scale
// to an integer significand, round with nearbyint, scale back.
double nearest(DType t, double v) {
    if (v == 0)
        return v;
    const int mant = mantissa_bits(t);
    const int e = std::max(std::ilogb(v), min_exponent(t));
    const double r = std::ldexp(std::nearbyint(std::ldexp(v, mant - e)), e - mant);
    const double max = t == DType::Fp16 ? 65504.0 : std::ldexp(2.0 - std::ldexp(1.0, -7), 127);
    return std::fabs(r) > max ? std::copysign(std::numeric_limits<double>::infinity(), v) : r;
}

void expect_narrowing_is_nearest(DType t, float v) {
    const float got = round_to(t, v);
    const double want = nearest(t, v);
    EXPECT_EQ(static_cast<double>(got), want) << dtype_name(t) << " of " << v << " (0x" << std::hex
                                              << std::bit_cast<std::uint32_t>(v) << ")";
    EXPECT_EQ(std::signbit(got), std::signbit(v)) << v;
}

float from_bits(std::uint32_t b) {
    return std::bit_cast<float>(b);
}

TEST(Dtype, NarrowingSampledFloatsMatchesRoundingToNearestEven) {
    for (DType t : {DType::Fp16, DType::Bf16}) {
        for (std::uint64_t b = 0; b <= 0xffffffffULL; b += 4093) {
            const float v = from_bits(static_cast<std::uint32_t>(b));
            if (std::isfinite(v))
                expect_narrowing_is_nearest(t, v);
            if (HasFailure())
                return;
        }
    }
}

TEST(Dtype, NarrowingTiesAndTheirNeighboursBetweenEveryPairOfValuesRoundsToNearestEven) {
    // The midpoint of two neighbours of fp16 or bf16 is a float; so are the
    // floats just beside it.  Together they pin ties-to-even everywhere,
    // subnormals, the carry into the exponent and the step to Inf included.
    for (DType t : {DType::Fp16, DType::Bf16}) {
        const auto value = [t](std::uint32_t h) {
            const auto b = static_cast<std::uint16_t>(h);
            return t == DType::Fp16 ? f16_to_f32(b) : bf16_to_f32(b);
        };
        const std::uint32_t top = t == DType::Fp16 ? 0x7c00 : 0x7f80; // +Inf
        for (std::uint32_t h = 0; h < top; h++) {
            const float a = value(h);
            const float b = value(h + 1);
            // Past the largest finite value the step to Inf is where the
            // next value would be if the range went on.
            const float mid = std::isinf(b) ? a + (a - value(h - 1)) / 2 : a + (b - a) / 2;
            for (float v : {mid, std::nextafter(mid, 0.0F), std::nextafter(mid, b)}) {
                expect_narrowing_is_nearest(t, v);
                expect_narrowing_is_nearest(t, -v);
            }
            if (HasFailure())
                return;
        }
    }
}

TEST(Dtype, EveryFp16AndBf16ValueWidensExactlyAndNarrowsBackToItself) {
    for (std::uint32_t h = 0; h <= 0xffff; h++) {
        const auto b = static_cast<std::uint16_t>(h);
        const float f16 = f16_to_f32(b);
        const float bf = bf16_to_f32(b);
        if (!std::isnan(f16)) {
            EXPECT_EQ(f32_to_f16(f16), b) << std::hex << h;
        }
        if (!std::isnan(bf)) {
            EXPECT_EQ(f32_to_bf16(bf), b) << std::hex << h;
        }
        if (HasFailure())
            return;
    }
    // A few values by hand, so a consistent pair of wrong conversions fails.
    EXPECT_EQ(f16_to_f32(0x3c00), 1.0F);
    EXPECT_EQ(f16_to_f32(0x7bff), 65504.0F);
    EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0F, -24));
    EXPECT_EQ(f16_to_f32(0xc000), -2.0F);
    EXPECT_EQ(bf16_to_f32(0x3f80), 1.0F);
    EXPECT_EQ(bf16_to_f32(0xc040), -3.0F);
}

TEST(Dtype, ReferenceCasesOfNarrowing) {
    struct Case {
        std::uint32_t f32;
        std::uint16_t f16;
        std::uint16_t bf16;
    };
    const Case cases[] = {
        {0x3f800000, 0x3c00, 0x3f80}, // 1
        {0x477fe000, 0x7bff, 0x4780}, // 65504 (bf16: rounds up to 65536)
        {0x477fefff, 0x7bff, 0x4780}, // just below the fp16 overflow threshold
        {0x477ff000, 0x7c00, 0x4780}, // 65520: a tie, to even = Inf in fp16
        {0x33800000, 0x0001, 0x3380}, // 2^-24, the smallest fp16 subnormal
        {0x33000000, 0x0000, 0x3300}, // 2^-25: a tie, to even = 0
        {0x33000001, 0x0001, 0x3300}, // just above it
        {0x38800000, 0x0400, 0x3880}, // 2^-14, the smallest fp16 normal
        {0x80000000, 0x8000, 0x8000}, // -0
        {0x7f800000, 0x7c00, 0x7f80}, // Inf
        {0x3f808000, 0x3c04, 0x3f80}, // bf16 tie, to even (down)
        {0x3f818000, 0x3c0c, 0x3f82}, // bf16 tie, to even (up)
        {0x7f7fffff, 0x7c00, 0x7f80}, // largest float: Inf in both
        {0x7fa00000, 0x7f00, 0x7fe0}, // signalling NaN: quiet, top payload kept
    };
    for (const Case& c : cases) {
        EXPECT_EQ(f32_to_f16(from_bits(c.f32)), c.f16) << std::hex << c.f32;
        EXPECT_EQ(f32_to_bf16(from_bits(c.f32)), c.bf16) << std::hex << c.f32;
    }
    EXPECT_TRUE(std::isnan(f16_to_f32(0x7c01)));
    EXPECT_EQ(f32_to_f16(f16_to_f32(0x7c01)), 0x7e01); // quieted on the way
}

TEST(Dtype, NamesAndElementTypesRoundTrip) {
    for (DType t : {DType::Fp32, DType::Fp16, DType::Bf16})
        EXPECT_EQ(parse_dtype(dtype_name(t)), t);
    EXPECT_FALSE(parse_dtype("fp8"));
    EXPECT_EQ(static_cast<std::uint32_t>(element_type(DType::Fp32)), RBLN_FW_DT_FP32);
    EXPECT_EQ(static_cast<std::uint32_t>(element_type(DType::Fp16)), RBLN_FW_DT_FP16);
    EXPECT_EQ(static_cast<std::uint32_t>(element_type(DType::Bf16)), RBLN_FW_DT_BF16);
}

// ---- options ------------------------------------------------------------------

Options parse(std::vector<std::string_view> args) {
    return parse_options(args);
}

TEST(Options, DefaultsAre256CubedFp32OnEveryChipletOfTheFirstCard) {
    const Options o = parse({});
    EXPECT_EQ(o.shape.m, 256U);
    EXPECT_EQ(o.shape.k, 256U);
    EXPECT_EQ(o.shape.n, 256U);
    EXPECT_EQ(o.dtypes, std::vector<DType>{DType::Fp32});
    EXPECT_FALSE(o.chiplet);
    EXPECT_FALSE(o.device);
}

TEST(Options, EveryOptionParsesWithASpaceOrAnEqualsSign) {
    const Options o = parse({"--size", "3,5,7", "--dtype=bf16,fp16", "--chiplet", "2",
                             "--device=/dev/accel/accel1", "--scale", "-1.5", "--seed=9"});
    EXPECT_EQ(o.shape.m, 3U);
    EXPECT_EQ(o.shape.k, 5U);
    EXPECT_EQ(o.shape.n, 7U);
    EXPECT_EQ(o.dtypes, (std::vector<DType>{DType::Bf16, DType::Fp16}));
    EXPECT_EQ(o.chiplet, 2U);
    EXPECT_EQ(o.device, "/dev/accel/accel1");
    EXPECT_EQ(o.scale, -1.5F);
    EXPECT_EQ(o.seed, 9U);
    EXPECT_EQ(parse({"--dtype", "all"}).dtypes,
              (std::vector<DType>{DType::Fp32, DType::Bf16, DType::Fp16}));
}

TEST(Options, MalformedValuesAndUnknownOptionsAreUsageErrors) {
    const std::vector<std::vector<std::string_view>> bad = {
        {"--size", "1,2"},   {"--size", "1,2,3,4"},   {"--size", "0,2,3"}, {"--size", "1,x,3"},
        {"--size", "1,,3"},  {"--size", "65537,1,1"}, {"--dtype", "fp8"},  {"--dtype", "fp32,"},
        {"--chiplet", "-1"}, {"--chiplet", "8"},      {"--scale", "nan"},  {"--scale", "1e99"},
        {"--scale", "2x"},   {"--seed", ""},          {"--device"},        {"--sizes=1,1,1"},
        {"extra"},
    };
    for (const auto& args : bad)
        EXPECT_THROW(parse(args), UsageError) << args[0] << " " << args.back();
}

// ---- reference and check ------------------------------------------------------

struct Problem {
    Shape shape;
    std::vector<float> x, w;
};

Problem problem(DType t, Shape s, std::uint64_t seed = 7) {
    return {s, random_values(t, s.m * s.k, seed), random_values(t, s.k * s.n, seed + 1)};
}

// y as the card computes it: fp32 sums in k order, rounded once to t.
std::vector<float> card_like(DType t, const Problem& p, float scale) {
    std::vector<float> y(p.shape.m * p.shape.n);
    for (std::uint64_t i = 0; i < p.shape.m; i++)
        for (std::uint64_t j = 0; j < p.shape.n; j++) {
            float sum = 0;
            for (std::uint64_t q = 0; q < p.shape.k; q++)
                sum += p.x[i * p.shape.k + q] * p.w[q * p.shape.n + j];
            const float mm = round_to(t, sum);
            y[i * p.shape.n + j] = round_to(t, (mm > 0 ? mm : 0.0F) * scale);
        }
    return y;
}

TEST(Reference, InputsAreDeterministicRepresentableAndInMinusOneToOne) {
    for (DType t : {DType::Fp32, DType::Fp16, DType::Bf16}) {
        const auto a = random_values(t, 1000, 42);
        EXPECT_EQ(a, random_values(t, 1000, 42));
        EXPECT_NE(a, random_values(t, 1000, 43));
        for (float v : a) {
            EXPECT_EQ(round_to(t, v), v);
            EXPECT_GE(v, -1.0F);
            EXPECT_LE(v, 1.0F);
        }
    }
}

TEST(Check, AResultComputedAsTheCardDoesPassesInEveryType) {
    for (DType t : {DType::Fp32, DType::Fp16, DType::Bf16}) {
        const Problem p = problem(t, {17, 300, 9});
        const CheckResult r =
            check(card_like(t, p, 0.375F), reference(t, p.x, p.w, p.shape, 0.375F));
        EXPECT_TRUE(r.pass()) << dtype_name(t);
        EXPECT_EQ(r.checked, 17U * 9U);
        EXPECT_GT(r.max_abs_error, 0.0) << dtype_name(t); // rounding happened
        EXPECT_LE(r.worst_bound_fraction, 1.0);
    }
}

TEST(Check, OneElementBeyondItsBoundFailsAndIsNamed) {
    const Problem p = problem(DType::Fp32, {4, 8, 5});
    const Reference ref = reference(DType::Fp32, p.x, p.w, p.shape, 1.0F);
    std::vector<float> y(ref.y.begin(), ref.y.end());
    y[13] = static_cast<float>(ref.y[13] + 2 * ref.bound[13]);
    const CheckResult r = check(y, ref);
    EXPECT_FALSE(r.pass());
    EXPECT_EQ(r.failed, 1U);
    EXPECT_EQ(r.first_failed, 13U);
    EXPECT_EQ(r.first_failed_got, y[13]);
    EXPECT_EQ(r.first_failed_want, ref.y[13]);
    EXPECT_GT(r.worst_bound_fraction, 1.0);
}

TEST(Check, NanInfAndMissingElementsFail) {
    const Problem p = problem(DType::Bf16, {3, 4, 3});
    const Reference ref = reference(DType::Bf16, p.x, p.w, p.shape, 1.0F);
    std::vector<float> y(ref.y.begin(), ref.y.end());
    y[2] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_EQ(check(y, ref).failed, 1U);
    y[2] = std::numeric_limits<float>::infinity();
    EXPECT_EQ(check(y, ref).failed, 1U);
    y.assign(ref.y.begin(), ref.y.end() - 2);
    const CheckResult r = check(y, ref);
    EXPECT_EQ(r.failed, 2U);
    EXPECT_EQ(r.first_failed, 7U);
    EXPECT_FALSE(check({}, ref).pass());
}

TEST(Check, Fp32BoundCatchesAResultThatWasRoundedThroughBf16) {
    // The fp32 bound must not be so loose that bf16 precision would pass
    // (for a short K, where it is tight; it grows with K as it must).
    const Problem p = problem(DType::Fp32, {16, 32, 16});
    std::vector<float> y = card_like(DType::Fp32, p, 0.375F);
    for (float& v : y)
        v = round_to(DType::Bf16, v);
    const Reference ref = reference(DType::Fp32, p.x, p.w, p.shape, 0.375F);
    std::size_t nonzero = 0;
    for (double v : ref.y)
        nonzero += v != 0 ? 1 : 0;
    ASSERT_GT(nonzero, y.size() / 4);
    EXPECT_GE(check(y, ref).failed, nonzero * 9 / 10);
}

TEST(Check, NegativeSumsBecomeZeroThroughRelu) {
    const Problem p = problem(DType::Fp32, {8, 8, 8});
    const Reference ref = reference(DType::Fp32, p.x, p.w, p.shape, -2.0F);
    unsigned zeros = 0;
    for (double v : ref.y) {
        EXPECT_LE(v, 0.0); // relu >= 0 times a negative scale
        zeros += v == 0 ? 1 : 0;
    }
    EXPECT_GT(zeros, 0U);
    EXPECT_TRUE(check(card_like(DType::Fp32, p, -2.0F), ref).pass());
}

// ---- the workload on a fake card -------------------------------------------------

// A librbln device over a FakeCard (ioctl path), with its caching allocator.
struct FakeSetup {
    /// @npu: the card's NPU id (a second card of the process is NPU 1).
    explicit FakeSetup(unsigned chiplets = 4, unsigned npu = 0)
        : card(std::make_shared<test::FakeCard>(chiplets)) {
        alloc = DeviceAllocator::for_kernels(npu, {{npu, card}});
        DeviceOptions o;
        o.submitter.use_io_uring = false;
        o.submitter.warn = [](const std::string&) {};
        dev = Device::open(card, 0, o);
    }
    FakeSetup(const FakeSetup&) = delete;
    FakeSetup& operator=(const FakeSetup&) = delete;
    FakeSetup(FakeSetup&&) = delete;
    FakeSetup& operator=(FakeSetup&&) = delete;
    ~FakeSetup() {
        dev.reset();
        alloc.reset();
    }
    Card as_card() {
        Card c;
        c.device = dev;
        c.allocator = alloc.get();
        c.node = card->path();
        c.description = "fake card, " + std::to_string(dev->chiplet_count()) + " chiplets";
        return c;
    }
    std::shared_ptr<test::FakeCard> card;
    std::unique_ptr<DeviceAllocator> alloc;
    std::shared_ptr<Device> dev;
};

WorkloadOptions small(DType t, Shape s = {9, 70, 13},
                      std::vector<unsigned> chiplets = {0, 1, 2, 3}) {
    WorkloadOptions o;
    o.shape = s;
    o.dtype = t;
    o.chiplets = std::move(chiplets);
    return o;
}

TEST(Workload, OnACardThatComputesRightEveryTypePassesAndEveryStorageAndStreamIsGone) {
    for (DType t : {DType::Fp32, DType::Fp16, DType::Bf16}) {
        FakeSetup f;
        const WorkloadResult r = run_workload(f.dev, *f.alloc, small(t));
        EXPECT_TRUE(r.check.pass()) << dtype_name(t);
        EXPECT_EQ(r.check.checked, 9U * 13U);
        EXPECT_EQ(f.alloc->memory_allocated(), 0U) << "a storage outlived the run";
        EXPECT_EQ(f.card->kernel.queue_count(), 0U) << "a stream outlived the run";
    }
}

TEST(Workload, TheRowsOfXAreSplitOverTheChipletsEachSliceComputingInItsOwnChipletsHbm) {
    FakeSetup f;
    const WorkloadResult r = run_workload(f.dev, *f.alloc, small(DType::Bf16, {10, 6, 7}));
    ASSERT_EQ(r.slices.size(), 4U);
    const std::vector<std::uint64_t> rows = {3, 3, 2, 2};
    std::uint64_t first = 0;
    for (unsigned c = 0; c < 4; c++) {
        EXPECT_EQ(r.slices[c].chiplet, c);
        EXPECT_EQ(r.slices[c].rows, rows[c]);
        EXPECT_EQ(r.slices[c].first_row, first);
        first += rows[c];
    }
    // One stream (kernel queue) per slice.
    EXPECT_EQ(f.card->queue_masks.size(), 4U);
    // MATMUL, RELU, SCALE per slice, each reading and writing the HBM of
    // its slice's chiplet, and SCALE reading what RELU wrote, RELU what
    // MATMUL wrote.
    ASSERT_EQ(f.card->launches.size(), 12U);
    for (unsigned c = 0; c < 4; c++) {
        const auto* l = &f.card->launches[3 * c];
        EXPECT_EQ(l[0].kernel, RBLN_FW_KERNEL_MATMUL);
        EXPECT_EQ(l[0].shape[0], rows[c]);
        EXPECT_EQ(l[1].kernel, RBLN_FW_KERNEL_RELU);
        EXPECT_EQ(l[2].kernel, RBLN_FW_KERNEL_SCALE);
        EXPECT_EQ(l[1].a, l[0].out);
        EXPECT_EQ(l[2].a, l[1].out);
        for (std::uint64_t va : {l[0].a, l[0].b, l[0].out, l[1].out, l[2].out})
            EXPECT_EQ(f.card->hbm_chiplet(va), c) << "slice " << c;
    }
    EXPECT_EQ(r.hbm_bytes, 2U * (10 * 6 + 4 * 6 * 7 + 3 * 10 * 7));
    // The events: the fake's clock steps 1 us per TIMESTAMP, and a slice's
    // jobs reach it in order, one slice after the other.
    for (const Slice& s : r.slices) {
        EXPECT_EQ(s.card.copy_in_ns, 1000U);
        EXPECT_EQ(s.card.total_ns, 4000U);
    }
}

TEST(Workload, OneChipletTakesEveryRow) {
    FakeSetup f;
    const WorkloadResult r = run_workload(f.dev, *f.alloc, small(DType::Fp32, {9, 70, 13}, {2}));
    ASSERT_EQ(r.slices.size(), 1U);
    EXPECT_EQ(r.slices[0].chiplet, 2U);
    EXPECT_EQ(r.slices[0].rows, 9U);
    EXPECT_TRUE(r.check.pass());
    for (const auto& l : f.card->launches)
        EXPECT_EQ(f.card->hbm_chiplet(l.out), 2U);
}

TEST(Workload, OnTheSecondCardOfTheProcessItsStoragesComeFromThatCardsChiplets) {
    FakeSetup f(1, 1);
    const WorkloadResult r = run_workload(f.dev, *f.alloc, small(DType::Fp32, {9, 70, 13}, {0}));
    EXPECT_TRUE(r.check.pass());
    EXPECT_EQ(f.card->hbm_chiplet(f.card->launches.at(0).out), 0U);
}

TEST(Workload, FewerRowsThanChipletsLeavesTheRestIdle) {
    FakeSetup f;
    const WorkloadResult r = run_workload(f.dev, *f.alloc, small(DType::Fp32, {2, 5, 3}));
    ASSERT_EQ(r.slices.size(), 2U);
    EXPECT_EQ(r.slices[1].chiplet, 1U);
    EXPECT_TRUE(r.check.pass());
}

TEST(Workload, OneWrongElementFailsTheCheckAndNamesIt) {
    FakeSetup f;
    f.card->corrupt_element = 20;
    const WorkloadResult r = run_workload(f.dev, *f.alloc, small(DType::Fp32));
    EXPECT_FALSE(r.check.pass());
    EXPECT_EQ(r.check.failed, 1U);
    EXPECT_EQ(r.check.first_failed, 20U);
}

TEST(Workload, AnMmuFaultIsLibrblnsJobFailure) {
    FakeSetup f;
    f.card->fail_job = EFAULT;
    try {
        run_workload(f.dev, *f.alloc, small(DType::Fp16));
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::JobFailed);
        EXPECT_EQ(e.sys_errno(), EFAULT);
        EXPECT_NE(std::string(e.what()).find("MMU fault"), std::string::npos) << e.what();
    }
    EXPECT_EQ(f.alloc->memory_allocated(), 0U);
}

TEST(Workload, AJobTheCardTimedOutIsATimeout) {
    FakeSetup f;
    f.card->fail_job = ETIMEDOUT;
    try {
        run_workload(f.dev, *f.alloc, small(DType::Fp32));
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::Timeout);
        EXPECT_NE(std::string(e.what()).find("timed out"), std::string::npos) << e.what();
    }
}

TEST(Workload, AChipletTheCardLacksIsAnInvalidArgumentBeforeAnythingIsAllocated) {
    FakeSetup f(1);
    const int before = f.card->kernel.count(KernelOp::BoCreate);
    bool threw = false;
    try {
        run_workload(f.dev, *f.alloc, small(DType::Fp32, {9, 70, 13}, {1}));
    } catch (const Error& e) {
        threw = true;
        EXPECT_EQ(e.code(), Errc::InvalidArgument);
        EXPECT_NE(std::string(e.what()).find("1 chiplet(s)"), std::string::npos) << e.what();
    }
    EXPECT_TRUE(threw);
    EXPECT_EQ(f.card->kernel.count(KernelOp::BoCreate), before);
}

TEST(Workload, ARefusedSubmitIsTheTypedLibrblnError) {
    FakeSetup f;
    f.card->kernel.fail_next(KernelOp::Submit, EIO);
    try {
        run_workload(f.dev, *f.alloc, small(DType::Fp32));
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(e.sys_errno(), EIO);
    }
    EXPECT_EQ(f.alloc->memory_allocated(), 0U);
}

// ---- the command line -----------------------------------------------------------

struct CliRun {
    int status;
    std::string out, err;
};

CliRun cli(std::vector<std::string_view> args,
           const std::function<void(test::FakeCard&)>& setup = {}) {
    std::ostringstream out;
    std::ostringstream err;
    FakeSetup f;
    if (setup)
        setup(*f.card);
    const CardOpener opener = [&](const std::optional<std::string>&) { return f.as_card(); };
    const int status = run(args, out, err, opener);
    return {status, out.str(), err.str()};
}

TEST(Cli, APassingRunReportsEveryTypeOverEveryChipletAndExitsZero) {
    const CliRun r = cli({"--size", "4,8,4", "--dtype", "all"});
    EXPECT_EQ(r.status, kExitPass) << r.err;
    EXPECT_EQ(r.err, "");
    for (const char* s :
         {"== fp32: x 4x8, w 8x4, y 4x4; x's rows split over chiplets 0-3 (1 row of x each)",
          "== bf16", "== fp16", "streams     4 streams, one per chiplet,",
          "card time   per slice, between its events", "              on chiplet 0: copy in 1.0 us",
          "              on chiplet 3: copy in 1.0 us", "PASS        all 16 elements",
          "rbln-demo: PASS\n"})
        EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
}

TEST(Cli, AWrongResultExitsOneAndSaysWhere) {
    const CliRun r = cli({"--size", "4,8,4", "--chiplet", "1"},
                         [](test::FakeCard& c) { c.corrupt_element = 5; });
    EXPECT_EQ(r.status, kExitWrongResult);
    EXPECT_NE(r.out.find("y 4x4; all on chiplet 1"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("FAIL        1 of 16 elements beyond their bound; first y[1][1]"),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("rbln-demo: FAIL\n"), std::string::npos);
}

TEST(Cli, AFailedJobExitsSixWithTheMessage) {
    const CliRun r = cli({"--size", "4,8,4"}, [](test::FakeCard& c) { c.fail_job = EIO; });
    EXPECT_EQ(r.status, kExitError);
    EXPECT_NE(r.err.find("a DMA error"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("[job-failed]"), std::string::npos) << r.err;
}

TEST(Cli, UsageErrorsExitTwoAndHelpExitsZero) {
    EXPECT_EQ(cli({"--bogus"}).status, kExitUsage);
    const CliRun h = cli({"--help"});
    EXPECT_EQ(h.status, kExitPass);
    EXPECT_NE(h.out.find("--size M,K,N"), std::string::npos);
}

TEST(Cli, AChipletTheCardLacksExitsSix) {
    const CliRun r = cli({"--chiplet", "5"});
    EXPECT_EQ(r.status, kExitError);
    EXPECT_NE(r.err.find("the card has 4 chiplet(s)"), std::string::npos) << r.err;
}

TEST(Cli, TheSharedErrorsHaveTheSharedExitStatus) {
    const std::vector<std::pair<Errc, int>> cases = {{Errc::DriverNotLoaded, 3},
                                                     {Errc::NoDevice, 4},
                                                     {Errc::PermissionDenied, 5},
                                                     {Errc::Io, kExitError}};
    for (const auto& [code, status] : cases) {
        std::ostringstream out;
        std::ostringstream err;
        const CardOpener opener = [code = code](const std::optional<std::string>&) -> Card {
            throw Error(code, "open", "/dev/accel/accel0", 0, "as the test says");
        };
        const std::vector<std::string_view> args;
        EXPECT_EQ(run(args, out, err, opener), status) << errc_name(code);
    }
}

} // namespace
} // namespace rbln::demo
