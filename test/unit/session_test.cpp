// Session rules: ID syntax, the event log's encoding and how it is read back, and the
// Sessions lifecycle over an in-memory SessionStorage.
#include "lib/session.hpp"

#include <atomic>
#include <filesystem>
#include <map>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "fakes.hpp"
#include "temp_dir.hpp"

#include "lib/error.hpp"

namespace dsh {
namespace {

namespace fs = std::filesystem;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

using unit::TempDir;

using unit::FakeSessionStorage;

// The message of the SESSION error `action` throws.
template <typename Action>
std::string session_error(Action action) {
    try {
        action();
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), "SESSION") << e.what();
        return e.what();
    }
    ADD_FAILURE() << "no error was thrown";
    return "";
}

class AcceptedSessionId : public ::testing::TestWithParam<std::string> {};
TEST_P(AcceptedSessionId, IsValid) { EXPECT_TRUE(valid_session_id(GetParam())) << GetParam(); }
INSTANTIATE_TEST_SUITE_P(ValidSessionId, AcceptedSessionId,
                         ::testing::Values("ok._-A9", "a", "...", ".hidden", "s1", std::string(128, 'x')));

class RejectedSessionId : public ::testing::TestWithParam<std::string> {};
TEST_P(RejectedSessionId, IsInvalid) { EXPECT_FALSE(valid_session_id(GetParam())) << GetParam(); }
INSTANTIATE_TEST_SUITE_P(ValidSessionId, RejectedSessionId,
                         ::testing::Values("", ".", "..", "a/b", "../x", "/abs", "a b", "tab\t", "new\nline",
                                           std::string("nul\0x", 5), "caf\xc3\xa9", "a\\b",
                                           std::string(129, 'x')));

TEST(RequireValidSessionId, ThrowsSessionErrorForTraversal) {
    const std::string message = session_error([] { require_valid_session_id("../etc"); });
    EXPECT_TRUE(contains(message, "invalid session ID \"../etc\"")) << message;
}

TEST(RequireValidSessionId, AcceptsAValidId) { EXPECT_NO_THROW(require_valid_session_id("s1")); }

TEST(EncodeModeEvent, IsOneLineEndingInNewline) {
    const std::string line = encode_mode_event(SandboxMode::WorkspaceWrite, "2024-01-02T03:04:05Z");
    ASSERT_FALSE(line.empty());
    EXPECT_EQ(line.back(), '\n');
    EXPECT_EQ(line.find('\n'), line.size() - 1);
    EXPECT_EQ(line, "{\"type\":\"sandbox/mode\",\"mode\":\"workspace-write\",\"at\":\"2024-01-02T03:04:05Z\"}\n");
}

TEST(ParseSessionLog, RoundTripsEncodedEvents) {
    const std::string log = encode_mode_event(SandboxMode::WorkspaceWrite, "t1") +
                            encode_mode_event(SandboxMode::DangerFullAccess, "t2") +
                            encode_mode_event(SandboxMode::ReadOnly, "t3");
    const ParsedLog parsed = parse_session_log(log, "s1");
    ASSERT_EQ(parsed.events.size(), 3u);
    EXPECT_EQ(parsed.events[0].mode, SandboxMode::WorkspaceWrite);
    EXPECT_EQ(parsed.events[0].at, "t1");
    EXPECT_EQ(parsed.events[1].mode, SandboxMode::DangerFullAccess);
    EXPECT_EQ(parsed.events[1].at, "t2");
    EXPECT_EQ(parsed.events[2].mode, SandboxMode::ReadOnly);
    EXPECT_EQ(parsed.events[2].at, "t3");
    EXPECT_TRUE(parsed.warnings.empty());
}

TEST(ParseSessionLog, EmptyLogHasNoEvents) {
    const ParsedLog parsed = parse_session_log("", "s1");
    EXPECT_TRUE(parsed.events.empty());
    EXPECT_TRUE(parsed.warnings.empty());
}

TEST(ParseSessionLog, TornLastLineIsSkippedWithAWarning) {
    const std::string log = encode_mode_event(SandboxMode::WorkspaceWrite, "t1") + "{\"type\":\"sandbox/mo";
    const ParsedLog parsed = parse_session_log(log, "s1");
    ASSERT_EQ(parsed.events.size(), 1u);
    EXPECT_EQ(parsed.events[0].mode, SandboxMode::WorkspaceWrite);
    ASSERT_EQ(parsed.warnings.size(), 1u);
    EXPECT_TRUE(contains(parsed.warnings[0], "torn last line")) << parsed.warnings[0];
}

TEST(ParseSessionLog, CompleteJsonWithoutNewlineIsStillTorn) {
    // An append writes the newline with the event, so an event without one never completed.
    std::string torn = encode_mode_event(SandboxMode::DangerFullAccess, "t2");
    torn.pop_back();
    const ParsedLog parsed = parse_session_log(encode_mode_event(SandboxMode::ReadOnly, "t1") + torn, "s1");
    ASSERT_EQ(parsed.events.size(), 1u);
    EXPECT_EQ(parsed.events[0].mode, SandboxMode::ReadOnly);
    EXPECT_EQ(parsed.warnings.size(), 1u);
}

