/* Whole-process timing for test/bench/run.sh: runs several commands in alternation (one run
 * of each per round, in an order shuffled every round), so drift in the machine's state (cache,
 * frequency, other load) falls on every command alike, and prints each command's median. The
 * order is shuffled, not rotated: in a rotation each command follows the same one in almost
 * every round, and what that one leaves the kernel to finish once it has exited (after a
 * bubblewrap call, its namespaces' teardown) would fall on it alone.
 *
 *   alternate [-r ROUNDS] [-w WARMUP] -- NAME ARGV... ::: NAME ARGV... ::: ...
 *   alternate -p PARALLEL [-d SECONDS] [-r ROUNDS] -- NAME ARGV... ::: ...
 *
 * Each run: stdin, stdout and stderr on /dev/null, timed from just before posix_spawn to the
 * return of wait4 (CLOCK_MONOTONIC). The next run starts once every process it left (reparented
 * here: alternate is a subreaper on Linux) has been reaped too. One line per command on stdout:
 *   NAME MEDIAN_US P25_US P75_US MIN_US CPU_MEDIAN_US MAXRSS_KB EXIT
 * CPU is user + system time of the process, the children it waited for and those it left behind
 * (wait4's rusage): steadier than wall time on a busy machine. EXIT is the status of the last run (a signal
 * shows as 128+N); MAXRSS_KB the largest ru_maxrss over the runs. It reports and never judges: the exit status is always 0 once
 * every command could be started.
 *
 * With -p, throughput instead, as an agent making parallel tool calls loads the machine: each
 * round runs each command (the order shuffled) for SECONDS (default 1) in PARALLEL worker
 * processes, each a loop of one run after another. A round's figure is the workers' completed
 * runs per second, summed. The line is then
 *   NAME MEDIAN_PER_S P25_PER_S P75_PER_S MIN_PER_S CPU_US_PER_RUN 0 EXIT
 * (CPU per run from the same rusage, over every round; EXIT of the last run of a worker that
 * saw a failure, else 0). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char** environ;

struct command {
    const char* name;
    char** argv;
    double* samples;
    double* cpu;
    long maxrss_kb;
    int last_exit;
};

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int compare(const void* a, const void* b) {
    const double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

static double quantile(const double* sorted, int n, double q) {
    const double at = q * (n - 1);
    const int lo = (int)at;
    const int hi = lo + 1 < n ? lo + 1 : lo;
    return sorted[lo] + (sorted[hi] - sorted[lo]) * (at - lo);
}

static double cpu_us(const struct rusage* usage) {
    return (double)(usage->ru_utime.tv_sec + usage->ru_stime.tv_sec) * 1e6 +
           (double)(usage->ru_utime.tv_usec + usage->ru_stime.tv_usec);
}

/* Processes a command leaves behind come to us rather than to init, so that their CPU is counted
 * and each run ends only once they are gone. bubblewrap's parent exits without reaping its pid
 * namespace's init: without this, the exec path's CPU would miss the whole sandbox. */
static void become_subreaper(void) {
#ifdef PR_SET_CHILD_SUBREAPER
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
#endif
}

static double run_once(struct command* c, posix_spawn_file_actions_t* actions, double* cpu) {
    pid_t pid;
    const double start = now_us();
    const int rc = posix_spawn(&pid, c->argv[0], actions, NULL, c->argv, environ);
    if (rc != 0) {
        fprintf(stderr, "alternate: %s: cannot run %s: %s\n", c->name, c->argv[0], strerror(rc));
        exit(2);
    }
    int status = 0;
    struct rusage usage;
    while (wait4(pid, &status, 0, &usage) < 0 && errno == EINTR) {
    }
    const double elapsed = now_us() - start;
    if (usage.ru_maxrss > c->maxrss_kb) c->maxrss_kb = usage.ru_maxrss;
    double spent = cpu_us(&usage);
    /* What the command left running was reparented to us (a subreaper): its CPU counts too. */
    struct rusage orphan;
    for (;;) {
        if (wait4(-1, NULL, 0, &orphan) > 0) spent += cpu_us(&orphan);
        else if (errno != EINTR) break;
    }
    if (cpu) *cpu = spent;
    c->last_exit = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return elapsed;
}

/* One worker of a -p round: runs `c` until `seconds` have passed, then writes its completed
 * runs, the time they took, their summed CPU and the last failing status to `out`. */
struct worker_report {
    long runs;
    double elapsed_us, cpu_us;
    int failed_exit;
};

static void work(struct command* c, posix_spawn_file_actions_t* actions, double seconds, int out) {
    become_subreaper();
    struct worker_report report = {0, 0, 0, 0};
    const double start = now_us(), deadline = start + seconds * 1e6;
    while (now_us() < deadline) {
        double cpu = 0;
        run_once(c, actions, &cpu);
        report.runs++;
        report.cpu_us += cpu;
        if (c->last_exit != 0) report.failed_exit = c->last_exit;
    }
    report.elapsed_us = now_us() - start;
    (void)!write(out, &report, sizeof report);
    _exit(0);
}

