// The Seatbelt backend end to end on macOS: the real dsh-confine confines /bin/sh, and each
// test proves from the host's side that a write was really blocked (the file outside is
// untouched) or really allowed (the file is there). The nested case runs dsh-confine inside
// another sandbox, where sandbox-exec itself must fail and be attributed as a runner failure.
// Tests skip where sandbox-exec cannot work; CI sets DSH_MUST_WORK=1 to turn skips into failures.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

extern char** environ;

namespace {

namespace fs = std::filesystem;
using Argv = std::vector<std::string>;

#define E2E_REQUIRE(condition, reason)                                              \
    do {                                                                            \
        if (!(condition)) {                                                         \
            if (std::getenv("DSH_MUST_WORK")) FAIL() << "must work: " << (reason); \
            GTEST_SKIP() << (reason);                                               \
        }                                                                           \
    } while (0)

struct Result {
    int status = -1;
    std::string out, err;
};

std::string drain(int fd) {
    std::string text;
    char buffer[4096];
    ssize_t n;
    while ((n = read(fd, buffer, sizeof buffer)) > 0) text.append(buffer, static_cast<std::size_t>(n));
    close(fd);
    return text;
}

Result run(const Argv& argv) {
    Result result;
    int out[2], err[2];
    if (pipe(out) != 0 || pipe(err) != 0) return result;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_adddup2(&actions, err[1], 2);
    posix_spawn_file_actions_addclose(&actions, out[0]);
    posix_spawn_file_actions_addclose(&actions, err[0]);
    std::vector<char*> args;
    for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    close(out[1]);
    close(err[1]);
    if (rc != 0) {
        close(out[0]);
        close(err[0]);
        return result;
    }
    std::thread err_thread([&] { result.err = drain(err[0]); });
    result.out = drain(out[0]);
    err_thread.join();
    int status = 0;
    waitpid(pid, &status, 0);
    result.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return result;
}

class Scratch {
public:
    Scratch() {
        // Canonical (/private/var/...), as Seatbelt and the plan see it.
        char pattern[] = "/tmp/dsh-confine-e2e-XXXXXX";
        root_ = fs::canonical(mkdtemp(pattern));
        fs::create_directories(root_ / "ws");
        fs::create_directories(root_ / "outside");
        std::ofstream(root_ / "outside" / "victim") << "original\n";
    }
    ~Scratch() {
        std::error_code ec;
        fs::remove_all(root_, ec);
    }
    std::string ws() const { return (root_ / "ws").string(); }
    std::string outside() const { return (root_ / "outside").string(); }
    std::string root() const { return root_.string(); }

private:
    fs::path root_;
};

std::string read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

Result confined(const Scratch& s, const std::string& mode, const std::string& script) {
    return run({DSH_CONFINE_BINARY, "--mode", mode, "--workspace-root", s.ws(), "--", "/bin/sh", "-c", script});
}

class Seatbelt : public ::testing::Test {
protected:
    void SetUp() override {
        E2E_REQUIRE(access("/usr/bin/sandbox-exec", X_OK) == 0, "/usr/bin/sandbox-exec is missing");
        const Result probe = run({"/usr/bin/sandbox-exec", "-p", "(version 1)(allow default)", "/usr/bin/true"});
        E2E_REQUIRE(probe.status == 0, "sandbox-exec does not work here (already sandboxed?): " + probe.err);
    }
    Scratch s;
};

TEST_F(Seatbelt, AWriteOutsideTheWorkspaceIsDenied) {
    const Result r = confined(s, "workspace-write", "echo x > '" + s.outside() + "/new'");
    EXPECT_NE(r.status, 0);
    EXPECT_FALSE(fs::exists(s.outside() + "/new"));
    EXPECT_NE(r.err.find("Operation not permitted"), std::string::npos) << r.err;
}

TEST_F(Seatbelt, OverwriteRemoveAndRenameOutsideAreDenied) {
    const std::string victim = s.outside() + "/victim";
    confined(s, "workspace-write", "echo overwritten > '" + victim + "'");
    confined(s, "workspace-write", "rm -f '" + victim + "'");
    confined(s, "workspace-write", "mv '" + victim + "' '" + s.ws() + "/moved'");
    confined(s, "workspace-write", "chmod 600 '" + victim + "'");
    EXPECT_EQ(read(victim), "original\n");
    EXPECT_FALSE(fs::exists(s.ws() + "/moved"));
}

TEST_F(Seatbelt, AHardLinkToAFileOutsideIsRefused) {
    const Result r = confined(s, "workspace-write", "ln '" + s.outside() + "/victim' '" + s.ws() + "/link'");
    EXPECT_NE(r.status, 0);
    EXPECT_FALSE(fs::exists(s.ws() + "/link"));
}

TEST_F(Seatbelt, AWriteInsideTheWorkspaceIsAllowed) {
    const Result r = confined(s, "workspace-write",
                              "echo inside > '" + s.ws() + "/made' && mkdir '" + s.ws() + "/d' && ln '" + s.ws() + "/made' '" +
                                  s.ws() + "/d/link' && mv '" + s.ws() + "/d' '" + s.ws() + "/e'");
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(read(s.ws() + "/made"), "inside\n");
    EXPECT_TRUE(fs::exists(s.ws() + "/e/link"));
}

TEST_F(Seatbelt, TheTempAreaIsWritableThroughTmpdir) {
    const Result r = confined(s, "workspace-write", "f=$(mktemp) && echo t > \"$f\" && echo \"$f\"");
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("/dsh-confine/"), std::string::npos) << r.out;
}

