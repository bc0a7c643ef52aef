// run's limits as data: the grammar of durations, sizes and counts, `--limit NAME=VALUE`, the
// [run] and [run.limits] tables, and which mechanism each limit gets from what a host offers.
#include "lib/run_limits.hpp"

#include <string>

#include <gtest/gtest.h>

#include "lib/config.hpp"
#include "lib/error.hpp"

namespace dsh {
namespace {

using namespace std::chrono_literals;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(Duration, AcceptsEachUnitAndABareNumberOfSeconds) {
    EXPECT_EQ(*parse_duration("500ms"), 500ms);
    EXPECT_EQ(*parse_duration("30s"), 30s);
    EXPECT_EQ(*parse_duration("30"), 30s);
    EXPECT_EQ(*parse_duration("5m"), 5min);
    EXPECT_EQ(*parse_duration("1h"), 1h);
    EXPECT_EQ(*parse_duration("8784h"), 8784h);
}

TEST(Duration, RefusesAnythingElseNamingTheTextAndTheGrammar) {
    for (const char* text : {"", "s", "1.5s", "-5", "+5", " 5", "5 s", "5S", "5d", "5sec", "1h30m", "0x10", "五"}) {
        const auto parsed = parse_duration(text);
        ASSERT_FALSE(parsed) << text;
        EXPECT_TRUE(contains(parsed.reason(), std::string("'") + text + "' is not a duration")) << parsed.reason();
        EXPECT_TRUE(contains(parsed.reason(), "500ms, 30s, 5m, 1h")) << parsed.reason();
    }
    EXPECT_TRUE(contains(parse_duration("0").reason(), "'0' is zero")) << parse_duration("0").reason();
    EXPECT_TRUE(contains(parse_duration("0ms").reason(), "is zero"));
    EXPECT_TRUE(contains(parse_duration("8785h").reason(), "more than a year"));
    EXPECT_TRUE(contains(parse_duration("99999999999999999999999s").reason(), "is not a duration"));
}

TEST(Size, IsBinaryWithOptionalUnit) {
    EXPECT_EQ(*parse_size("1"), 1U);
    EXPECT_EQ(*parse_size("1K"), 1024U);
    EXPECT_EQ(*parse_size("1k"), 1024U);
    EXPECT_EQ(*parse_size("64M"), 64U << 20);
    EXPECT_EQ(*parse_size("2G"), std::uint64_t{2} << 30);
    EXPECT_EQ(*parse_size("10T"), std::uint64_t{10} << 40);
    for (const char* text : {"", "G", "2GB", "2GiB", "1.5G", "-1", "2 G", "2P"}) {
        const auto parsed = parse_size(text);
        ASSERT_FALSE(parsed) << text;
        EXPECT_TRUE(contains(parsed.reason(), "is not a size; sizes: a whole number of bytes, or with K, M, G or T"))
            << parsed.reason();
    }
    EXPECT_TRUE(contains(parse_size("0G").reason(), "is zero"));
    EXPECT_TRUE(contains(parse_size("8388608T").reason(), "too large"));
    EXPECT_EQ(*parse_size("8388607T"), std::uint64_t{8388607} << 40);
}

TEST(LimitOption, SetsEachLimitInItsUnit) {
    RunLimits limits;
    std::vector<LimitName> given;
    apply_limit_option("memory=2G", limits, given);
    apply_limit_option("pids=512", limits, given);
    apply_limit_option("cpu=10m", limits, given);
    apply_limit_option("fsize=10G", limits, given);
    EXPECT_EQ(*limits.memory, std::uint64_t{2} << 30);
    EXPECT_EQ(*limits.pids, 512U);
    EXPECT_EQ(*limits.cpu, 10min);
    EXPECT_EQ(*limits.fsize, std::uint64_t{10} << 30);
    EXPECT_EQ(limit_value_text(LimitName::Memory, *limits.memory), "2G");
    EXPECT_EQ(limit_value_text(LimitName::Cpu, *limits.value(LimitName::Cpu)), "10m");
}

std::string usage_error(const std::vector<std::string>& options) {
    RunLimits limits;
    std::vector<LimitName> given;
    try {
        for (const auto& option : options) apply_limit_option(option, limits, given);
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), "USAGE");
        return e.what();
    }
    ADD_FAILURE() << "accepted";
    return "";
}