TEST(ParseSessionLog, DamagedMiddleLineIsAnError) {
    const std::string log = encode_mode_event(SandboxMode::ReadOnly, "t1") + "{garbage\n" +
                            encode_mode_event(SandboxMode::WorkspaceWrite, "t3");
    const std::string message = session_error([&] { parse_session_log(log, "s1"); });
    EXPECT_TRUE(contains(message, "line 2")) << message;
}

TEST(ParseSessionLog, ModeEventWithAnUnknownModeIsAnError) {
    const std::string log = "{\"type\":\"sandbox/mode\",\"mode\":\"root\",\"at\":\"t\"}\n";
    const std::string message = session_error([&] { parse_session_log(log, "s1"); });
    EXPECT_TRUE(contains(message, "has no valid mode")) << message;
}

TEST(ParseSessionLog, LineWithoutEventTypeIsAnError) {
    session_error([] { parse_session_log("{\"mode\":\"read-only\"}\n", "s1"); });
}

TEST(ParseSessionLog, UnknownEventTypesAreIgnored) {
    const std::string log = encode_mode_event(SandboxMode::WorkspaceWrite, "t1") +
                            "{\"type\":\"chat/message\",\"text\":\"hello\"}\n";
    const ParsedLog parsed = parse_session_log(log, "s1");
    ASSERT_EQ(parsed.events.size(), 1u);
    EXPECT_EQ(parsed.events[0].mode, SandboxMode::WorkspaceWrite);
    EXPECT_TRUE(parsed.warnings.empty());
}

TEST(SessionRecord, RoundTripsTheCwd) {
    EXPECT_EQ(decode_session_cwd(encode_session_record("s1", "/ws/a b"), "s1"), "/ws/a b");
}

TEST(SessionRecord, DamagedRecordIsAnError) {
    session_error([] { decode_session_cwd("{\"sessionId\":\"s1\"}", "s1"); });
}

class SessionsTest : public ::testing::Test {
protected:
    TempDir tmp;
    const std::string cwd = tmp.dir("ws");
    const std::string otherCwd = tmp.dir("other");
    FakeSessionStorage storage;
    Sessions sessions{storage};
};

TEST_F(SessionsTest, FirstStartCreatesTheRecord) {
    EXPECT_TRUE(sessions.start("s1", cwd));
    ASSERT_EQ(storage.records.count("s1"), 1u);
    EXPECT_EQ(decode_session_cwd(storage.records["s1"], "s1"), cwd);
}

TEST_F(SessionsTest, StartRecordsTheCanonicalCwd) {
    fs::create_directory_symlink(cwd, tmp.path("ws-link"));
    sessions.start("s1", tmp.path("ws-link"));
    EXPECT_EQ(sessions.show("s1").cwd, cwd);
}

TEST_F(SessionsTest, StartingAgainWithTheSameCwdIsANoOp) {
    ASSERT_TRUE(sessions.start("s1", cwd));
    const std::string before = storage.records["s1"];
    EXPECT_FALSE(sessions.start("s1", cwd));
    EXPECT_EQ(storage.records["s1"], before);
}

TEST_F(SessionsTest, StartingAgainWithTheSameCwdSpelledDifferentlyIsANoOp) {
    ASSERT_TRUE(sessions.start("s1", cwd));
    EXPECT_FALSE(sessions.start("s1", cwd + "/."));
}

TEST_F(SessionsTest, StartingAgainWithAnotherCwdIsAnError) {
    ASSERT_TRUE(sessions.start("s1", cwd));
    const std::string message = session_error([&] { sessions.start("s1", otherCwd); });
    EXPECT_TRUE(contains(message, "immutable")) << message;
    EXPECT_EQ(decode_session_cwd(storage.records["s1"], "s1"), cwd);
}

TEST_F(SessionsTest, StartWithAnInvalidIdTouchesNothing) {
    session_error([&] { sessions.start("../escape", cwd); });
    EXPECT_TRUE(storage.records.empty());
}

TEST_F(SessionsTest, StartWithAMissingCwdIsAWorkspaceRootError) {
    try {
        sessions.start("s1", tmp.path("missing"));
        FAIL() << "a missing cwd was accepted";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), "WORKSPACE_ROOT");
    }
    EXPECT_TRUE(storage.records.empty());
}

TEST_F(SessionsTest, SetModeOnAnUnknownSessionIsAnError) {
    session_error([&] { sessions.set_mode("nobody", SandboxMode::WorkspaceWrite, "t1"); });
    EXPECT_EQ(storage.appends, 0);
}

TEST_F(SessionsTest, SetModeAppendsOneEvent) {
    sessions.start("s1", cwd);
    sessions.set_mode("s1", SandboxMode::WorkspaceWrite, "t1");
    EXPECT_EQ(storage.logs["s1"], encode_mode_event(SandboxMode::WorkspaceWrite, "t1"));
}

