/* Runs a program where Landlock does not exist: a seccomp filter makes landlock_create_ruleset,
 * landlock_add_rule and landlock_restrict_self fail with ENOSYS, as on a kernel without it. */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <unistd.h>

int main(int argc, char** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: no_landlock PROGRAM [ARG...]\n");
        return 2;
    }
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 444, 0, 2),
        BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, 446, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog program = {sizeof filter / sizeof filter[0], filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
        perror("no_landlock: seccomp");
        return 2;
    }
    execv(argv[1], argv + 1);
    perror("no_landlock: execv");
    return 127;
}
