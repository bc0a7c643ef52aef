/* The least a wrapper can cost: a program that only execs its arguments, linked like
 * dsh-confine (a static PIE where the toolchain has one). run.sh runs the printed bwrap argv
 * through it, so bwrap exec's target (within 1.10x of that argv run directly) can be read
 * against what starting any second program costs before bwrap starts.
 *
 *   exec_floor [-s | -g] PROGRAM [ARG...]
 *
 * With -s, the processes `run` has in front of the runner, at their least: a keeper is forked,
 * it forks the process that execs, and each parent waits for its child and exits with its
 * status (landlock_floor.c's -s, in front of bwrap). With -g, PROGRAM is made a process
 * group's leader first, as a harness's process_group=0 makes it (dsh-confine's Landlock exec
 * path then stands a process in front of the command). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

// Forks; the parent waits for the child and exits with its status, the child returns.
static void supervised(void) {
    const pid_t child = fork();
    if (child < 0) {
        fprintf(stderr, "exec_floor: fork: %s\n", strerror(errno));
        exit(125);
    }
    if (child == 0) return;
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
}

int main(int argc, char** argv) {
    if (argc > 1 && strcmp(argv[1], "-s") == 0) {
        supervised();  // the keeper
        supervised();  // the runner's process
        --argc;
        ++argv;
    } else if (argc > 1 && strcmp(argv[1], "-g") == 0) {
        if (setpgid(0, 0) != 0) {
            fprintf(stderr, "exec_floor: setpgid: %s\n", strerror(errno));
            return 125;
        }
        --argc;
        ++argv;
    }
    if (argc < 2) {
        fprintf(stderr, "usage: exec_floor [-s | -g] PROGRAM [ARG...]\n");
        return 125;
    }
    execv(argv[1], argv + 1);
    fprintf(stderr, "exec_floor: %s: %s\n", argv[1], strerror(errno));
    return 126;
}
