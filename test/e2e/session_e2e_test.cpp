// Sessions through the built binary: the start/mode/show/end lifecycle, the immutable cwd,
// how a session feeds policy resolution, the on-disk modes, a hostile state directory
// (planted symlinks), a torn or damaged event log, and concurrent appenders.
#include <algorithm>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "harness.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using e2e::IsError;

json parse(const std::string& text) { return json::parse(text, nullptr, false); }

bool contains(const std::string& haystack, const std::string& needle) { return haystack.find(needle) != std::string::npos; }

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
}

using e2e::backend_usable;

unsigned permission_bits(const std::string& path) {
    struct stat st {};
    if (lstat(path.c_str(), &st) != 0) return 0xffff;
    return st.st_mode & 07777;
}

class Session : public ::testing::Test {
protected:
    e2e::TempDir home;
    e2e::TempDir scratch;
    std::string state = home / "st";
    std::string ws;

    void SetUp() override {
        ws = scratch / "ws";
        fs::create_directories(ws);
    }

    e2e::RunOptions options() const {
        e2e::RunOptions o;
        o.env = e2e::isolated_env(home.path());
        o.env["DSH_CONFINE_STATE_DIR"] = state;
        return o;
    }
    e2e::Result dsh(const std::vector<std::string>& args) const { return e2e::run(args, options()); }

    std::string session_dir(const std::string& id) const { return state + "/sessions/" + id; }
    std::string log_of(const std::string& id) const { return session_dir(id) + "/events.log"; }

    void start(const std::string& id) const {
        const e2e::Result r = dsh({"session", "start", id, "--cwd", ws});
        ASSERT_EQ(r.status, 0) << r.err;
    }
    void set_mode(const std::string& id, const std::string& mode) const {
        const e2e::Result r = dsh({"session", "mode", id, mode});
        ASSERT_EQ(r.status, 0) << r.err;
    }
    json show(const std::string& id) const {
        const e2e::Result r = dsh({"session", "show", id});
        EXPECT_EQ(r.status, 0) << r.err;
        return parse(r.out);
    }
    void append_raw(const std::string& id, const std::string& bytes) const {
        e2e::write_file(log_of(id), e2e::read_file(log_of(id)) + bytes);
    }
};

// --- lifecycle --------------------------------------------------------------------------

TEST_F(Session, StartShowModeShowEnd) {
    start("s1");
    const json fresh = show("s1");
    EXPECT_EQ(fresh["sessionId"], "s1");
    EXPECT_EQ(fresh["cwd"], fs::canonical(ws).string());
    EXPECT_TRUE(fresh["mode"].is_null());
    EXPECT_EQ(fresh["events"], json::array());

    set_mode("s1", "workspace-write");
    const json after = show("s1");
    EXPECT_EQ(after["mode"], "workspace-write");
    ASSERT_EQ(after["events"].size(), 1u);
    EXPECT_EQ(after["events"][0]["type"], "sandbox/mode");
    EXPECT_EQ(after["events"][0]["mode"], "workspace-write");
    EXPECT_TRUE(after["events"][0]["at"].is_string());

    const e2e::Result ended = dsh({"session", "end", "s1"});
    EXPECT_EQ(ended.status, 0) << ended.err;
    EXPECT_EQ(ended.out, "");
    EXPECT_TRUE(IsError(dsh({"session", "show", "s1"}), "SESSION"));
}

TEST_F(Session, StateLivesUnderXdgStateHomeWithoutStateDirVariable) {
    e2e::RunOptions o = options();
    o.env.erase("DSH_CONFINE_STATE_DIR");
    const e2e::Result r = e2e::run({"session", "start", "s1", "--cwd", ws}, o);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_TRUE(e2e::exists(home / "state/dsh-confine/sessions/s1/session.json"));
    EXPECT_FALSE(e2e::exists(state));
}

