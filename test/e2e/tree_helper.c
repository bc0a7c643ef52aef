/* A command that leaves a daemon behind, for run's timeout tests: it double-forks a grandchild
 * that starts a session of its own (setsid), as a daemon does, so that it is neither the
 * command's child nor in its process group (timeout(1) never reaches it). The grandchild
 * connects to the Unix socket SOCKET, which tells the test its pid on the host (SO_PEERCRED,
 * translated into the test's own PID namespace), and then waits for ever. The command prints
 * "ready" once the grandchild has connected, and waits for ever too.
 *
 *   tree_helper SOCKET [ignore-term]
 *
 * With ignore-term both ignore SIGTERM, so only the SIGKILL that follows it ends them. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: tree_helper SOCKET [ignore-term]\n");
        return 2;
    }
    if (argc > 2 && strcmp(argv[2], "ignore-term") == 0) signal(SIGTERM, SIG_IGN);
    int connected[2];
    if (pipe(connected) != 0) return 3;
    const pid_t child = fork();
    if (child < 0) return 3;
    if (child == 0) {
        setsid();
        const pid_t grandchild = fork();
        if (grandchild != 0) _exit(grandchild < 0 ? 3 : 0);
        struct sockaddr_un address;
        memset(&address, 0, sizeof address);
        address.sun_family = AF_UNIX;
        strncpy(address.sun_path, argv[1], sizeof address.sun_path - 1);
        const int s = socket(AF_UNIX, SOCK_STREAM, 0);
        if (s < 0 || connect(s, (struct sockaddr*)&address, sizeof address) != 0) {
            perror("tree_helper: connect");
            _exit(4);
        }
        if (write(connected[1], "c", 1) != 1) _exit(5);
        for (;;) pause();
    }
    close(connected[1]);
    waitpid(child, NULL, 0);
    char byte = 0;
    if (read(connected[0], &byte, 1) != 1) return 6;  /* the grandchild failed before connecting */
    printf("ready\n");
    fflush(stdout);
    for (;;) pause();
}
