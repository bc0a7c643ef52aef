// The terminal guard: a seccomp filter that refuses ioctl(TIOCSTI) and ioctl(TIOCLINUX), so a
// confined command cannot push keystrokes into the caller's terminal (they would run outside
// any sandbox) while it keeps that terminal as its controlling one (job control works).
#pragma once

#include <string>

namespace dsh::linux_guard {

// Installs the filter on the calling thread's process (no_new_privs must already be set).
bool install_tty_guard(std::string& why);

// A file descriptor (close-on-exec) from which the compiled filter can be read to its end: what
// bubblewrap's `--seccomp FD` loads. -1 with `why` on failure.
int tty_guard_fd(std::string& why);

}  // namespace dsh::linux_guard
