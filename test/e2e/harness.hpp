// What end-to-end tests share: spawning the built dsh-confine (optionally as an unprivileged
// user, with a pty as its controlling terminal, with input on stdin), scratch directories,
// host-side snapshots that prove an effect did or did not happen, and skips that CI turns
// into failures (DSH_MUST_WORK).
#pragma once

#include <map>
#include <optional>
#include <initializer_list>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

namespace e2e {

inline const char* binary() { return DSH_CONFINE_BINARY; }

// The parameter of the suites that cross both Linux backends with both callers: the backend
// ("bwrap", "landlock"), the caller ("root", "nobody"), and one more axis a suite may add (a
// form such as "exec" or "run", where the workspace lies), empty where it adds none.
using BackendCaller = std::tuple<std::string, std::string, std::string>;
// Every backend with every caller, crossed with each of `third`.
std::vector<BackendCaller> backends_and_callers(std::initializer_list<const char*> third = {""});
// "bwrap_root", or with a third "bwrap_root_exec".
std::string backend_caller_name(const ::testing::TestParamInfo<BackendCaller>& info);

struct RunOptions {
    std::optional<std::string> input;               // fed to stdin (else /dev/null)
    std::map<std::string, std::string> env;         // set on top of the isolated environment
    std::vector<std::string> unset;                 // removed from the environment
    std::optional<std::string> cwd;
    std::optional<unsigned> uid;                    // run as this uid/gid (via setpriv)
    bool pty = false;                               // stdin is a pty that is the controlling tty
    int timeoutMs = 60000;
    std::vector<std::string> prefix;                // e.g. {"unshare", "-U"} before the binary
};

struct Result {
    int status = -1;     // exit status, or 128+signal
    std::string out;
    std::string err;
    long maxRssKb = 0;
    int ptyPending = -1; // bytes left in the pty's input queue after the run
    bool timedOut = false;
};

// The isolated environment every test runs in: state, cache and config under `home`.
std::map<std::string, std::string> isolated_env(const std::string& home);

Result run(const std::vector<std::string>& args, const RunOptions& options = {});
Result run_program(const std::vector<std::string>& argv, const RunOptions& options = {});

// A scratch directory removed at the end; `owner` chowns it (for unprivileged callers).
class TempDir {
public:
    explicit TempDir(const std::string& parent = "/tmp", std::optional<unsigned> owner = std::nullopt);
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::string& path() const { return path_; }
    std::string operator/(const std::string& name) const { return path_ + "/" + name; }

private:
    std::string path_;
};

void write_file(const std::string& path, const std::string& content);
std::string read_file(const std::string& path);
bool exists(const std::string& path);

// Every observable fact about a tree (entries, types, modes, owners, sizes, mtimes, link
// counts, contents, xattr names), as comparable text.
std::string host_snapshot(const std::string& path);

// Whether `doctor --json` finds the backend usable here (its probe included), asked once.
bool backend_usable(const std::string& name);

// dsh-confine's own failure: the status, nothing on stdout, one `dsh-confine: error: CODE: ` line.
::testing::AssertionResult IsError(const Result& r, const std::string& code, int status = 125);

// The first line of stderr, for messages.
std::string first_line(const std::string& text);

constexpr unsigned kNobody = 65534;

// GTEST_SKIP unless DSH_MUST_WORK is set, in which case the test fails instead.
#define E2E_REQUIRE(condition, reason)                                              \
    do {                                                                            \
        if (!(condition)) {                                                         \
            if (std::getenv("DSH_MUST_WORK")) FAIL() << "must work: " << (reason); \
            GTEST_SKIP() << (reason);                                               \
        }                                                                           \
    } while (0)

}  // namespace e2e