TEST_F(Session, StartRecordsTheCanonicalCwd) {
    fs::create_directory_symlink(ws, scratch / "link");
    const e2e::Result r = dsh({"session", "start", "s1", "--cwd", scratch / "link"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(show("s1")["cwd"], fs::canonical(ws).string());
}

TEST_F(Session, StartAgainWithTheSameCwdIsANoOp) {
    start("s1");
    set_mode("s1", "workspace-write");
    const e2e::Result again = dsh({"session", "start", "s1", "--cwd", ws});
    EXPECT_EQ(again.status, 0) << again.err;
    EXPECT_EQ(again.out, "");
    const json s = show("s1");
    EXPECT_EQ(s["cwd"], fs::canonical(ws).string());
    EXPECT_EQ(s["events"].size(), 1u);  // nothing was reset
}

TEST_F(Session, StartAgainWithAnotherCwdFails) {
    start("s1");
    const std::string other = scratch / "other";
    fs::create_directories(other);
    EXPECT_TRUE(IsError(dsh({"session", "start", "s1", "--cwd", other}), "SESSION"));
    EXPECT_EQ(show("s1")["cwd"], fs::canonical(ws).string());
}

TEST_F(Session, ModeOnUnknownSessionFails) {
    EXPECT_TRUE(IsError(dsh({"session", "mode", "nope", "read-only"}), "SESSION"));
    EXPECT_FALSE(e2e::exists(session_dir("nope")));
}

TEST_F(Session, UnknownModeIsUsageError) {
    start("s1");
    EXPECT_TRUE(IsError(dsh({"session", "mode", "s1", "bogus"}), "USAGE"));
    EXPECT_EQ(show("s1")["events"].size(), 0u);
}

TEST_F(Session, ShowUnknownSessionFails) { EXPECT_TRUE(IsError(dsh({"session", "show", "nope"}), "SESSION")); }

TEST_F(Session, EndUnknownSessionFails) { EXPECT_TRUE(IsError(dsh({"session", "end", "nope"}), "SESSION")); }

// Invalid IDs, for every action.
struct IdCase {
    const char* name;
    std::string id;
};

class InvalidId : public Session, public ::testing::WithParamInterface<std::tuple<const char*, IdCase>> {
protected:
    std::vector<std::string> command() const {
        const std::string action = std::get<0>(GetParam());
        const std::string& id = std::get<1>(GetParam()).id;
        if (action == "start") return {"session", "start", id, "--cwd", ws};
        if (action == "mode") return {"session", "mode", id, "read-only"};
        return {"session", action, id};
    }
};

TEST_P(InvalidId, IsRefused) {
    start("victim");  // a real session a traversing ID could reach
    const std::string before = e2e::host_snapshot(state);
    EXPECT_TRUE(IsError(dsh(command()), "SESSION"));
    EXPECT_EQ(e2e::host_snapshot(state), before);
}

const IdCase kInvalidIds[] = {
    {"DotDotSlash", "../victim"}, {"DotDot", ".."},   {"Dot", "."},      {"Slash", "sessions/victim"},
    {"Empty", ""},                {"Space", "a b"},   {"TooLong", std::string(129, 'a')},
};

std::string invalid_id_name(const ::testing::TestParamInfo<std::tuple<const char*, IdCase>>& param) {
    std::string action = std::get<0>(param.param);
    action[0] = static_cast<char>(action[0] - 'a' + 'A');
    return action + std::get<1>(param.param).name;
}

INSTANTIATE_TEST_SUITE_P(Ids, InvalidId,
                         ::testing::Combine(::testing::Values("start", "mode", "show", "end"),
                                            ::testing::ValuesIn(kInvalidIds)),
                         invalid_id_name);

TEST_F(Session, LongestValidIdIsAccepted) {
    const std::string id = "a." + std::string(124, 'b') + "_-";
    ASSERT_EQ(id.size(), 128u);
    start(id);
    EXPECT_EQ(show(id)["sessionId"], id);
}

// --- sessions in policy resolution ------------------------------------------------------

TEST_F(Session, SessionCwdIsTheWorkspaceRoot) {
    start("s1");
    const e2e::Result r = dsh({"policy", "--session", "s1"});
    ASSERT_EQ(r.status, 0) << r.err;
    const json p = parse(r.out);
    EXPECT_EQ(p["workspaceRoot"], fs::canonical(ws).string());
    EXPECT_EQ(p["sessionId"], "s1");
}

TEST_F(Session, SessionsLastModeIsTheMode) {
    start("s1");
    set_mode("s1", "workspace-write");
    set_mode("s1", "danger-full-access");
    set_mode("s1", "workspace-write");
    const e2e::Result r = dsh({"policy", "--session", "s1"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(parse(r.out)["mode"], "workspace-write");
}

TEST_F(Session, SessionModeBeatsConfigDefaultMode) {
    start("s1");
    set_mode("s1", "read-only");
    e2e::write_file(scratch / "config.toml", "[sandbox]\ndefault_mode = \"danger-full-access\"\n");
    const e2e::Result r = dsh({"policy", "--session", "s1", "--config", scratch / "config.toml"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(parse(r.out)["mode"], "read-only");
}

TEST_F(Session, ModeOptionBeatsTheSessionsMode) {
    start("s1");
    set_mode("s1", "workspace-write");
    const e2e::Result r = dsh({"policy", "--session", "s1", "--mode", "read-only"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(parse(r.out)["mode"], "read-only");
}

// --- on disk ----------------------------------------------------------------------------

TEST_F(Session, FilesArePrivate) {
    start("s1");
    set_mode("s1", "read-only");
    EXPECT_EQ(permission_bits(session_dir("s1") + "/session.json"), 0600u);
    EXPECT_EQ(permission_bits(log_of("s1")), 0600u);
}

TEST_F(Session, DirectoriesArePrivate) {
    start("s1");
    EXPECT_EQ(permission_bits(state), 0700u);
    EXPECT_EQ(permission_bits(state + "/sessions"), 0700u);
    EXPECT_EQ(permission_bits(session_dir("s1")), 0700u);
}

TEST_F(Session, EndRemovesTheSessionAndItsTempArea) {
    E2E_REQUIRE(backend_usable("bwrap") || backend_usable("landlock"), "no usable backend on this host");
    start("s1");
    const e2e::Result run = dsh({"--session", "s1", "--mode", "workspace-write", "--", "true"});
    ASSERT_EQ(run.status, 0) << run.err;
    ASSERT_TRUE(e2e::exists(session_dir("s1") + "/tmp"));
    EXPECT_EQ(permission_bits(session_dir("s1") + "/tmp"), 0700u);
    const e2e::Result ended = dsh({"session", "end", "s1"});
    EXPECT_EQ(ended.status, 0) << ended.err;
    EXPECT_FALSE(e2e::exists(session_dir("s1")));
    EXPECT_TRUE(e2e::exists(state + "/sessions"));  // only what the session owned went
}

// --- a hostile state directory ----------------------------------------------------------

// <state>/sessions/S planted as a symlink to a directory elsewhere.
class PlantedSessionDir : public Session, public ::testing::WithParamInterface<const char*> {
protected:
    std::string elsewhere = scratch / "elsewhere";
    void SetUp() override {
        Session::SetUp();
        start("other");  // makes <state>/sessions
        fs::create_directories(elsewhere);
        fs::create_directory_symlink(elsewhere, session_dir("S"));
    }
    std::vector<std::string> command() const {
        const std::string action = GetParam();
        if (action == "start") return {"session", "start", "S", "--cwd", ws};
        if (action == "mode") return {"session", "mode", "S", "workspace-write"};
        if (action == "show") return {"session", "show", "S"};
        if (action == "end") return {"session", "end", "S"};
        if (action == "policy") return {"policy", "--session", "S"};
        return {"--session", "S", "--mode", "workspace-write", "--", "touch", ws + "/sentinel"};
    }
};

TEST_P(PlantedSessionDir, IsRefusedAndNothingIsWrittenThroughIt) {
    const std::string before = e2e::host_snapshot(elsewhere);
    EXPECT_TRUE(IsError(dsh(command()), "STATE"));
    EXPECT_EQ(e2e::host_snapshot(elsewhere), before);
    EXPECT_TRUE(fs::is_symlink(session_dir("S")));  // not followed, not removed
    EXPECT_FALSE(e2e::exists(ws + "/sentinel"));
}

INSTANTIATE_TEST_SUITE_P(Commands, PlantedSessionDir,
                         ::testing::Values("start", "mode", "show", "end", "policy", "exec"));

TEST_F(Session, PlantedEventLogSymlinkIsRefusedAndItsTargetUnchanged) {
    start("s1");
    const std::string target = scratch / "target";
    e2e::write_file(target, "not a log\n");
    fs::create_symlink(target, log_of("s1"));
    const std::string before = e2e::host_snapshot(target);
    EXPECT_TRUE(IsError(dsh({"session", "mode", "s1", "workspace-write"}), "STATE"));
    EXPECT_EQ(e2e::host_snapshot(target), before);
}

// --- a torn or damaged log --------------------------------------------------------------

constexpr const char* kTorn = "{\"type\":\"sandbox/mode\",\"mo";

TEST_F(Session, TornLastLineIsSkippedWithAWarning) {
    start("s1");
    set_mode("s1", "workspace-write");
    append_raw("s1", kTorn);
    const e2e::Result r = dsh({"session", "show", "s1"});
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_TRUE(contains(r.err, "torn")) << r.err;
    EXPECT_EQ(r.err.rfind("dsh-confine: warn", 0), 0u) << r.err;
    const json s = parse(r.out);
    ASSERT_TRUE(s.is_object()) << r.out;
    ASSERT_EQ(s["events"].size(), 1u);
    EXPECT_EQ(s["mode"], "workspace-write");
}

// StateDirStorage::append_log opens events.log O_WRONLY, so its pread() of the last byte fails
// (EBADF) and the torn fragment is never dropped: the new event is glued onto it and the log
// is damaged from then on. Found bug, see the report.
TEST_F(Session, ModeAfterATornLastLineAppendsACleanEvent) {
    start("s1");
    set_mode("s1", "workspace-write");
    append_raw("s1", kTorn);
    set_mode("s1", "read-only");
    const e2e::Result r = dsh({"session", "show", "s1"});
    ASSERT_EQ(r.status, 0) << r.err;
    const json s = parse(r.out);
    ASSERT_EQ(s["events"].size(), 2u) << r.out;
    EXPECT_EQ(s["events"][1]["mode"], "read-only");
    EXPECT_EQ(s["mode"], "read-only");
    for (const auto& line : lines_of(e2e::read_file(log_of("s1")))) EXPECT_TRUE(parse(line).is_object()) << line;
}

TEST_F(Session, DamagedMiddleLineFailsShow) {
    start("s1");
    set_mode("s1", "read-only");
    append_raw("s1", "{\"type\":\"sandbox/mo\n");
    set_mode("s1", "read-only");
    const e2e::Result r = dsh({"session", "show", "s1"});
    EXPECT_TRUE(IsError(r, "SESSION"));
    EXPECT_TRUE(contains(r.err, "line 2")) << r.err;
}

TEST_F(Session, DamagedMiddleLineRefusesAConfinedCall) {
    start("s1");
    set_mode("s1", "read-only");
    append_raw("s1", "garbage\n");
    set_mode("s1", "danger-full-access");
    const e2e::Result r = dsh({"--session", "s1", "--", "touch", ws + "/sentinel"});
    EXPECT_TRUE(IsError(r, "SESSION"));
    EXPECT_FALSE(e2e::exists(ws + "/sentinel"));
}

// --- concurrency ------------------------------------------------------------------------

TEST_F(Session, ConcurrentModeAppendsNeverInterleaveOrTear) {
    constexpr int kWriters = 48;
    start("s1");
    std::vector<e2e::Result> results(kWriters);
    std::vector<std::thread> writers;
    for (int i = 0; i < kWriters; ++i)
        writers.emplace_back([&, i] {
            results[static_cast<std::size_t>(i)] =
                dsh({"session", "mode", "s1", i % 2 ? "workspace-write" : "read-only"});
        });
    for (auto& writer : writers) writer.join();
    for (const auto& r : results) EXPECT_EQ(r.status, 0) << r.err;

    const std::string log = e2e::read_file(log_of("s1"));
    ASSERT_FALSE(log.empty());
    EXPECT_EQ(log.back(), '\n');
    const std::vector<std::string> lines = lines_of(log);
    ASSERT_EQ(lines.size(), static_cast<std::size_t>(kWriters));
    int writes = 0;
    for (const auto& line : lines) {
        const json event = parse(line);
        ASSERT_TRUE(event.is_object()) << line;
        EXPECT_EQ(event["type"], "sandbox/mode");
        writes += event["mode"] == "workspace-write";
    }
    EXPECT_EQ(writes, kWriters / 2);
    EXPECT_EQ(show("s1")["events"].size(), static_cast<std::size_t>(kWriters));
}

}  // namespace
