#include "harness.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

extern char** environ;

namespace e2e {
namespace fs = std::filesystem;

std::map<std::string, std::string> isolated_env(const std::string& home) {
    return {{"HOME", home},
            {"XDG_STATE_HOME", home + "/state"},
            {"XDG_CACHE_HOME", home + "/cache"},
            {"XDG_CONFIG_HOME", home + "/config"},
            {"PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"},
            {"LANG", "C.UTF-8"}};
}

Result run(const std::vector<std::string>& args, const RunOptions& options) {
    std::vector<std::string> argv = {binary()};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_program(argv, options);
}

namespace {

void drain(int fd, std::string& into) {
    char buffer[65536];
    const ssize_t n = read(fd, buffer, sizeof buffer);
    if (n > 0) into.append(buffer, static_cast<std::size_t>(n));
}

}  // namespace

Result run_program(const std::vector<std::string>& argv_in, const RunOptions& options) {
    std::vector<std::string> argv = options.prefix;
    if (options.uid) {
        const std::vector<std::string> setpriv = {"/usr/bin/setpriv", "--reuid=" + std::to_string(*options.uid),
                                                  "--regid=" + std::to_string(*options.uid), "--clear-groups", "--"};
        argv.insert(argv.end(), setpriv.begin(), setpriv.end());
    }
    argv.insert(argv.end(), argv_in.begin(), argv_in.end());

    std::map<std::string, std::string> environment;
    for (char** e = environ; *e; ++e) {
        std::string entry = *e;
        const auto eq = entry.find('=');
        if (eq != std::string::npos) environment[entry.substr(0, eq)] = entry.substr(eq + 1);
    }
    for (const auto& name : {"DSH_CONFINE_CONFIG", "DSH_CONFINE_STATE_DIR", "SPDLOG_LEVEL", "TMPDIR"})
        environment.erase(name);
    for (const auto& [k, v] : options.env) environment[k] = v;
    for (const auto& k : options.unset) environment.erase(k);
    std::vector<std::string> env_strings;
    for (const auto& [k, v] : environment) env_strings.push_back(k + "=" + v);
    // Everything the child needs is built here: tests call this from many threads at once, and
    // a child that allocated after fork() could wait forever on an allocator lock another
    // thread held at the fork (ASan's allocator, unlike glibc's, is not reset in the child).
    std::vector<char*> args, envp;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    for (auto& e : env_strings) envp.push_back(e.data());
    envp.push_back(nullptr);
    const char* const cwd = options.cwd ? options.cwd->c_str() : nullptr;

    int in_pipe[2], out_pipe[2], err_pipe[2];
    if (pipe2(in_pipe, O_CLOEXEC) || pipe2(out_pipe, O_CLOEXEC) || pipe2(err_pipe, O_CLOEXEC)) return {};
    int master = -1;
    std::string slave;
    if (options.pty) {
        master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
        grantpt(master);
        unlockpt(master);
        slave = ptsname(master);
    }
    const char* const slave_path = slave.c_str();
    const pid_t pid = fork();
    if (pid == 0) {
        // Only async-signal-safe calls from here to execve.
        if (options.pty) {
            setsid();
            const int tty = open(slave_path, O_RDWR);
            ioctl(tty, TIOCSCTTY, 0);
            dup2(tty, 0);
        } else {
            // A session of its own, as a harness's start_new_session gives one: its process group
            // is killed whole at a timeout, and dsh-confine's exec path stays in place (a group's
            // leader in another's session has a process in front; tests of that make one).
            setsid();
            dup2(in_pipe[0], 0);
        }
        dup2(out_pipe[1], 1);
        dup2(err_pipe[1], 2);
        if (cwd != nullptr && chdir(cwd) != 0) _exit(121);
        execve(args[0], args.data(), envp.data());
        _exit(122);
    }
    close(in_pipe[0]);
    close(out_pipe[1]);
    close(err_pipe[1]);
    Result result;
    if (options.input) {
        signal(SIGPIPE, SIG_IGN);
        std::size_t done = 0;
        const std::string& data = *options.input;
        // Feed stdin while draining output, so neither side blocks the other.
        fcntl(in_pipe[1], F_SETFL, O_NONBLOCK);
        while (done < data.size()) {
            pollfd fds[3] = {{in_pipe[1], POLLOUT, 0}, {out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
            if (poll(fds, 3, 1000) <= 0) continue;
            if (fds[0].revents & (POLLERR | POLLHUP)) break;
            if (fds[0].revents & POLLOUT) {
                const ssize_t n = write(in_pipe[1], data.data() + done, std::min<std::size_t>(data.size() - done, 65536));
                if (n > 0) done += static_cast<std::size_t>(n);
                else if (errno != EAGAIN) break;
            }
            if (fds[1].revents & POLLIN) drain(out_pipe[0], result.out);
            if (fds[2].revents & POLLIN) drain(err_pipe[0], result.err);
        }
    }
    close(in_pipe[1]);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(options.timeoutMs);
    bool out_open = true, err_open = true;
    while (out_open || err_open) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
        if (left <= 0) {
            result.timedOut = true;
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            break;
        }
        pollfd fds[2] = {{out_open ? out_pipe[0] : -1, POLLIN, 0}, {err_open ? err_pipe[0] : -1, POLLIN, 0}};
        if (poll(fds, 2, static_cast<int>(left)) <= 0) continue;
        for (int i = 0; i < 2; ++i) {
            if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            std::string& into = i == 0 ? result.out : result.err;
            char buffer[65536];
            const ssize_t n = read(fds[i].fd, buffer, sizeof buffer);
            if (n > 0) into.append(buffer, static_cast<std::size_t>(n));
            else (i == 0 ? out_open : err_open) = false;
        }
    }
    close(out_pipe[0]);
    close(err_pipe[0]);
    int status = 0;
    rusage usage{};
    wait4(pid, &status, 0, &usage);
    result.maxRssKb = usage.ru_maxrss;
    result.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (options.pty) {
        const int tty = open(slave.c_str(), O_RDONLY | O_NOCTTY | O_NONBLOCK);
        int waiting = -1;
        if (tty >= 0 && ioctl(tty, FIONREAD, &waiting) != 0) waiting = -1;
        if (tty >= 0) close(tty);
        result.ptyPending = waiting;
        close(master);
    }
    return result;
}

TempDir::TempDir(const std::string& parent, std::optional<unsigned> owner) {
    std::string pattern = parent + "/dsh-e2e-XXXXXX";
    if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp in " + parent + ": " + std::strerror(errno));
    path_ = pattern;
    if (owner) {
        if (chown(path_.c_str(), *owner, *owner) != 0) throw std::runtime_error("chown " + path_);
        chmod(path_.c_str(), 0755);
    }
}

TempDir::~TempDir() {
    std::error_code ec;
    // Entries a test made read-only or immutable to others are opened up first.
    for (auto it = fs::recursive_directory_iterator(path_, fs::directory_options::skip_permission_denied, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
        if (it->is_directory(ec) && !it->is_symlink(ec)) fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path_, ec);
}

void write_file(const std::string& path, const std::string& content) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << content;
}

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

bool exists(const std::string& path) {
    struct stat st {};
    return lstat(path.c_str(), &st) == 0;
}

std::string host_snapshot(const std::string& path) {
    std::ostringstream out;
    std::vector<fs::path> paths = {path};
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(path, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
        paths.push_back(it->path());
    std::sort(paths.begin(), paths.end());
    for (const auto& p : paths) {
        struct stat st {};
        if (lstat(p.c_str(), &st) != 0) continue;
        out << p.string() << " " << std::oct << st.st_mode << std::dec << " " << st.st_uid << ":" << st.st_gid << " "
            << st.st_size << " " << st.st_nlink << " ";
        if (!S_ISDIR(st.st_mode)) out << st.st_mtim.tv_sec << "." << st.st_mtim.tv_nsec;
        char names[1024];
        const ssize_t n = llistxattr(p.c_str(), names, sizeof names);
        if (n > 0) out << " xattr:" << std::string(names, static_cast<std::size_t>(n));
        if (S_ISREG(st.st_mode)) out << " [" << read_file(p.string()) << "]";
        if (S_ISLNK(st.st_mode)) out << " -> " << fs::read_symlink(p, ec).string();
        out << "\n";
    }
    return out.str();
}

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

std::vector<BackendCaller> backends_and_callers(std::initializer_list<const char*> third) {
    std::vector<BackendCaller> out;
    for (const char* backend : {"bwrap", "landlock"})
        for (const char* caller : {"root", "nobody"})
            for (const char* more : third) out.emplace_back(backend, caller, more);
    return out;
}

std::string backend_caller_name(const ::testing::TestParamInfo<BackendCaller>& info) {
    const auto& [backend, caller, more] = info.param;
    return backend + "_" + caller + (more.empty() ? "" : "_" + more);
}

bool backend_usable(const std::string& name) {
    static std::map<std::string, bool> answers;
    if (auto it = answers.find(name); it != answers.end()) return it->second;
    TempDir home;
    RunOptions options;
    options.env = isolated_env(home.path());
    const nlohmann::json doctor = nlohmann::json::parse(run({"doctor", "--json"}, options).out, nullptr, false);
    bool usable = false;
    if (doctor.is_object() && doctor.contains("backends"))
        for (const auto& backend : doctor["backends"])
            if (backend.value("name", "") == name) usable = backend.value("usable", false);
    return answers[name] = usable;
}

::testing::AssertionResult IsError(const Result& r, const std::string& code, int status) {
    if (r.timedOut) return ::testing::AssertionFailure() << "timed out";
    if (r.status != status)
        return ::testing::AssertionFailure() << "status " << r.status << ", wanted " << status << "; stderr: " << r.err;
    if (!r.out.empty()) return ::testing::AssertionFailure() << "stdout is not empty: " << r.out;
    const std::string prefix = "dsh-confine: error: " + code + ": ";
    if (r.err.rfind(prefix, 0) != 0)
        return ::testing::AssertionFailure() << "stderr does not start with '" << prefix << "': " << r.err;
    if (r.err.find('\n') != r.err.size() - 1) return ::testing::AssertionFailure() << "stderr is not one line: " << r.err;
    return ::testing::AssertionSuccess();
}

}  // namespace e2e
