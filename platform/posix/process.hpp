// Process facilities on POSIX hosts: PATH lookup with execvp's answers, exec, and a spawn
// under a timeout for functional probes.
#pragma once

#include <string>
#include <vector>

namespace dsh::posix {

enum class Lookup { Found, NotFound, NotExecutable };

struct ProgramLookup {
    Lookup status = Lookup::NotFound;
    std::string path;  // the file found (also when it is not executable)
};

// As execvp searches: a name with a slash is taken as is; otherwise each PATH entry in turn
// (an empty entry is the cwd). A match that exists but cannot be executed is remembered, so
// the answer is 126 rather than 127 when nothing executable follows it, as with env(1).
// On POSIX hosts a name looked up again under the same PATH gets the process's previous
// answer (a call plans and prepares its runner in one process; process.cpp says why).
ProgramLookup resolve_program(const std::string& name);

// `argv` as execve takes it: pointers into the strings, then a null pointer.
std::vector<char*> c_argv(const std::vector<std::string>& argv);

// Replaces the process. Returns only on failure, with errno set.
void exec_argv(const std::string& path, const std::vector<std::string>& argv);

struct SpawnOutcome {
    bool started = false;
    bool timedOut = false;
    int exitCode = -1;    // when it exited
    int signal = 0;       // when a signal ended it
    std::string output;   // stdout and stderr, the first 64 KiB
    std::string error;    // why it could not be started
};

// Runs argv with stdin from /dev/null and stdout+stderr captured, in its own process group,
// which is killed when `timeout_ms` passes.
SpawnOutcome spawn_with_timeout(const std::vector<std::string>& argv, int timeout_ms);

// Marks every descriptor above 2 close-on-exec except `keep` (where sandbox-exec, which closes
// nothing, runs next): listed from /dev/fd, not tried up to RLIMIT_NOFILE.
void close_on_exec_except(const std::vector<int>& keep);

// The absolute path of the running binary (/proc/self/exe on Linux, the dyld's answer on macOS).
std::string self_executable();

// pipe(2) with both ends close-on-exec (and non-blocking if asked): pipe2 where there is one,
// else pipe and fcntl. Without pipe2 the flags are set just after the pipe is made, so a thread
// forking in between could leak it; dsh-confine forks from its only thread.
bool make_pipe(int fds[2], bool nonblocking = false);

}  // namespace dsh::posix
