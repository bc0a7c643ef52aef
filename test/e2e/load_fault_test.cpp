// Load and faults. Load: 1,000 confined calls from 16 concurrent callers sharing one probe
// cache and state directory, with differing modes, roots and sessions: every plan is right for
// its own policy, no call sees another's writes or session, and nothing is left behind. Faults:
// a probe cache or state directory that is corrupted, truncated, unwritable or a planted
// symlink, a full disk under the session log, a runner killed mid-probe. dsh-confine still
// confines correctly, never runs a command unconfined, and never loses an event it reported.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "harness.hpp"

namespace {

using e2e::exists;
using nlohmann::json;
namespace fs = std::filesystem;

std::size_t lines_of(const std::string& path) {
    const std::string text = e2e::read_file(path);
    return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

TEST(Load, ThousandCallsFromSixteenCallersStayApart) {
    constexpr int kCallers = 16;
    constexpr int kCallsEach = 63;  // 1,008 calls
    e2e::TempDir home("/var/tmp");
    e2e::RunOptions shared;
    shared.env = e2e::isolated_env(home.path());
    // The Landlock runner's per-call temp areas: each call says which was its own, so calls of
    // other tests running at the same time do not count.
    const std::string temp_prefix = "/tmp/dsh-confine-" + std::to_string(getuid()) + "/call-";
    std::mutex temp_lock;
    std::vector<std::string> temp_dirs;
    std::atomic<std::size_t> temp_calls{0};  // the calls that must have made one

    std::vector<std::unique_ptr<e2e::TempDir>> roots;
    for (int c = 0; c < kCallers; ++c) roots.push_back(std::make_unique<e2e::TempDir>("/var/tmp"));
    // Every other caller works through a session of its own.
    for (int c = 0; c < kCallers; c += 2)
        ASSERT_EQ(e2e::run({"session", "start", "load" + std::to_string(c), "--cwd", roots[c]->path()}, shared).status, 0);

    std::mutex failures_lock;
    std::vector<std::string> failures;
    auto fail = [&](const std::string& what) {
        std::lock_guard<std::mutex> lock(failures_lock);
        failures.push_back(what);
    };
    // How a call that should have worked ended: enough to tell a hang from an error.
    auto ended = [](const e2e::Result& r) {
        return "status " + std::to_string(r.status) + (r.timedOut ? " (timed out)" : "") + ", stdout '" +
               r.out.substr(0, 200) + "', stderr '" + r.err + "'";
    };
    std::atomic<int> calls{0};
    std::vector<std::thread> callers;
    for (int c = 0; c < kCallers; ++c) {
        callers.emplace_back([&, c] {
            const std::string root = roots[c]->path();
            const std::string session = "load" + std::to_string(c);
            const bool with_session = c % 2 == 0;
            const std::string backend = c % 4 < 2 ? "bwrap" : "landlock";
            for (int i = 0; i < kCallsEach; ++i) {
                const std::string mode = (i + c) % 3 == 0 ? "read-only" : "workspace-write";
                std::vector<std::string> args;
                if (with_session) {
                    // The session's own log decides the mode of this call.
                    const e2e::Result logged = e2e::run({"session", "mode", session, mode}, shared);
                    if (logged.status != 0) fail(session + ": session mode failed: " + ended(logged));
                    args = {"--session", session, "--backend", backend};
                } else {
                    args = {"--mode", mode, "--workspace-root", root, "--backend", backend};
                }
                e2e::RunOptions options = shared;
                options.cwd = root;
                ++calls;
                if (i % 3 != 2) {
                    std::vector<std::string> print = args;
                    print.insert(print.begin(), "--print");
                    print.insert(print.end(), {"--", "true"});
                    const e2e::Result r = e2e::run(print, options);
                    const json plan = json::parse(r.out, nullptr, false);
                    if (r.status != 0 || !plan.is_object()) {
                        fail(session + ": print failed: " + ended(r));
                        continue;
                    }
                    if (plan["policy"]["mode"] != mode || plan["policy"]["workspaceRoot"] != root || plan["backend"] != backend)
                        fail(session + ": a plan for another policy: " + plan["policy"].dump());
                    const auto writable = plan["writableRoots"].get<std::vector<std::string>>();
                    const bool lists_root = std::find(writable.begin(), writable.end(), root) != writable.end();
                    if (lists_root != (mode == "workspace-write")) fail(session + ": writableRoots wrong for " + mode);
                    for (const auto& other : roots)
                        if (other->path() != root && std::find(writable.begin(), writable.end(), other->path()) != writable.end())
                            fail(session + ": another caller's root is writable");
                } else {
                    const std::string mine = root + "/call-" + std::to_string(i);
                    const std::string theirs = roots[(c + 1) % kCallers]->path() + "/from-" + std::to_string(c);
                    std::vector<std::string> exec = args;
                    exec.insert(exec.end(), {"--", "/bin/sh", "-c", "echo x > \"$1\"; echo y > \"$2\"; echo \"$TMPDIR\"; exit 0",
                                             "sh", mine, theirs});
                    const e2e::Result r = e2e::run(exec, options);
                    if (r.status != 0) fail(session + ": exec failed: " + ended(r));
                    if (backend == "landlock" && !with_session && mode == "workspace-write") ++temp_calls;
                    const std::string temp = e2e::first_line(r.out);
                    if (temp.rfind(temp_prefix, 0) == 0) {
                        std::lock_guard<std::mutex> lock(temp_lock);
                        temp_dirs.push_back(temp);
                    }
                    if (exists(mine) != (mode == "workspace-write")) fail(session + ": own write wrong for " + mode);
                    if (exists(theirs)) fail(session + ": wrote into another caller's root");
                }
            }
        });
    }
    for (auto& t : callers) t.join();
    EXPECT_GE(calls.load(), 1000);
    for (const auto& f : failures) ADD_FAILURE() << f;

    // Each session's log holds exactly its own events, whole.
    for (int c = 0; c < kCallers; c += 2) {
        const std::string log = home / ("state/dsh-confine/sessions/load" + std::to_string(c) + "/events.log");
        EXPECT_EQ(lines_of(log), static_cast<std::size_t>(kCallsEach)) << log;
        const e2e::Result show = e2e::run({"session", "show", "load" + std::to_string(c)}, shared);
        EXPECT_EQ(show.status, 0) << show.err;
    }
    // No leaked temp areas: the next Landlock call in workspace-write removes every area whose
    // owner has ended (no process stays behind to do it).
    EXPECT_GT(temp_calls.load(), 0u);
    EXPECT_EQ(temp_dirs.size(), temp_calls.load()) << "a Landlock call in workspace-write without a per-call temp area";
    e2e::RunOptions last = shared;
    last.cwd = roots[0]->path();
    const e2e::Result next = e2e::run({"--mode", "workspace-write", "--workspace-root", roots[0]->path(), "--backend",
                                       "landlock", "--", "true"}, last);
    EXPECT_EQ(next.status, 0) << next.err;
    auto leaked = [&] { return std::count_if(temp_dirs.begin(), temp_dirs.end(), [](const std::string& d) { return exists(d); }); };
    EXPECT_EQ(leaked(), 0) << "of " << temp_dirs.size() << " per-call temp areas";
    // No process of the load outlives it.
    EXPECT_NE(e2e::run_program({"/usr/bin/pgrep", "-f", "landlock-exec --mode .* --workspace-root " + home.path()}).status, 0);
}

// --- faults -------------------------------------------------------------------------------

class Faults : public ::testing::Test {
protected:
    void SetUp() override {
        options.env = e2e::isolated_env(home.path());
        options.cwd = ws.path();
        // A chain of two, so the probe cache is consulted.
        mkdir((home / "config").c_str(), 0700);
        mkdir((home / "config/dsh-confine").c_str(), 0700);
        e2e::write_file(home / "config/dsh-confine/config.toml", "[provider]\nbackends = [\"bwrap\", \"landlock\"]\n");
    }
    e2e::Result confined_touch(const std::string& target) {
        return e2e::run({"--mode", "workspace-write", "--workspace-root", ws.path(), "--", "/usr/bin/touch", target}, options);
    }
    // The confinement still holds: inside allowed, outside denied.
    void expect_still_confined() {
        const e2e::Result inside = confined_touch(ws / "inside");
        EXPECT_EQ(inside.status, 0) << inside.err;
        EXPECT_TRUE(exists(ws / "inside"));
        const e2e::Result outside = confined_touch(elsewhere / "outside");
        EXPECT_NE(outside.status, 0);
        EXPECT_FALSE(exists(elsewhere / "outside")) << "ran unconfined";
    }
    std::string cache_dir() { return home / "cache/dsh-confine"; }
    std::vector<std::string> cache_files() {
        std::vector<std::string> out;
        std::error_code ec;
        for (const auto& entry : fs::directory_iterator(cache_dir(), ec)) out.push_back(entry.path().string());
        return out;
    }
    e2e::TempDir home;
    e2e::TempDir ws{"/var/tmp"};
    e2e::TempDir elsewhere{"/var/tmp"};
    e2e::RunOptions options;
};

TEST_F(Faults, CorruptedProbeCacheIsIgnoredAndRebuilt) {
    expect_still_confined();
    ASSERT_FALSE(cache_files().empty());
    for (const auto& file : cache_files()) e2e::write_file(file, "\x01garbage{{{");
    expect_still_confined();
    for (const auto& file : cache_files()) EXPECT_TRUE(json::accept(e2e::read_file(file))) << file << " was not rebuilt";
}

TEST_F(Faults, TruncatedProbeCacheIsIgnoredAndRebuilt) {
    expect_still_confined();
    for (const auto& file : cache_files()) truncate(file.c_str(), 0);
    expect_still_confined();
    for (const auto& file : cache_files()) EXPECT_TRUE(json::accept(e2e::read_file(file))) << file;
}

TEST_F(Faults, PlantedCacheEntryClaimingAFailingRunnerUsableStillFailsClosed) {
    // A runner that refuses, as bubblewrap does without user namespaces.
    const std::string fake = elsewhere / "bwrap";
    e2e::write_file(fake, "#!/bin/sh\necho 'bwrap: Creating new namespace failed: Operation not permitted' >&2\nexit 1\n");
    chmod(fake.c_str(), 0755);
    e2e::write_file(home / "config/dsh-confine/config.toml",
                    "[provider]\nbackends = [\"bwrap\", \"landlock\"]\n[backend.bwrap]\npath = \"" + fake + "\"\n");
    expect_still_confined();  // probed: bwrap refuses, Landlock confines
    // The cache entry is then altered to claim bwrap works: the provider picks it, and the
    // runner's refusal is the fail-closed end, never an unconfined run.
    bool planted = false;
    for (const auto& file : cache_files()) {
        json entry = json::parse(e2e::read_file(file), nullptr, false);
        if (!entry.is_object() || file.find("/bwrap-") == std::string::npos) continue;
        entry["usable"] = true;
        e2e::write_file(file, entry.dump());
        planted = true;
    }
    ASSERT_TRUE(planted);
    const e2e::Result r = confined_touch(ws / "sentinel");
    EXPECT_EQ(r.status, 1);
    EXPECT_FALSE(exists(ws / "sentinel")) << "the command ran";
    EXPECT_NE(r.err.find("bwrap: Creating new namespace failed"), std::string::npos) << r.err;
}

TEST_F(Faults, UnwritableProbeCacheIsIgnored) {
    fs::create_directories(home / "cache");
    e2e::write_file(cache_dir(), "a file where the cache directory should be");
    expect_still_confined();
    const e2e::Result debug = e2e::run({"-vv", "--print", "--mode", "read-only", "--", "true"}, options);
    EXPECT_EQ(debug.status, 0) << debug.err;
    EXPECT_NE(debug.err.find("probe cache"), std::string::npos) << "no debug line: " << debug.err;
}

TEST_F(Faults, ProbeCacheReplacedBySymlinkIsNotFollowed) {
    expect_still_confined();
    const std::string target = elsewhere / "target.json";
    e2e::write_file(target, "{\"identity\":\"x\",\"usable\":true,\"reason\":\"\"}\n");
    for (const auto& file : cache_files()) {
        fs::remove(file);
        fs::create_symlink(target, file);
    }
    expect_still_confined();
    EXPECT_EQ(e2e::read_file(target), "{\"identity\":\"x\",\"usable\":true,\"reason\":\"\"}\n") << "written through the symlink";
}

TEST_F(Faults, RunnerKilledMidProbeCountsAsUnusable) {
    const std::string fake = elsewhere / "bwrap";
    e2e::write_file(fake, "#!/bin/sh\nkill -KILL $$\n");
    chmod(fake.c_str(), 0755);
    e2e::write_file(home / "config/dsh-confine/config.toml",
                    "[provider]\nbackends = [\"bwrap\", \"landlock\"]\n[backend.bwrap]\npath = \"" + fake + "\"\n");
    const e2e::Result plan = e2e::run({"--print", "--mode", "workspace-write", "--", "true"}, options);
    ASSERT_EQ(plan.status, 0) << plan.err;
    EXPECT_EQ(json::parse(plan.out)["backend"], "landlock");
    expect_still_confined();
}

TEST_F(Faults, CorruptedSessionRecordIsAnErrorAndNothingRuns) {
    ASSERT_EQ(e2e::run({"session", "start", "s", "--cwd", ws.path()}, options).status, 0);
    e2e::write_file(home / "state/dsh-confine/sessions/s/session.json", "not json");
    const e2e::Result r =
        e2e::run({"--session", "s", "--mode", "workspace-write", "--", "/usr/bin/touch", ws / "sentinel"}, options);
    EXPECT_EQ(r.status, 125);
    EXPECT_EQ(r.err.rfind("dsh-confine: error: SESSION: ", 0), 0u) << r.err;
    EXPECT_FALSE(exists(ws / "sentinel"));
}

TEST_F(Faults, UnwritableStateDirectoryIsAnErrorAndLosesNothing) {
    ASSERT_EQ(e2e::run({"session", "start", "s", "--cwd", ws.path()}, options).status, 0);
    ASSERT_EQ(e2e::run({"session", "mode", "s", "workspace-write"}, options).status, 0);
    const std::string log = home / "state/dsh-confine/sessions/s/events.log";
    const std::string before = e2e::read_file(log);
    // Group-writable: not a state directory to trust.
    chmod((home / "state/dsh-confine/sessions/s").c_str(), 0770);
    const e2e::Result r = e2e::run({"session", "mode", "s", "read-only"}, options);
    EXPECT_EQ(r.status, 125);
    EXPECT_EQ(r.err.rfind("dsh-confine: error: STATE: ", 0), 0u) << r.err;
    chmod((home / "state/dsh-confine/sessions/s").c_str(), 0700);
    EXPECT_EQ(e2e::read_file(log), before);
}

TEST_F(Faults, StateDirectoryReplacedBySymlinkIsRefused) {
    ASSERT_EQ(e2e::run({"session", "start", "s", "--cwd", ws.path()}, options).status, 0);
    const std::string sessions = home / "state/dsh-confine/sessions";
    fs::rename(sessions, elsewhere / "sessions");
    fs::create_symlink(elsewhere / "sessions", sessions);
    const e2e::Result r =
        e2e::run({"--session", "s", "--mode", "workspace-write", "--", "/usr/bin/touch", ws / "sentinel"}, options);
    EXPECT_EQ(r.status, 125);
    EXPECT_FALSE(exists(ws / "sentinel"));
}

TEST_F(Faults, DiskFullWhileAppendingLosesNoReportedEvent) {
    E2E_REQUIRE(getuid() == 0, "mounting a small tmpfs needs root");
    E2E_REQUIRE(e2e::run_program({"/usr/bin/unshare", "-m", "/bin/true"}).status == 0, "no mount namespaces here");
    // In a private mount namespace: a 64 KiB tmpfs as the state directory, then filled up.
    const std::string state = elsewhere / "state";
    mkdir(state.c_str(), 0700);
    const std::string script =
        "set -u; mount -t tmpfs -o size=64k,mode=0700 tmpfs \"$1\" || exit 90; "
        "\"$2\" session start s --cwd \"$3\" || exit 91; "
        "\"$2\" session mode s workspace-write || exit 92; "
        "dd if=/dev/zero of=\"$1/filler\" bs=4k 2>/dev/null; "
        "i=0; while \"$2\" session mode s read-only 2>>\"$4\"; do i=$((i+1)); [ $i -gt 1000 ] && exit 93; done; "
        "echo \"reported=$((i+1))\"; "
        "cp \"$1/sessions/s/events.log\" \"$5\"; \"$2\" session show s > \"$6\" || exit 94";
    const std::string log_copy = elsewhere / "events.copy", show = elsewhere / "show.json", errors = elsewhere / "errors";
    e2e::RunOptions o = options;
    o.env["DSH_CONFINE_STATE_DIR"] = state;
    const e2e::Result r = e2e::run_program({"/usr/bin/unshare", "-m", "/bin/sh", "-c", script, "sh", state, e2e::binary(),
                                            ws.path(), errors, log_copy, show}, o);
    ASSERT_EQ(r.status, 0) << r.out << r.err << e2e::read_file(errors);
    const std::size_t reported = std::stoul(r.out.substr(r.out.find('=') + 1));
    EXPECT_NE(e2e::read_file(errors).find("dsh-confine: error: STATE: "), std::string::npos) << e2e::read_file(errors);
    // Every line whole, every reported event present, the failed one absent.
    const std::string text = e2e::read_file(log_copy);
    EXPECT_EQ(lines_of(log_copy), reported);
    EXPECT_TRUE(text.empty() || text.back() == '\n') << "a partial event was left behind";
    const json shown = json::parse(e2e::read_file(show), nullptr, false);
    ASSERT_TRUE(shown.is_object()) << e2e::read_file(show);
    EXPECT_EQ(shown["events"].size(), reported);
}

}  // namespace
