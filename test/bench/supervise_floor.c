/* The least a supervising wrapper (`run`) can add to a command: fork, exec the command in the
 * child, wait for it in the parent and exit with its status. No pipes, no keeper, no signal
 * forwarding, no classification. Linked like dsh-confine (a static PIE where the toolchain has
 * one). run.sh puts it in front of the C Landlock floor: the difference is what staying alive
 * to see the command end costs at the least.
 *
 *   supervise_floor PROGRAM [ARG...] */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: supervise_floor PROGRAM [ARG...]\n");
        return 125;
    }
    const pid_t child = fork();
    if (child < 0) {
        fprintf(stderr, "supervise_floor: fork: %s\n", strerror(errno));
        return 125;
    }
    if (child == 0) {
        execv(argv[1], argv + 1);
        fprintf(stderr, "supervise_floor: %s: %s\n", argv[1], strerror(errno));
        _exit(126);
    }
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
