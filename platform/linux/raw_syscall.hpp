// System calls made without the C library's wrappers, which write errno on failure. errno lives
// in the calling thread's TLS, and a clone that shares dsh-confine's memory (CLONE_VM, without
// a TLS of its own) shares that errno too: `run`'s keeper, which runs beside dsh-confine in the
// same memory, and the runner's process it starts must not write it, or dsh-confine could read
// their error in place of its own. These return the kernel's result as it is: -errno on
// failure. Nothing else is touched: no TLS, no memory but what the arguments point to.
#pragma once

#include <cstring>

#include <sys/syscall.h>

namespace dsh::linux_sys {

// Whether a process may be started as a clone that shares dsh-confine's memory on a stack of
// its own (as posix_spawn starts one). Not under AddressSanitizer, which does not follow code
// onto a stack it did not make: there such processes are forked copies.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kClonesShareMemory = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kClonesShareMemory = false;
#else
inline constexpr bool kClonesShareMemory = true;
#endif
#else
inline constexpr bool kClonesShareMemory = true;
#endif

inline long call(long number, long a = 0, long b = 0, long c = 0, long d = 0, long e = 0, long f = 0) noexcept {
#if defined(__x86_64__)
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    register long r9 __asm__("r9") = f;
    long result = 0;
    __asm__ volatile("syscall"
                     : "=a"(result)
                     : "a"(number), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return result;
#elif defined(__aarch64__)
    register long x8 __asm__("x8") = number;
    register long x0 __asm__("x0") = a;
    register long x1 __asm__("x1") = b;
    register long x2 __asm__("x2") = c;
    register long x3 __asm__("x3") = d;
    register long x4 __asm__("x4") = e;
    register long x5 __asm__("x5") = f;
    __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5) : "memory");
    return x0;
#else
#error "raw system calls: add this architecture's calling convention"
#endif
}

// With pointers and other integers as arguments.
template <typename... Args>
long call_with(long number, Args... args) noexcept {
    return call(number, ((long)(args))...);
}

// Calls visit(name) for each entry of the open directory `dir`, read with getdents64 into a
// buffer on the stack, until visit returns false: 0 at the end, or -errno.
template <typename Visit>
long for_each_entry(long dir, Visit&& visit) noexcept {
    alignas(8) char entries[2048] = {};  // filled by getdents64 (zeroed for the analyzer)
    for (;;) {
        const long got = call_with(SYS_getdents64, dir, entries, sizeof entries);
        if (got <= 0) return got;
        for (long offset = 0; offset < got;) {
            // struct linux_dirent64: ino (8), off (8), reclen (2), type (1), name.
            unsigned short length = 0;
            std::memcpy(&length, entries + offset + 16, sizeof length);
            if (!visit(static_cast<const char*>(entries + offset + 19))) return 0;
            offset += length;
        }
    }
}

// The number `text` is, all decimal digits (a pid, a descriptor); -1 for anything else.
inline long whole_number(const char* text) noexcept {
    long value = 0;
    if (*text == '\0') return -1;
    for (; *text != '\0'; ++text) {
        if (*text < '0' || *text > '9') return -1;
        value = value * 10 + (*text - '0');
    }
    return value;
}

}  // namespace dsh::linux_sys