TEST(LimitOption, BadInputNamesTheValueAndWhatIsAccepted) {
    EXPECT_EQ(usage_error({"memory"}), "--limit 'memory' needs a value: --limit memory=SIZE");
    EXPECT_EQ(usage_error({"pids="}), "--limit 'pids=' needs a value: --limit pids=N");
    EXPECT_EQ(usage_error({"memroy=1G"}),
              "--limit 'memroy=1G': unknown limit 'memroy' (did you mean 'memory'?); limits: memory=SIZE, pids=N, "
              "cpu=DURATION, fsize=SIZE");
    EXPECT_TRUE(contains(usage_error({"nofile=10"}), "unknown limit 'nofile'; limits:"));
    EXPECT_EQ(usage_error({"memory=1G", "memory=2G"}), "--limit memory is given twice; give each limit once");
    EXPECT_TRUE(contains(usage_error({"memory=2X"}), "--limit 'memory=2X': '2X' is not a size"));
    EXPECT_TRUE(contains(usage_error({"pids=-1"}), "'-1' is not a number of processes"));
    EXPECT_TRUE(contains(usage_error({"pids=0"}), "'0' is zero"));
    EXPECT_TRUE(contains(usage_error({"pids=4194305"}), "more than the kernel's 4194304"));
    EXPECT_TRUE(contains(usage_error({"cpu=1.5"}), "'1.5' is not a duration"));
    EXPECT_TRUE(contains(usage_error({"fsize=0"}), "'0' is zero"));
}

TEST(RunConfig, ReadsTimeoutKillAfterAndLimitsAsTextOrNumbers) {
    const Config config = parse_config(R"(
[run]
timeout = "90s"
kill_after = 2

[run.limits]
memory = "512M"
pids = 64
cpu = 600
fsize = 1048576
)",
                                       "cfg.toml");
    EXPECT_EQ(*config.run.timeout, 90s);
    EXPECT_EQ(*config.run.killAfter, 2s);
    EXPECT_EQ(*config.run.limits.memory, 512U << 20);
    EXPECT_EQ(*config.run.limits.pids, 64U);
    EXPECT_EQ(*config.run.limits.cpu, 600s);
    EXPECT_EQ(*config.run.limits.fsize, 1048576U);
    EXPECT_TRUE(parse_config("", "cfg.toml").run.limits.empty());
    EXPECT_FALSE(parse_config("", "cfg.toml").run.timeout);
}

std::string config_error(const std::string& text) {
    try {
        parse_config(text, "cfg.toml");
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), "CONFIG");
        return e.what();
    }
    ADD_FAILURE() << "accepted:\n" << text;
    return "";
}

TEST(RunConfig, ErrorsCarryFileLineAndColumn) {
    EXPECT_EQ(config_error("[run]\ntimeout = \"1.5s\"\n"),
              "cfg.toml:2:11: [run] timeout: '1.5s' is not a duration; durations: a whole number with a unit, ms, s, m or h "
              "(500ms, 30s, 5m, 1h), or a bare number of seconds");
    EXPECT_EQ(config_error("[run]\nkill_after = 0\n"), "cfg.toml:2:14: [run] kill_after: '0' is zero; a duration must be above zero");
    EXPECT_EQ(config_error("[run]\ntimeout = true\n"), "cfg.toml:2:11: [run] timeout must be a string or an integer, not a boolean");
    EXPECT_EQ(config_error("[run]\ntimeuot = 5\n"),
              "cfg.toml:2:1: unknown key 'timeuot' in [run] (did you mean 'timeout'?); known keys: timeout, kill_after, limits");
    EXPECT_EQ(config_error("[run.limits]\nmemroy = \"1G\"\n"),
              "cfg.toml:2:1: unknown key 'memroy' in [run.limits] (did you mean 'memory'?); known keys: memory, pids, cpu, fsize");
    EXPECT_EQ(config_error("[run.limits]\npids = -3\n"),
              "cfg.toml:2:8: [run.limits] pids: '-3' is not a number of processes; pids takes a whole number");
    EXPECT_TRUE(contains(config_error("[run.limits]\nmemory = \"2X\"\n"), "cfg.toml:2:10: [run.limits] memory: '2X' is not a size"));
    EXPECT_TRUE(contains(config_error("[run]\nlimits = 3\n"), "[run] limits must be a table, not an integer"));
}

