// Fuzzes shell quoting by its promise: /bin/sh reads shell_join(argv) back into the same argv.
// The input is split at NUL (the one byte no shell word can hold) into up to 8 words; the
// joined line goes after `printf '%s\0'`, and sh's NUL-separated output must be the words.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "lib/plan.hpp"

extern char** environ;

namespace {

struct Output {
    std::string out;
    std::string err;
    int status = -1;
};

void read_all(int fd, std::string& into) {
    char buffer[65536];
    for (;;) {
        const ssize_t n = read(fd, buffer, sizeof buffer);
        if (n > 0) into.append(buffer, static_cast<std::size_t>(n));
        else if (n == 0 || errno != EINTR) break;
    }
}

// posix_spawn, not popen or system: no shell but the one under test reads the line.
Output run_sh(const std::string& script) {
    int out_pipe[2], err_pipe[2];
    if (pipe(out_pipe) != 0 || pipe(err_pipe) != 0) __builtin_trap();
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", 0, 0);
    posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
    posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) posix_spawn_file_actions_addclose(&actions, fd);
    std::string sh = "/bin/sh", dash_c = "-c", line = script;
    char* argv[] = {sh.data(), dash_c.data(), line.data(), nullptr};
    std::string path = "PATH=/usr/bin:/bin", locale = "LC_ALL=C";
    char* envp[] = {path.data(), locale.data(), nullptr};
    pid_t pid = -1;
    if (posix_spawn(&pid, argv[0], &actions, nullptr, argv, envp) != 0) __builtin_trap();
    posix_spawn_file_actions_destroy(&actions);
    close(out_pipe[1]);
    close(err_pipe[1]);
    Output result;
    read_all(out_pipe[0], result.out);  // sh's stderr is small: its pipe cannot fill meanwhile
    read_all(err_pipe[0], result.err);
    close(out_pipe[0]);
    close(err_pipe[0]);
    while (waitpid(pid, &result.status, 0) < 0 && errno == EINTR) {
    }
    return result;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    std::vector<std::string> argv;
    for (std::size_t start = 0; argv.size() < 8;) {
        const std::size_t end = input.find('\0', start);
        argv.emplace_back(input.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
        if (end == std::string_view::npos) break;
        start = end + 1;
    }
    const std::string line = dsh::shell_join(argv);
    std::string expected;
    for (const auto& word : argv) expected += word + '\0';

    const Output sh = run_sh("printf '%s\\0' " + line);
    if (sh.status != 0 || sh.out != expected) {
        std::fprintf(stderr, "shell_join: %s\nsh status %d, stderr: %s\n", line.c_str(), sh.status, sh.err.c_str());
        __builtin_trap();
    }
    return 0;
}
