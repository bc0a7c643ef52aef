#include "process.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__APPLE__)
#include <mach-o/dyld.h>
#endif

extern char** environ;

namespace dsh::posix {
namespace {

bool is_executable_file(const std::string& path) {
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) return false;
    return S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

bool exists(const std::string& path) {
    struct stat st {};
    return stat(path.c_str(), &st) == 0;
}

// Each PATH entry in turn, as execvp searches them.
ProgramLookup search_path(const std::string& name, const std::string& search) {
    ProgramLookup not_executable{Lookup::NotFound, name};
    std::size_t start = 0;
    while (true) {
        const std::size_t end = search.find(':', start);
        std::string dir = search.substr(start, end == std::string::npos ? std::string::npos : end - start);
        const std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
        struct stat st {};
        if (stat(candidate.c_str(), &st) == 0) {  // one stat per entry: most entries are misses
            if (S_ISREG(st.st_mode) && access(candidate.c_str(), X_OK) == 0) return {Lookup::Found, candidate};
            if (not_executable.status == Lookup::NotFound && !S_ISDIR(st.st_mode))
                not_executable = {Lookup::NotExecutable, candidate};
        }
        if (end == std::string::npos) break;
        start = end + 1;
    }
    return not_executable;
}

}  // namespace

std::vector<char*> c_argv(const std::vector<std::string>& argv) {
    std::vector<char*> out;
    out.reserve(argv.size() + 1);
    for (const auto& arg : argv) out.push_back(const_cast<char*>(arg.c_str()));
    out.push_back(nullptr);
    return out;
}

ProgramLookup resolve_program(const std::string& name) {
    if (name.empty()) return {Lookup::NotFound, name};
    if (name.find('/') != std::string::npos) {
        if (is_executable_file(name)) return {Lookup::Found, name};
        return {exists(name) ? Lookup::NotExecutable : Lookup::NotFound, name};
    }
    const char* env_path = std::getenv("PATH");
    const std::string search = env_path ? env_path : "/usr/local/bin:/bin:/usr/bin";
    // A call looks its program up twice in one process, a moment apart: when it plans (a missing
    // program is COMMAND_NOT_FOUND before anything runs) and when the runner's code is prepared
    // in the same process (the exec path, `run` under Landlock). The second lookup of the same
    // name under the same PATH gets the first's answer: one stat per PATH entry fewer, and the
    // answer a second search would give, as dsh-confine changes neither its cwd nor PATH
    // (execve opens the file again either way). One thread looks up: the answer is not locked.
    static struct {
        std::string name, search;
        ProgramLookup found;
    } last;
    if (!last.name.empty() && last.name == name && last.search == search) return last.found;
    last = {name, search, search_path(name, search)};
    return last.found;
}

void exec_argv(const std::string& path, const std::vector<std::string>& argv) {
    std::vector<char*> args = c_argv(argv);
    execv(path.c_str(), args.data());
}

SpawnOutcome spawn_with_timeout(const std::vector<std::string>& argv, int timeout_ms) {
    SpawnOutcome outcome;
    int pipe_fds[2];
    if (!make_pipe(pipe_fds)) {
        outcome.error = std::string("pipe: ") + std::strerror(errno);
        return outcome;
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
    posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 2);
    posix_spawnattr_t attributes;
    posix_spawnattr_init(&attributes);
    posix_spawnattr_setpgroup(&attributes, 0);
    sigset_t defaults;
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGPIPE);
    sigaddset(&defaults, SIGINT);
    sigaddset(&defaults, SIGTERM);
    posix_spawnattr_setsigdefault(&attributes, &defaults);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF);

    std::vector<char*> args = c_argv(argv);
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, argv.front().c_str(), &actions, &attributes, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attributes);
    close(pipe_fds[1]);
    if (rc != 0) {
        close(pipe_fds[0]);
        outcome.error = argv.front() + ": " + std::strerror(rc);
        return outcome;
    }
    outcome.started = true;

    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    bool open = true;
    while (open) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
        if (left <= 0) {
            outcome.timedOut = true;
            break;
        }
        pollfd fd{pipe_fds[0], POLLIN, 0};
        const int ready = poll(&fd, 1, static_cast<int>(std::min<long long>(left, INT_MAX)));
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) continue;
        char buffer[4096];
        const ssize_t n = read(pipe_fds[0], buffer, sizeof buffer);
        if (n > 0) {
            if (outcome.output.size() < 65536) outcome.output.append(buffer, static_cast<std::size_t>(n));
        } else if (n == 0 || errno != EINTR) {
            open = false;
        }
    }
    close(pipe_fds[0]);
    int status = 0;
    if (outcome.timedOut) {
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        return outcome;
    }
    // The output closed; the process may still linger briefly, within the same deadline. It is
    // waited for without being reaped, so its process group can still be killed safely.
    while (true) {
        siginfo_t info{};
        const int done = waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT);
        if (done == 0 && info.si_pid == pid) break;
        if (done < 0 && errno != EINTR) break;
        if (std::chrono::steady_clock::now() >= deadline) {
            outcome.timedOut = true;
            break;
        }
        usleep(1000);
    }
    kill(-pid, SIGKILL);  // nothing of a probe outlives it
    waitpid(pid, &status, 0);
    if (outcome.timedOut) return outcome;
    if (WIFEXITED(status)) outcome.exitCode = WEXITSTATUS(status);
    else if (WIFSIGNALED(status)) outcome.signal = WTERMSIG(status);
    return outcome;
}

void close_on_exec_except(const std::vector<int>& keep) {
    std::vector<int> open;
    if (DIR* dir = opendir("/dev/fd")) {
        const int own = dirfd(dir);
        while (dirent* entry = readdir(dir)) {
            char* end = nullptr;
            const long fd = std::strtol(entry->d_name, &end, 10);
            if (end != entry->d_name && *end == '\0' && fd > 2 && fd != own) open.push_back(static_cast<int>(fd));
        }
        closedir(dir);
    }
    for (int fd : open)
        if (std::find(keep.begin(), keep.end(), fd) == keep.end()) fcntl(fd, F_SETFD, FD_CLOEXEC);
    for (int fd : keep) fcntl(fd, F_SETFD, 0);
}

std::string self_executable() {
#if defined(__APPLE__)
    std::uint32_t size = 0;
    _NSGetExecutablePath(nullptr, &size);  // asks for the size the path needs
    std::string path(size, '\0');
    if (size == 0 || _NSGetExecutablePath(path.data(), &size) != 0) return {};
    char resolved[PATH_MAX];
    return realpath(path.c_str(), resolved) ? std::string(resolved) : std::string();
#else
    char buffer[PATH_MAX + 1];
    const ssize_t n = readlink("/proc/self/exe", buffer, PATH_MAX);
    if (n > 0) return std::string(buffer, static_cast<std::size_t>(n));
    return {};
#endif
}

bool make_pipe(int fds[2], bool nonblocking) {
#if defined(__linux__)
    return pipe2(fds, O_CLOEXEC | (nonblocking ? O_NONBLOCK : 0)) == 0;
#else
    if (pipe(fds) != 0) return false;
    for (int i = 0; i < 2; ++i) {
        const bool ok = fcntl(fds[i], F_SETFD, FD_CLOEXEC) == 0 &&
                        (!nonblocking || fcntl(fds[i], F_SETFL, fcntl(fds[i], F_GETFL) | O_NONBLOCK) == 0);
        if (!ok) {
            const int error = errno;
            close(fds[0]);
            close(fds[1]);
            fds[0] = fds[1] = -1;
            errno = error;
            return false;
        }
    }
    return true;
#endif
}

}  // namespace dsh::posix
