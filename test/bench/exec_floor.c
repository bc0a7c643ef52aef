/* The least a wrapper can cost: a program that only execs its arguments, linked like
 * dsh-confine (a static PIE where the toolchain has one). run.sh runs the printed bwrap argv
 * through it, so bwrap exec's target (within 1.10x of that argv run directly) can be read
 * against what starting any second program costs before bwrap starts. */
#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>

int main(int argc, char** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: exec_floor PROGRAM [ARG...]\n");
        return 125;
    }
    execv(argv[1], argv + 1);
    fprintf(stderr, "exec_floor: %s: %s\n", argv[1], strerror(errno));
    return 126;
}
