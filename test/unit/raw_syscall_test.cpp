// platform/linux/raw_syscall.hpp: the system calls `run`'s keeper and runner make beside
// dsh-confine in its memory. They must return the kernel's -errno and leave errno alone (it is
// dsh-confine's), and pass all six arguments where the kernel reads them.
#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "../../platform/linux/raw_syscall.hpp"

namespace {

using dsh::linux_sys::call;
using dsh::linux_sys::call_with;

TEST(RawSyscall, AFailureIsReturnedAsMinusErrnoAndErrnoIsLeftAlone) {
    errno = 4321;
    EXPECT_EQ(call(SYS_close, -1), -EBADF);
    EXPECT_EQ(call_with(SYS_openat, AT_FDCWD, "/nonexistent/dsh-confine", O_RDONLY), -ENOENT);
    EXPECT_EQ(errno, 4321);
}

TEST(RawSyscall, ResultsAreTheKernels) {
    EXPECT_EQ(call(SYS_getpid), static_cast<long>(getpid()));
    int fds[2] = {-1, -1};
    ASSERT_EQ(call_with(SYS_pipe2, fds, O_CLOEXEC), 0);
    EXPECT_EQ(call_with(SYS_write, fds[1], "abc", 3), 3);
    char got[4] = {};
    EXPECT_EQ(call_with(SYS_read, fds[0], got, 3), 3);
    EXPECT_STREQ(got, "abc");
    close(fds[0]);
    close(fds[1]);
}

TEST(RawSyscall, FourthToSixthArgumentsReachTheKernel) {
    // ppoll reads its 4th and 5th (the mask and its size: a wrong size is EINVAL).
    const timespec now{0, 0};
    const unsigned long none = 0;
    EXPECT_EQ(call_with(SYS_ppoll, nullptr, 0, &now, &none, sizeof none), 0);
    EXPECT_EQ(call_with(SYS_ppoll, nullptr, 0, &now, &none, 3), -EINVAL);
    // mmap reads all six: flags (4th), fd (5th) and offset (6th; unaligned is EINVAL).
    const long page = call_with(SYS_mmap, nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_GT(page, 0);
    std::memset(reinterpret_cast<void*>(page), 'x', 4096);
    EXPECT_EQ(call_with(SYS_munmap, page, 4096), 0);
    EXPECT_EQ(call_with(SYS_mmap, nullptr, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 1), -EINVAL);
}

}  // namespace