TEST_F(Seatbelt, ReadOnlyDeniesTheWorkspaceToo) {
    const Result r = confined(s, "read-only", "echo x > '" + s.ws() + "/made'");
    EXPECT_NE(r.status, 0);
    EXPECT_FALSE(fs::exists(s.ws() + "/made"));
}

TEST_F(Seatbelt, DevNullAndStderrAreSinksInReadOnly) {
    const Result r = confined(s, "read-only", "echo x > /dev/null && echo e > /dev/stderr && echo ok");
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("ok"), std::string::npos);
    EXPECT_NE(r.err.find("e"), std::string::npos);
}

TEST_F(Seatbelt, TheExitCodeIsPassedThrough) { EXPECT_EQ(confined(s, "read-only", "exit 42").status, 42); }

TEST_F(Seatbelt, PathsWithQuotesSpacesAndParenthesesWork) {
    const std::string nasty = s.root() + "/ws \"q\" (p) \\b 'é'";
    fs::create_directories(nasty);
    const Result r = run({DSH_CONFINE_BINARY, "--mode", "workspace-write", "--workspace-root", nasty, "--", "/bin/sh", "-c",
                          "echo ok > \"$0/made\" && ! echo x > \"$1/no\"", nasty, s.outside()});
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_TRUE(fs::exists(nasty + "/made"));
    EXPECT_FALSE(fs::exists(s.outside() + "/no"));
}

// Inside another sandbox, sandbox-exec cannot apply a profile: `run` must say the runner
// failed (125), not blame the command, and the command must not have run.
TEST_F(Seatbelt, NestedInsideASandboxTheRunnerFailureIsAttributed) {
    const std::string marker = s.ws() + "/ran";
    const Result r = run({"/usr/bin/sandbox-exec", "-p", "(version 1)(allow default)", DSH_CONFINE_BINARY, "run",
                          "--backend", "seatbelt", "--mode", "workspace-write", "--workspace-root", s.ws(), "--", "/usr/bin/touch",
                          marker});
    EXPECT_EQ(r.status, 125) << r.err;
    EXPECT_NE(r.err.find("sandbox_apply"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("RUNNER_FAILURE"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(marker));
}

TEST_F(Seatbelt, TheNestedFailureClassifiesAsRunnerFailure) {
    const std::string text = "sandbox-exec: sandbox_apply: Operation not permitted\n";
    const std::string file = s.root() + "/stderr.txt";
    std::ofstream(file) << text;
    const Result r = run({DSH_CONFINE_BINARY, "classify", "--backend", "seatbelt", "--exit-code", "71", "--stderr", file});
    EXPECT_EQ(r.status, 0);
    EXPECT_EQ(r.out.substr(0, r.out.find('\n')), "runner-failure");
}

TEST_F(Seatbelt, ThePlanIsFullWithWritableRootsNamed) {
    const Result r = run({DSH_CONFINE_BINARY, "--print", "--mode", "workspace-write", "--workspace-root", s.ws(), "--", "true"});
    ASSERT_EQ(r.status, 0) << r.err;
    const auto plan = nlohmann::json::parse(r.out);
    EXPECT_EQ(plan["backend"], "seatbelt");
    EXPECT_EQ(plan["enforcement"], "full");
    EXPECT_EQ(plan["argv"][0], "/usr/bin/sandbox-exec");
    EXPECT_EQ(plan["writableRoots"][0], s.ws());
}

}  // namespace
