// Every Landlock ABI from 1 to the kernel's: with `[backend.landlock] max_abi = N` the backend
// builds its ruleset for ABI N, names that ABI's gaps in the plan, and those gaps (and only
// those) show on the host. What newer ABIs add (truncate in 3, device ioctls in 5) must be
// reported as a gap below them, and must hold from them on.
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "harness.hpp"

namespace {

int kernel_abi() {
    static const int abi = [] {
        e2e::TempDir home;
        e2e::RunOptions options;
        options.env = e2e::isolated_env(home.path());
        const e2e::Result r = e2e::run({"doctor", "--json"}, options);
        nlohmann::json doctor = nlohmann::json::parse(r.out, nullptr, false);
        if (!doctor.is_object()) return 0;
        for (const auto& backend : doctor["backends"])
            if (backend["name"] == "landlock") return std::stoi(backend["facts"]["landlockAbi"].get<std::string>());
        return 0;
    }();
    return abi;
}

class LandlockAbi : public ::testing::TestWithParam<int> {
protected:
    void SetUp() override {
        E2E_REQUIRE(kernel_abi() >= GetParam(), "the kernel's Landlock ABI is below " + std::to_string(GetParam()));
        mkdir((home.path() + "/config").c_str(), 0700);
        mkdir((home.path() + "/config/dsh-confine").c_str(), 0700);
        e2e::write_file(home / "config/dsh-confine/config.toml",
                        "[backend.landlock]\nmax_abi = " + std::to_string(GetParam()) + "\n");
        options.env = e2e::isolated_env(home.path());
        ws = dir.path() + "/ws";
        mkdir(ws.c_str(), 0755);
        options.cwd = ws;
    }
    nlohmann::json plan() {
        const e2e::Result r = e2e::run({"--print", "--backend", "landlock", "--mode", "workspace-write", "--workspace-root",
                                        ws, "--", "true"}, options);
        return nlohmann::json::parse(r.out, nullptr, false);
    }
    bool names_gap(const std::string& key) {
        const nlohmann::json printed = plan();  // kept alive: the loop walks into it
        for (const auto& gap : printed["enforcementGaps"])
            if (gap.get<std::string>().rfind(key + ":", 0) == 0) return true;
        return false;
    }
    e2e::Result confined(const std::string& script) {
        return e2e::run({"--backend", "landlock", "--mode", "workspace-write", "--workspace-root", ws, "--", "/bin/sh",
                         "-c", script, "sh", dir.path(), ws, e2e::binary()}, options);
    }
    e2e::TempDir home;
    e2e::TempDir dir{"/var/tmp"};
    std::string ws;
    e2e::RunOptions options;
};

TEST_P(LandlockAbi, PlanPassesTheCapToTheRunner) {
    const nlohmann::json p = plan();
    ASSERT_TRUE(p.is_object());
    const auto argv = p["argv"].get<std::vector<std::string>>();
    const auto cap = std::find(argv.begin(), argv.end(), "--max-abi");
    ASSERT_NE(cap, argv.end());
    EXPECT_EQ(*(cap + 1), std::to_string(GetParam()));
}

TEST_P(LandlockAbi, TruncateIsAGapExactlyBelowAbi3AndHoldsFrom3) {
    e2e::write_file(dir / "outside", "original\n");
    // truncate(2) on the path itself: coreutils' truncate opens the file for writing first,
    // which every ABI governs.
    const e2e::Result r = confined("\"$3\" __effect truncate \"$1/outside\"");
    const bool escaped = e2e::read_file(dir / "outside").empty();
    EXPECT_EQ(names_gap("truncate"), GetParam() < 3);
    EXPECT_EQ(escaped, GetParam() < 3) << r.err;
}

TEST_P(LandlockAbi, DeviceIoctlsAreAGapExactlyBelowAbi5) { EXPECT_EQ(names_gap("device ioctls"), GetParam() < 5); }

TEST_P(LandlockAbi, WritesOutsideAreDeniedOnEveryAbi) {
    const e2e::Result r = confined("echo x > \"$1/new\"");
    EXPECT_NE(r.status, 0);
    EXPECT_FALSE(e2e::exists(dir / "new"));
    EXPECT_NE(r.err.find("Permission denied"), std::string::npos) << r.err;
}

TEST_P(LandlockAbi, WorkspaceWritesWorkOnEveryAbi) {
    const e2e::Result r = confined("echo x > \"$2/made\" && mkdir \"$2/d\" && echo y > \"$2/d/f\" && f=$(mktemp) && echo z > \"$f\"");
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(e2e::read_file(ws + "/d/f"), "y\n");
}

// ABI 1 cannot allow reparenting: a rename across directories is refused (EXDEV) even inside
// the workspace, an over-block docs/backends/linux.md states. From ABI 2 it works.
TEST_P(LandlockAbi, RenameAcrossDirectoriesInTheWorkspaceNeedsAbi2) {
    // rename(2) itself: mv would fall back to copy and unlink on EXDEV.
    const e2e::Result r = confined("mkdir \"$2/a\" \"$2/b\" && echo x > \"$2/a/f\" && \"$3\" __effect rename \"$2/a/f\" \"$2/b/f\"");
    EXPECT_EQ(e2e::exists(ws + "/b/f"), GetParam() >= 2) << r.err;
    if (GetParam() < 2) {
        EXPECT_NE(r.err.find("Invalid cross-device link"), std::string::npos) << r.err;
    }
}

INSTANTIATE_TEST_SUITE_P(Abis, LandlockAbi, ::testing::Range(1, 8),
                         [](const ::testing::TestParamInfo<int>& abi) { return "Abi" + std::to_string(abi.param); });

}  // namespace