TEST_F(SessionsTest, ShowReturnsTheLastMode) {
    sessions.start("s1", cwd);
    sessions.set_mode("s1", SandboxMode::WorkspaceWrite, "t1");
    sessions.set_mode("s1", SandboxMode::DangerFullAccess, "t2");
    const SessionState state = sessions.show("s1");
    EXPECT_EQ(state.last_mode(), SandboxMode::DangerFullAccess);
    EXPECT_EQ(state.events.size(), 2u);
    EXPECT_EQ(state.cwd, cwd);
    EXPECT_EQ(state.id, "s1");
}

TEST_F(SessionsTest, ShowWithoutModeEventsHasNoLastMode) {
    sessions.start("s1", cwd);
    EXPECT_EQ(sessions.show("s1").last_mode(), std::nullopt);
}

TEST_F(SessionsTest, ShowSurfacesATornLogLineAsAWarning) {
    sessions.start("s1", cwd);
    sessions.set_mode("s1", SandboxMode::WorkspaceWrite, "t1");
    storage.logs["s1"] += "{\"type\":";
    const SessionState state = sessions.show("s1");
    EXPECT_EQ(state.last_mode(), SandboxMode::WorkspaceWrite);
    EXPECT_EQ(state.warnings.size(), 1u);
}

TEST_F(SessionsTest, ShowOfAnUnknownSessionIsAnError) {
    session_error([&] { sessions.show("nobody"); });
}

TEST_F(SessionsTest, EndOfAnUnknownSessionIsAnError) {
    session_error([&] { sessions.end("nobody"); });
}

TEST_F(SessionsTest, EndRemovesTheSession) {
    sessions.start("s1", cwd);
    sessions.end("s1");
    EXPECT_TRUE(storage.records.empty());
    session_error([&] { sessions.show("s1"); });
}

TEST_F(SessionsTest, TempDirOfAnUnknownSessionIsAnError) {
    session_error([&] { sessions.temp_dir("nobody"); });
}

TEST_F(SessionsTest, TempDirComesFromTheStorage) {
    sessions.start("s1", cwd);
    EXPECT_EQ(sessions.temp_dir("s1"), "/fake/tmp/s1");
}

// --- writable roots and the network -------------------------------------------------------

TEST(ParseSessionLog, NetworkEventsAreReadBesideModeEventsInOrder) {
    const std::string log = encode_mode_event(SandboxMode::WorkspaceWrite, "t1") + encode_network_event(NetworkPolicy::Deny, "t2");
    EXPECT_EQ(encode_network_event(NetworkPolicy::Deny, "t2"), "{\"type\":\"sandbox/network\",\"network\":\"deny\",\"at\":\"t2\"}\n");
    const ParsedLog parsed = parse_session_log(log, "s1");
    ASSERT_EQ(parsed.networkEvents.size(), 1u);
    EXPECT_EQ(parsed.networkEvents[0].network, NetworkPolicy::Deny);
    ASSERT_EQ(parsed.timeline.size(), 2u);
    EXPECT_EQ(parsed.timeline[0].type, "sandbox/mode");
    EXPECT_EQ(parsed.timeline[1].type, "sandbox/network");
    EXPECT_EQ(parsed.events.size(), 1u);
}

TEST(ParseSessionLog, ANetworkEventWithAnUnknownValueIsAnError) {
    session_error([] { parse_session_log("{\"type\":\"sandbox/network\",\"network\":\"maybe\"}\n", "s1"); });
}

TEST_F(SessionsTest, TheLastNetworkEventWins) {
    sessions.start("s1", cwd);
    EXPECT_EQ(sessions.show("s1").last_network(), std::nullopt);
    sessions.set_network("s1", NetworkPolicy::Deny, "t1");
    sessions.set_network("s1", NetworkPolicy::Allow, "t2");
    EXPECT_EQ(sessions.show("s1").last_network(), NetworkPolicy::Allow);
    session_error([&] { sessions.set_network("nobody", NetworkPolicy::Deny, "t1"); });
}

TEST_F(SessionsTest, WritableRootsAreRecordedCanonicalAndImmutable) {
    const std::string a = tmp.dir("a"), b = tmp.dir("b");
    ASSERT_TRUE(sessions.start("s1", cwd, {b, a, a + "/."}));
    EXPECT_EQ(sessions.show("s1").writableRoots, (std::vector<std::string>{a, b}));
    EXPECT_FALSE(sessions.start("s1", cwd, {a, b}));
    EXPECT_TRUE(contains(session_error([&] { sessions.start("s1", cwd, {a}); }), "immutable"));
    EXPECT_TRUE(contains(session_error([&] { sessions.start("s1", cwd); }), "immutable"));
    EXPECT_EQ(sessions.show("s1").writableRoots, (std::vector<std::string>{a, b}));
}

TEST_F(SessionsTest, AMissingWritableRootIsAWorkspaceRootErrorAndRecordsNothing) {
    try {
        sessions.start("s1", cwd, {tmp.path("missing")});
        FAIL() << "a missing writable root was accepted";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), "WORKSPACE_ROOT");
    }
    EXPECT_TRUE(storage.records.empty());
}

}  // namespace
}  // namespace dsh
