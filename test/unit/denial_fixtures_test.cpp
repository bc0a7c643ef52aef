// Real stderr of real tools (test/fixtures/denials/, made by capture.sh there): each one a
// backend denied is classified with that backend's dialect for the same call and must be a
// denial naming the expected path, unless its .meta says why no text gives it away; each
// ordinary failure, run with no sandbox, must be a failure under every dialect.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "lib/classify.hpp"
#include "platform/linux/bwrap_argv.hpp"
#include "platform/linux/landlock_rules.hpp"

namespace dsh {
namespace {

namespace fs = std::filesystem;

const fs::path kFixtures = fs::path(DSH_SOURCE_DIR) / "test" / "fixtures" / "denials";

struct Fixture {
    std::string name;  // backend/tool-case
    std::string stderrText;
    std::map<std::string, std::string> meta;
};

std::string read_all(const fs::path& file) {
    std::ifstream in(file, std::ios::binary);
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
}

std::vector<Fixture> fixtures_in(const std::string& directory) {
    std::vector<Fixture> out;
    if (!fs::is_directory(kFixtures / directory)) return out;
    for (const auto& entry : fs::directory_iterator(kFixtures / directory)) {
        if (entry.path().extension() != ".meta") continue;
        Fixture fixture;
        fixture.name = directory + "/" + entry.path().stem().string();
        std::istringstream lines(read_all(entry.path()));
        for (std::string line; std::getline(lines, line);) {
            const auto colon = line.find(": ");
            if (colon != std::string::npos) fixture.meta[line.substr(0, colon)] = line.substr(colon + 2);
            else if (!line.empty() && line.back() == ':') fixture.meta[line.substr(0, line.size() - 1)] = "";
        }
        fixture.stderrText = read_all(fs::path(entry.path()).replace_extension(".txt"));
        out.push_back(std::move(fixture));
    }
    std::sort(out.begin(), out.end(), [](const Fixture& a, const Fixture& b) { return a.name < b.name; });
    return out;
}

// The dialect the backend's plan carries for the call the fixture was captured with.
Dialect dialect_for(const std::string& backend, const std::string& mode, const std::string& network) {
    SandboxPolicy policy;
    policy.mode = mode == "workspace-write" ? ConfinedSandboxMode::WorkspaceWrite : ConfinedSandboxMode::ReadOnly;
    policy.network = network == "deny" ? NetworkPolicy::Deny : NetworkPolicy::Allow;
    if (backend == "bwrap") return {bwrap::denial_signatures(policy), bwrap::dialect({}).runnerFailureRules};
    return {landlock::denial_signatures(policy), landlock::dialect({}).runnerFailureRules};
}

// Every word either backend may carry: hidden paths, workspace-write, the network denied.
Dialect widest_dialect(const std::string& backend) {
    Dialect dialect = dialect_for(backend, "workspace-write", "deny");
    if (backend == "bwrap") {
        SandboxPolicy policy;
        policy.mode = ConfinedSandboxMode::WorkspaceWrite;
        policy.network = NetworkPolicy::Deny;
        policy.unreadablePaths = {"/hidden"};
        dialect.denialSignatures = bwrap::denial_signatures(policy);
    }
    return dialect;
}

std::string field(const Fixture& fixture, const std::string& key) {
    const auto found = fixture.meta.find(key);
    return found == fixture.meta.end() ? std::string() : found->second;
}

int status_of(const Fixture& fixture) { return std::stoi(field(fixture, "status")); }

TEST(DenialFixtures, EveryBackendHasThem) {
    for (const char* backend : {"bwrap", "landlock"}) EXPECT_GE(fixtures_in(backend).size(), 20u) << backend;
    EXPECT_GE(fixtures_in("unconfined").size(), 10u);
}

TEST(DenialFixtures, EachDenialIsClassifiedWithItsBackendsDialect) {
    for (const char* backend : {"bwrap", "landlock"}) {
        for (const Fixture& fixture : fixtures_in(backend)) {
            SCOPED_TRACE(fixture.name + ": " + field(fixture, "command"));
            ASSERT_EQ(field(fixture, "backend"), backend);
            ASSERT_NE(status_of(fixture), 0);
            const Classification result = classify(dialect_for(backend, field(fixture, "mode"), field(fixture, "network")),
                                                   fixture.stderrText, status_of(fixture));
            if (field(fixture, "verdict") == "failure") {
                EXPECT_FALSE(field(fixture, "why").empty()) << "a denial that stays failure says why";
                EXPECT_EQ(result.verdict, Verdict::Failure) << result.line.value_or("");
                continue;
            }
            ASSERT_EQ(field(fixture, "verdict"), "denial");
            EXPECT_EQ(result.verdict, Verdict::Denial);
            const std::string expected = field(fixture, "path");
            if (expected == "null") {
                EXPECT_EQ(result.path, std::nullopt) << result.line.value_or("");
            } else if (!expected.empty() && expected.back() == '*') {
                ASSERT_TRUE(result.path.has_value()) << result.line.value_or("");
                EXPECT_EQ(result.path->substr(0, expected.size() - 1), expected.substr(0, expected.size() - 1));
            } else {
                EXPECT_EQ(result.path, expected) << result.line.value_or("");
            }
        }
    }
}

TEST(DenialFixtures, OrdinaryFailuresStayFailuresUnderEveryDialect) {
    for (const Fixture& fixture : fixtures_in("unconfined")) {
        SCOPED_TRACE(fixture.name + ": " + field(fixture, "command"));
        ASSERT_NE(status_of(fixture), 0);
        for (const char* backend : {"bwrap", "landlock"}) {
            const Classification result = classify(widest_dialect(backend), fixture.stderrText, status_of(fixture));
            EXPECT_EQ(result.verdict, Verdict::Failure) << backend << ": " << result.line.value_or("");
        }
    }
}

// A backend's dialect names only what it produces: what the other backend denies with words of
// its own (an errno name, a tool's words for it) is no denial here.
TEST(DenialFixtures, ABackendsOwnWordsAreNotTheOthers) {
    const Classification npm_landlock =
        classify(bwrap::dialect({}), read_all(kFixtures / "landlock" / "npm-install.txt"), 1);
    EXPECT_EQ(npm_landlock.verdict, Verdict::Failure);
    const Classification java_landlock =
        classify(bwrap::dialect({}), read_all(kFixtures / "landlock" / "java-nio.txt"), 1);
    EXPECT_EQ(java_landlock.verdict, Verdict::Failure);
}

}  // namespace
}  // namespace dsh
