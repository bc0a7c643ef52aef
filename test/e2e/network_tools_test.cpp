// The `hosts` network with real tools, not mocks, under each Linux backend, as root and as
// nobody: `npm install` from the npm registry with only its host allowed, and the same with the
// host left out (a denial naming it: run's report, classify with the plan and with the backend's
// dialect); `git clone` over HTTP and `pip download` from servers on the host's loopback (git's
// dumb HTTP and a PEP 503 index the test builds, served by python3's http.server). Each verdict
// is read on the host: the files the tool wrote, and the server's access log.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness.hpp"

namespace {

namespace fs = std::filesystem;
using e2e::first_line;
using e2e::read_file;
using nlohmann::json;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// python3's http.server serving `dir` on a loopback port it picks; its access log (one line per
// request) goes to `log`.
class StaticServer {
public:
    StaticServer(const std::string& dir, const std::string& log) {
        int out[2];
        if (pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe2");
        pid_ = fork();
        if (pid_ == 0) {
            dup2(out[1], 1);
            const int err = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
            dup2(err, 2);
            execl("/usr/bin/python3", "python3", "-u", "-m", "http.server", "0", "--bind", "127.0.0.1", "--directory",
                  dir.c_str(), static_cast<char*>(nullptr));
            _exit(127);
        }
        close(out[1]);
        // "Serving HTTP on 127.0.0.1 port N (http://127.0.0.1:N/) ..."
        std::string banner;
        char c = 0;
        while (banner.find('\n') == std::string::npos && read(out[0], &c, 1) == 1) banner += c;
        close(out[0]);
        const std::size_t at = banner.find(" port ");
        if (at != std::string::npos) port_ = std::stoi(banner.substr(at + 6));
    }
    ~StaticServer() {
        if (pid_ > 0) {
            kill(pid_, SIGTERM);
            waitpid(pid_, nullptr, 0);
        }
    }
    StaticServer(const StaticServer&) = delete;
    StaticServer& operator=(const StaticServer&) = delete;

    int port() const { return port_; }
    std::string authority() const { return "127.0.0.1:" + std::to_string(port_); }

private:
    pid_t pid_ = -1;
    int port_ = 0;
};

// The lines of an http.server access log that are requests ("GET /path HTTP/1.1" 200).
int requests_in(const std::string& log) {
    int count = 0;
    for (std::size_t at = log.find("\"GET "); at != std::string::npos; at = log.find("\"GET ", at + 1)) ++count;
    return count;
}

// A one-module wheel and the PEP 503 index that lists it, under `root`/simple.
const char* kMakeIndex = R"(
import base64, hashlib, os, sys, zipfile
root = sys.argv[1]
name = "dshprobe-0.1-py3-none-any.whl"
files = {"dshprobe/__init__.py": b"probe = 1\n",
         "dshprobe-0.1.dist-info/METADATA": b"Metadata-Version: 2.1\nName: dshprobe\nVersion: 0.1\n",
         "dshprobe-0.1.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: dsh-e2e\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
record = "".join("%s,sha256=%s,%d\n" % (path, base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode(),
                                       len(data)) for path, data in files.items())
files["dshprobe-0.1.dist-info/RECORD"] = (record + "dshprobe-0.1.dist-info/RECORD,,\n").encode()
os.makedirs(os.path.join(root, "simple", "dshprobe"))
with zipfile.ZipFile(os.path.join(root, "simple", "dshprobe", name), "w") as wheel:
    for path, data in files.items():
        wheel.writestr(path, data)
with open(os.path.join(root, "simple", "dshprobe", "index.html"), "w") as page:
    page.write('<html><body><a href="%s">%s</a></body></html>\n' % (name, name))
with open(os.path.join(root, "simple", "index.html"), "w") as page:
    page.write('<html><body><a href="dshprobe/">dshprobe</a></body></html>\n')
)";

using Param = e2e::BackendCaller;  // backend, caller

class RealTools : public ::testing::TestWithParam<Param> {
protected:
    std::string backend = std::get<0>(GetParam());
    bool asRoot = std::get<1>(GetParam()) == "root";
    std::optional<unsigned> uid = asRoot ? std::nullopt : std::optional<unsigned>(e2e::kNobody);
    e2e::TempDir home{"/var/tmp", uid};
    e2e::TempDir base{"/var/tmp", uid};
    e2e::TempDir served{"/var/tmp"};  // the host-side server's files, the test's own
    std::string ws = base / "ws";

    void SetUp() override {
        E2E_REQUIRE(getuid() == 0, "the tools run as root, and as nobody through setpriv");
        mkdir(ws.c_str(), 0755);
        if (uid) {
            ASSERT_EQ(chown(ws.c_str(), *uid, *uid), 0);
        }
        const e2e::Result plan = dsh({"--print", "--backend", backend, "--allow-host", "example.org", "--", "true"});
        E2E_REQUIRE(plan.status == 0, backend + " cannot confine in the hosts network here: " + first_line(plan.err));
    }