/* One -p round of `c`: PARALLEL workers for SECONDS; returns runs per second, summed. */
static double parallel_round(struct command* c, posix_spawn_file_actions_t* actions, int parallel, double seconds,
                             double* cpu_us, long* runs) {
    int report_pipe[2];
    if (pipe(report_pipe) != 0) {
        perror("alternate: pipe");
        exit(2);
    }
    for (int w = 0; w < parallel; ++w) {
        const pid_t pid = fork();
        if (pid < 0) {
            perror("alternate: fork");
            exit(2);
        }
        if (pid == 0) {
            close(report_pipe[0]);
            work(c, actions, seconds, report_pipe[1]);
        }
    }
    close(report_pipe[1]);
    double rate = 0;
    struct worker_report report;
    while (read(report_pipe[0], &report, sizeof report) == (ssize_t)sizeof report) {
        if (report.elapsed_us > 0) rate += (double)report.runs * 1e6 / report.elapsed_us;
        *cpu_us += report.cpu_us;
        *runs += report.runs;
        if (report.failed_exit) c->last_exit = report.failed_exit;
    }
    close(report_pipe[0]);
    while (wait(NULL) > 0) {
    }
    return rate;
}

/* The order of a round: a Fisher-Yates shuffle from a fixed seed, so a run can be repeated. */
static void shuffle(int* order, int count) {
    static unsigned long long state = 0x9e3779b97f4a7c15ULL;
    for (int k = count - 1; k > 0; --k) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        const int j = (int)(state % (unsigned long long)(k + 1));
        const int t = order[k];
        order[k] = order[j];
        order[j] = t;
    }
}

int main(int argc, char** argv) {
    int rounds = 200, warmup = 10, parallel = 0, i = 1;
    double seconds = 1;
    for (; i < argc && strcmp(argv[i], "--") != 0; ++i) {
        if (strcmp(argv[i], "-r") == 0 && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (strcmp(argv[i], "-w") == 0 && i + 1 < argc) warmup = atoi(argv[++i]);
        else if (strcmp(argv[i], "-p") == 0 && i + 1 < argc) parallel = atoi(argv[++i]);
        else if (strcmp(argv[i], "-d") == 0 && i + 1 < argc) seconds = atof(argv[++i]);
        else {
            fprintf(stderr, "usage: alternate [-r ROUNDS] [-w WARMUP] [-p PARALLEL [-d SECONDS]] -- NAME ARGV... ::: NAME ARGV...\n");
            return 2;
        }
    }
    if (rounds < 1) rounds = 1;
    struct command commands[64];
    int count = 0;
    for (++i; i < argc && count < 64;) {
        struct command* c = &commands[count++];
        memset(c, 0, sizeof *c);
        c->name = argv[i++];
        c->argv = &argv[i];
        while (i < argc && strcmp(argv[i], ":::") != 0) ++i;
        if (i < argc) argv[i++] = NULL;  /* ends this command's argv */
        if (c->argv[0] == NULL) {
            fprintf(stderr, "alternate: %s: no command\n", c->name);
            return 2;
        }
        c->samples = calloc((size_t)rounds, sizeof(double));
        c->cpu = calloc((size_t)rounds, sizeof(double));
    }
    if (count == 0) {
        fprintf(stderr, "alternate: no commands\n");
        return 2;
    }

    int order[64];
    for (int k = 0; k < count; ++k) order[k] = k;
    become_subreaper();
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);

    for (int w = 0; w < warmup; ++w)
        for (int k = 0; k < count; ++k) run_once(&commands[k], &actions, NULL);
    if (parallel > 0) {
        for (int k = 0; k < count; ++k) commands[k].last_exit = 0;
        double cpu_sum[64] = {0};
        long runs[64] = {0};
        for (int r = 0; r < rounds; ++r) {
            shuffle(order, count);
            for (int j = 0; j < count; ++j) {
                const int k = order[j];
                commands[k].samples[r] = parallel_round(&commands[k], &actions, parallel, seconds, &cpu_sum[k], &runs[k]);
            }
        }
        for (int k = 0; k < count; ++k) {
            struct command* c = &commands[k];
            qsort(c->samples, (size_t)rounds, sizeof(double), compare);
            printf("%s %.1f %.1f %.1f %.1f %.1f 0 %d\n", c->name, quantile(c->samples, rounds, 0.5),
                   quantile(c->samples, rounds, 0.25), quantile(c->samples, rounds, 0.75), c->samples[0],
                   runs[k] > 0 ? cpu_sum[k] / (double)runs[k] : 0.0, c->last_exit);
        }
        return 0;
    }
    for (int r = 0; r < rounds; ++r) {
        shuffle(order, count);
        for (int j = 0; j < count; ++j) {
            struct command* c = &commands[order[j]];
            c->samples[r] = run_once(c, &actions, &c->cpu[r]);
        }
    }

    for (int k = 0; k < count; ++k) {
        struct command* c = &commands[k];
        qsort(c->samples, (size_t)rounds, sizeof(double), compare);
        qsort(c->cpu, (size_t)rounds, sizeof(double), compare);
        printf("%s %.1f %.1f %.1f %.1f %.1f %ld %d\n", c->name, quantile(c->samples, rounds, 0.5),
               quantile(c->samples, rounds, 0.25), quantile(c->samples, rounds, 0.75), c->samples[0],
               quantile(c->cpu, rounds, 0.5), c->maxrss_kb, c->last_exit);
    }
    return 0;
}
