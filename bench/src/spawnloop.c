/* spawnloop.c - the floor under any CGI server: run a CGI program N times, one after another, with
 * posix_spawn (vfork semantics), its stdout on a pipe that is read to the end, and waitpid; print the
 * CPU time (this process + its reaped children, getrusage) and the wall time per run.
 * Used by bench/cgi.sh: cc -O2 spawnloop.c -o spawnloop; spawnloop N PROGRAM [NAME=VALUE...]  */
#define _GNU_SOURCE
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double tv(struct timeval t) { return t.tv_sec * 1e6 + t.tv_usec; }

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s N PROGRAM [NAME=VALUE...]\n", argv[0]);
        return 2;
    }
    long n = atol(argv[1]);
    char *args[] = {argv[2], NULL};
    char **env = argv + 3;   /* the rest: the program's whole environment */
    char buf[65536];
    struct timespec w0, w1;
    clock_gettime(CLOCK_MONOTONIC, &w0);
    for (long i = 0; i < n; i++) {
        int fd[2];
        if (pipe2(fd, 0) != 0) { perror("pipe"); return 1; }
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, fd[1], 1);
        posix_spawn_file_actions_addclose(&fa, fd[0]);
        posix_spawn_file_actions_addclose(&fa, fd[1]);
        pid_t pid;
        int e = posix_spawn(&pid, argv[2], &fa, NULL, args, env);
        posix_spawn_file_actions_destroy(&fa);
        close(fd[1]);
        if (e != 0) { fprintf(stderr, "posix_spawn %s: error %d\n", argv[2], e); return 1; }
        while (read(fd[0], buf, sizeof buf) > 0) {}
        close(fd[0]);
        int st;
        if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "%s failed\n", argv[2]);
            return 1;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &w1);
    struct rusage self, kids;
    getrusage(RUSAGE_SELF, &self);
    getrusage(RUSAGE_CHILDREN, &kids);
    double s = tv(self.ru_utime) + tv(self.ru_stime), c = tv(kids.ru_utime) + tv(kids.ru_stime);
    double wall = (w1.tv_sec - w0.tv_sec) * 1e6 + (w1.tv_nsec - w0.tv_nsec) / 1e3;
    printf("FLOOR runs=%ld cpu_us=%.1f spawner_us=%.1f child_us=%.1f wall_us=%.1f\n", n, (s + c) / n, s / n, c / n, wall / n);
    return 0;
}
