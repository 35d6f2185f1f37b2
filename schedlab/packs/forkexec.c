/*
 * forkexec: fork+exec+exit latency, standing in for LMBench's lat_proc exec.
 *
 * Usage: forkexec [-n ITERATIONS] [-w WARMUP]
 *        forkexec --exit           (the helper: exits 0 at once, like /bin/true)
 *
 * Each iteration: fork(); the child execs this same binary with "--exit",
 * which returns from main immediately; the parent waits for it. The time from
 * before fork() to after waitpid() returns is one sample (CLOCK_MONOTONIC).
 * WARMUP iterations are run first and not counted. One line is printed:
 *
 *   forkexec: iterations=N median_us=X mean_us=X min_us=X p95_us=X max_us=X
 *
 * Exit status 0 on success, 1 on a failed fork/exec/wait (message on stderr).
 * Build: cc -O2 -o forkexec forkexec.c   (add -static for a static binary)
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static int one(const char *self)
{
	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "forkexec: fork: %s\n", strerror(errno));
		return -1;
	}
	if (pid == 0) {
		char *argv[] = {(char *)self, "--exit", NULL};
		char *envp[] = {NULL};
		execve(self, argv, envp);
		_exit(127);
	}
	int status;
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			fprintf(stderr, "forkexec: waitpid: %s\n", strerror(errno));
			return -1;
		}
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "forkexec: helper %s failed (status %d)\n", self, status);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	long n = 1000, warm = 50;
	int i;

	if (argc == 2 && strcmp(argv[1], "--exit") == 0)
		return 0;
	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
			n = strtol(argv[++i], NULL, 10);
		else if (strcmp(argv[i], "-w") == 0 && i + 1 < argc)
			warm = strtol(argv[++i], NULL, 10);
		else {
			fprintf(stderr, "usage: %s [-n ITERATIONS] [-w WARMUP]\n", argv[0]);
			return 2;
		}
	}
	if (n < 1 || warm < 0) {
		fprintf(stderr, "forkexec: need ITERATIONS >= 1 and WARMUP >= 0\n");
		return 2;
	}

	/* exec by absolute path: no PATH search in the timed loop */
	char self[4096];
	ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
	if (len < 0) {
		if (strlen(argv[0]) >= sizeof self)
			return 2;
		strcpy(self, argv[0]);
	} else {
		self[len] = '\0';
	}

	double *t = malloc(sizeof(double) * n);
	if (!t)
		return 1;
	for (i = 0; i < warm; i++)
		if (one(self))
			return 1;
	double sum = 0;
	for (i = 0; i < n; i++) {
		double s = now_us();
		if (one(self))
			return 1;
		t[i] = now_us() - s;
		sum += t[i];
	}
	qsort(t, n, sizeof(double), cmp);
	double median = n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
	long p95 = (long)(0.95 * (n - 1) + 0.5);
	printf("forkexec: iterations=%ld median_us=%.3f mean_us=%.3f min_us=%.3f p95_us=%.3f max_us=%.3f\n",
	       n, median, sum / n, t[0], t[p95], t[n - 1]);
	free(t);
	return 0;
}