constexpr RlimitSupport kLinux{true, true, true};

RunLimits every_limit() {
    RunLimits limits;
    limits.memory = 1U << 30;
    limits.pids = 64;
    limits.cpu = 10s;
    limits.fsize = 1U << 20;
    return limits;
}

TEST(DecideLimits, ACgroupCountsMemoryPidsAndCpuForTheTree) {
    CgroupOffer offer;
    offer.memory.mechanism = LimitMechanism::CgroupV1;
    offer.pids.mechanism = LimitMechanism::CgroupV1;
    offer.cpu.mechanism = LimitMechanism::CgroupV2;
    const auto decided = decide_limits(every_limit(), offer, kLinux);
    ASSERT_EQ(decided.size(), 4U);
    EXPECT_EQ(decided[0].name, LimitName::Memory);
    EXPECT_EQ(decided[0].mechanism, LimitMechanism::CgroupV1);
    EXPECT_EQ(decided[0].scope, LimitScope::Tree);
    EXPECT_EQ(decided[1].mechanism, LimitMechanism::CgroupV1);
    EXPECT_EQ(decided[2].mechanism, LimitMechanism::CgroupV2);
    EXPECT_EQ(decided[2].scope, LimitScope::Tree);
    EXPECT_EQ(decided[3].mechanism, LimitMechanism::Rlimit);
    EXPECT_EQ(decided[3].scope, LimitScope::File);
    EXPECT_TRUE(limit_gaps(decided).empty());
    EXPECT_EQ(limit_line(decided[0]), "limit memory=1G: cgroup-v1, for the whole tree: " + decided[0].note);
    EXPECT_EQ(limit_line(decided[3]), "limit fsize=1M: rlimit, for each file: " + decided[3].note);
}

TEST(DecideLimits, WithoutACgroupRlimitsBoundEachProcessAndPidsIsAGap) {
    CgroupOffer offer;
    offer.memory.whyNot = "/sys/fs/cgroup/memory is not writable";
    offer.pids.whyNot = "/sys/fs/cgroup/pids is not writable";
    const auto decided = decide_limits(every_limit(), offer, kLinux);
    ASSERT_EQ(decided.size(), 4U);
    EXPECT_EQ(decided[0].mechanism, LimitMechanism::Rlimit);
    EXPECT_EQ(decided[0].scope, LimitScope::Process);
    EXPECT_TRUE(contains(decided[0].note, "RLIMIT_AS")) << decided[0].note;
    EXPECT_TRUE(contains(decided[0].note, "/sys/fs/cgroup/memory is not writable")) << decided[0].note;
    EXPECT_EQ(decided[1].mechanism, LimitMechanism::None);
    EXPECT_EQ(decided[2].mechanism, LimitMechanism::Rlimit);
    EXPECT_TRUE(contains(decided[2].note, "RLIMIT_CPU")) << decided[2].note;
    EXPECT_EQ(decided[3].mechanism, LimitMechanism::Rlimit);
    const auto gaps = limit_gaps(decided);
    ASSERT_EQ(gaps.size(), 1U);
    EXPECT_EQ(gaps[0], "limit pids=64: not enforced: /sys/fs/cgroup/pids is not writable; RLIMIT_NPROC would count every "
                       "process of the user, not the call's");
}

TEST(DecideLimits, WithoutRlimitsEveryLimitWithoutACgroupIsAGap) {
    const auto decided = decide_limits(every_limit(), CgroupOffer{}, RlimitSupport{});
    EXPECT_EQ(limit_gaps(decided).size(), 4U);
    RunLimits none;
    EXPECT_TRUE(decide_limits(none, CgroupOffer{}, kLinux).empty());
    // macOS: CPU time and file size by rlimits, memory a gap.
    const auto mac = decide_limits(every_limit(), CgroupOffer{}, RlimitSupport{false, true, true});
    EXPECT_EQ(mac[0].mechanism, LimitMechanism::None);
    EXPECT_EQ(mac[2].mechanism, LimitMechanism::Rlimit);
    EXPECT_EQ(limit_gaps(mac).size(), 2U);
}

}  // namespace
}  // namespace dsh