    e2e::RunOptions options(int timeout_ms = 180000) const {
        e2e::RunOptions o;
        o.env = e2e::isolated_env(home.path());
        o.uid = uid;
        o.cwd = ws;
        o.timeoutMs = timeout_ms;
        return o;
    }
    e2e::Result dsh(const std::vector<std::string>& args, const std::map<std::string, std::string>& env = {}) const {
        e2e::RunOptions o = options();
        for (const auto& [name, value] : env) o.env[name] = value;
        return e2e::run(args, o);
    }
    // `args` (before the command) with the workspace writable and `host` allowed.
    std::vector<std::string> confined(const std::string& host, const std::vector<std::string>& command,
                                      const std::vector<std::string>& before = {}) const {
        std::vector<std::string> args = before;
        args.insert(args.end(), {"--backend", backend, "--mode", "workspace-write", "--workspace-root", ws, "--allow-host", host,
                                 "--"});
        args.insert(args.end(), command.begin(), command.end());
        return args;
    }
};

// --- npm, from the registry this machine reaches ----------------------------------------------

class Npm : public RealTools {
protected:
    void SetUp() override {
        RealTools::SetUp();
        if (HasFatalFailure() || IsSkipped()) return;
        E2E_REQUIRE(e2e::exists("/usr/bin/npm"), "no npm in /usr/bin (node and npm are on the machine; .ci/setup)");
        e2e::write_file(ws + "/package.json", R"({"name": "dsh-e2e", "version": "1.0.0", "private": true})" "\n");
        if (uid) {
            ASSERT_EQ(chown((ws + "/package.json").c_str(), *uid, *uid), 0);
        }
    }
    // npm's cache and logs in the workspace; no audit, fund or update check (other hosts).
    std::map<std::string, std::string> npm_env() const {
        return {{"npm_config_cache", ws + "/.npm-cache"}, {"npm_config_update_notifier", "false"},
                {"npm_config_audit", "false"},          {"npm_config_fund", "false"},
                {"npm_config_fetch_retries", "1"},       {"npm_config_fetch_timeout", "60000"}};
    }
    const std::vector<std::string> install = {"/usr/bin/npm", "install", "--no-save", "is-number@7.0.0"};
};

TEST_P(Npm, InstallsWithOnlyTheRegistrysHostAllowed) {
    const e2e::Result r = dsh(confined("registry.npmjs.org", install), npm_env());
    ASSERT_EQ(r.status, 0) << r.out << r.err;
    const json manifest = json::parse(read_file(ws + "/node_modules/is-number/package.json"));
    EXPECT_EQ(manifest["name"], "is-number");
    EXPECT_EQ(manifest["version"], "7.0.0");
    EXPECT_FALSE(contains(r.err, "dsh-confine: network: refused")) << r.err;
}

TEST_P(Npm, FailsWithTheHostLeftOutAndIsADenialNamingIt) {
    const std::string report = base / "report.json";
    const e2e::Result r = dsh(confined("example.org", install, {"run", "--report", report}), npm_env());
    ASSERT_NE(r.status, 0) << r.out << r.err;
    EXPECT_FALSE(e2e::exists(ws + "/node_modules/is-number")) << "npm installed without its registry";
    EXPECT_TRUE(contains(r.err, "dsh-confine: network: refused registry.npmjs.org:443, not in allow_hosts")) << r.err;
    const json parsed = json::parse(read_file(report));
    EXPECT_EQ(parsed["verdict"]["verdict"], "denial") << parsed.dump();
    EXPECT_EQ(parsed["verdict"]["host"], "registry.npmjs.org:443") << parsed.dump();
    ASSERT_FALSE(parsed["refusedHosts"].empty()) << parsed.dump();
    EXPECT_EQ(parsed["refusedHosts"][0]["host"], "registry.npmjs.org:443") << parsed.dump();
    EXPECT_GE(parsed["refusedHosts"][0]["count"].get<int>(), 1) << parsed.dump();

    // classify on the same stderr: with the call's plan, and with the backend's dialect alone.
    const std::string err_file = base / "stderr.txt", plan_file = base / "plan.json";
    e2e::write_file(err_file, r.err);
    const e2e::Result plan = dsh(confined("example.org", install, {"--print", "--format", "json"}));
    ASSERT_EQ(plan.status, 0) << plan.err;
    e2e::write_file(plan_file, plan.out);
    for (const std::vector<std::string>& rules : {std::vector<std::string>{"--plan", plan_file}, {"--backend", backend}}) {
        std::vector<std::string> args = {"classify"};
        args.insert(args.end(), rules.begin(), rules.end());
        args.insert(args.end(), {"--exit-code", std::to_string(r.status), "--stderr", err_file, "--format", "json"});
        const e2e::Result verdict = dsh(args);
        ASSERT_EQ(verdict.status, 0) << verdict.err;
        const json v = json::parse(verdict.out);
        EXPECT_EQ(v["verdict"], "denial") << rules[0] << ": " << v.dump();
        EXPECT_EQ(v["host"], "registry.npmjs.org:443") << rules[0] << ": " << v.dump();
    }
}

INSTANTIATE_TEST_SUITE_P(Linux, Npm, ::testing::ValuesIn(e2e::backends_and_callers()), e2e::backend_caller_name);

// --- git over HTTP and pip from loopback servers ------------------------------------------------

class LoopbackTools : public RealTools {};

TEST_P(LoopbackTools, GitClonesOverHttpThroughTheProxyAndNotWithoutIt) {
    E2E_REQUIRE(e2e::exists("/usr/bin/git"), "no git (.ci/setup installs it)");
    // A repository with two commits, bare, with the files git's dumb HTTP reads.
    const std::string make = "set -e; git init -q src; cd src; echo probe > file; git add file;"
                             "git -c user.email=e2e@example.org -c user.name=e2e commit -q -m one;"
                             "echo more >> file; git -c user.email=e2e@example.org -c user.name=e2e commit -q -am two;"
                             "cd ..; git clone -q --bare src repo.git; git -C repo.git update-server-info;"
                             "git -C src rev-parse HEAD";
    e2e::RunOptions host;
    host.cwd = served.path();
    host.env = e2e::isolated_env(home.path());
    const e2e::Result made = e2e::run_program({"/bin/sh", "-c", make}, host);
    ASSERT_EQ(made.status, 0) << made.err;
    const std::string head = first_line(made.out);
    const std::string log = base / "access.log";
    StaticServer server(served.path(), log);
    ASSERT_NE(server.port(), 0);
    // Loopback is in NO_PROXY (for the sandbox's own servers): a host-side one is reached through
    // the proxy only when the client is told to use it for loopback too.
    const std::string clone = "unset NO_PROXY no_proxy; git clone -q http://" + server.authority() + "/repo.git clone";

    const e2e::Result refused = dsh(confined("example.org", {"/bin/sh", "-c", clone}));
    EXPECT_NE(refused.status, 0) << refused.err;
    EXPECT_FALSE(e2e::exists(ws + "/clone/file"));
    EXPECT_EQ(requests_in(read_file(log)), 0) << read_file(log);
    EXPECT_TRUE(contains(refused.err, "dsh-confine: network: refused " + server.authority())) << refused.err;
    fs::remove_all(ws + "/clone");

    const e2e::Result cloned = dsh(confined(server.authority(), {"/bin/sh", "-c", clone}));
    ASSERT_EQ(cloned.status, 0) << cloned.err;
    EXPECT_EQ(read_file(ws + "/clone/file"), "probe\nmore\n");
    EXPECT_TRUE(contains(read_file(ws + "/clone/.git/packed-refs") + read_file(ws + "/clone/.git/refs/heads/master") +
                             read_file(ws + "/clone/.git/refs/heads/main"),
                         head))
        << "the clone's branch is not the source's HEAD " << head;
    EXPECT_GT(requests_in(read_file(log)), 0);
}

TEST_P(LoopbackTools, PipDownloadsFromALoopbackIndexThroughTheProxyAndNotWithoutIt) {
    E2E_REQUIRE(e2e::exists("/usr/lib/python3/dist-packages/pip"), "no Debian python3-pip (.ci/setup installs it)");
    e2e::RunOptions host;
    host.env = e2e::isolated_env(home.path());
    const e2e::Result made = e2e::run_program({"/usr/bin/python3", "-c", kMakeIndex, served.path()}, host);
    ASSERT_EQ(made.status, 0) << made.err;
    const std::string log = base / "access.log";
    StaticServer server(served.path(), log);
    ASSERT_NE(server.port(), 0);
    const std::string download = "unset NO_PROXY no_proxy; /usr/bin/python3 -m pip download --no-cache-dir "
                                 "--disable-pip-version-check --no-deps --retries 0 --timeout 60 --index-url http://" +
                                 server.authority() + "/simple -d dl dshprobe";
    const std::string wheel = "/dl/dshprobe-0.1-py3-none-any.whl";

    const e2e::Result refused = dsh(confined("example.org", {"/bin/sh", "-c", download}));
    EXPECT_NE(refused.status, 0) << refused.err;
    EXPECT_FALSE(e2e::exists(ws + wheel));
    EXPECT_EQ(requests_in(read_file(log)), 0) << read_file(log);
    EXPECT_TRUE(contains(refused.err, "dsh-confine: network: refused " + server.authority())) << refused.err;

    const e2e::Result downloaded = dsh(confined(server.authority(), {"/bin/sh", "-c", download}));
    ASSERT_EQ(downloaded.status, 0) << downloaded.out << downloaded.err;
    EXPECT_EQ(read_file(ws + wheel), read_file(served / ("simple/dshprobe" + wheel.substr(3))));
    EXPECT_GT(requests_in(read_file(log)), 0);
}

INSTANTIATE_TEST_SUITE_P(Linux, LoopbackTools, ::testing::ValuesIn(e2e::backends_and_callers()), e2e::backend_caller_name);

}  // namespace
