/* test_check_signals.c — `bench check`'s child runs die with it (issue 21). Starts `bench check`
 * (its first child is `bench replay` over the golden cases, on every build), waits for that child
 * to run, freezes it (SIGSTOP: it cannot finish first, whatever the machine's speed), sends SIGNAL
 * to the check and asserts: the check ended by SIGNAL; the child died of a signal within 10 s;
 * for the signals the check can catch (HUP, INT, TERM), its temporary folder
 * ($TMPDIR/tandem-check-*) was removed and the interruption was said.
 * This process is a child subreaper: an orphaned child comes to it, so it can tell how the child
 * died, and the child's process group is not orphaned by the check's death (an orphaned group
 * with a stopped member gets SIGHUP + SIGCONT from the kernel, which would kill a frozen child
 * with no help from bench check).
 * usage: test_check_signals BENCH EXPECTATIONS WORKDIR HUP|INT|TERM|KILL */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void nap_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

// A process's parent and state letter from /proc/PID/stat; false when there is no such process.
static bool proc_stat(pid_t pid, pid_t *ppid, char *state) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');  // the command name may hold spaces and parentheses
    int pp = 0;
    if (!p || sscanf(p + 1, " %c %d", state, &pp) != 2) return false;
    *ppid = (pid_t)pp;
    return true;
}

// Whether PID runs `bench replay ...` (after its exec: its parent-death signal is set by then).
static bool is_replay(pid_t pid) {
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return false;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return false;
    buf[n] = '\0';
    return !strcmp(buf, "bench") && (size_t)n > 6 && !strcmp(buf + 6, "replay");
}

// A child of PARENT that runs bench replay, or 0.
static pid_t find_replay_child(pid_t parent) {
    DIR *d = opendir("/proc");
    pid_t found = 0;
    struct dirent *e;
    while (d && !found && (e = readdir(d))) {
        pid_t pid = (pid_t)atoi(e->d_name), pp;
        char st;
        if (pid > 0 && proc_stat(pid, &pp, &st) && pp == parent && is_replay(pid)) found = pid;
    }
    if (d) closedir(d);
    return found;
}

static int signal_number(const char *name) {
    static const struct {
        const char *name;
        int sig;
    } t[] = {{"HUP", SIGHUP}, {"INT", SIGINT}, {"TERM", SIGTERM}, {"KILL", SIGKILL}};
    for (size_t i = 0; i < sizeof t / sizeof *t; i++)
        if (!strcmp(name, t[i].name)) return t[i].sig;
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 5 || !signal_number(argv[4])) {
        fprintf(stderr, "usage: test_check_signals BENCH EXPECTATIONS WORKDIR HUP|INT|TERM|KILL\n");
        return 2;
    }
    const char *bench = argv[1], *expect = argv[2], *work = argv[3];
    int sig = signal_number(argv[4]);
    char tmp[3000], out[3000], cmd[7000];
    snprintf(tmp, sizeof tmp, "%s/tmp", work);
    snprintf(out, sizeof out, "%s/out.txt", work);
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", work, tmp);
    if (system(cmd) != 0) return 2;
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
        perror("PR_SET_CHILD_SUBREAPER");
        return 2;
    }
    setenv("TMPDIR", tmp, 1);
    signal(SIGINT, SIG_DFL);  // a background job of a shell has them ignored: bench keeps that
    signal(SIGHUP, SIG_DFL);

    pid_t check = 0, child = 0;
    for (int attempt = 1; attempt <= 20 && !child; attempt++) {
        fflush(stdout);
        check = fork();
        if (check < 0) return 2;
        if (check == 0) {
            int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (fd >= 0) {
                dup2(fd, 1);
                dup2(fd, 2);
            }
            execl(bench, "bench", "check", "--expect", expect, (char *)NULL);
            _exit(127);
        }
        for (int i = 0; i < 20000 && !child; i++) {  // up to about 20 s for it to start
            pid_t c = find_replay_child(check);
            char st;
            pid_t pp;
            if (c && kill(c, SIGSTOP) == 0 && proc_stat(c, &pp, &st)) {
                for (int k = 0; k < 100 && st != 'T' && st != 'Z'; k++) {
                    nap_ms(1);
                    proc_stat(c, &pp, &st);
                }
                if (st == 'T' && pp == check)
                    child = c;  // frozen while it ran
                else
                    kill(c, SIGCONT);
                break;
            }
            if (waitpid(check, NULL, WNOHANG) == check) {
                check = 0;
                break;
            }
            nap_ms(1);
        }
        if (!child) {  // it finished before it was caught: again
            if (check) waitpid(check, NULL, 0);
            while (waitpid(-1, NULL, WNOHANG) > 0) {
            }
            snprintf(cmd, sizeof cmd, "rm -rf '%s'/*", tmp);
            if (system(cmd) != 0) return 2;
        }
    }
    if (!child) {
        printf("FAIL: never caught bench check's child running\n");
        return 1;
    }
    printf("bench check %d, its child bench replay %d (stopped): sending SIG%s\n", (int)check,
           (int)child, argv[4]);
    fflush(stdout);
    kill(check, sig);
    int status = 0, fail = 0;
    waitpid(check, &status, 0);
    if (!WIFSIGNALED(status) || WTERMSIG(status) != sig) {
        printf("FAIL: bench check ended with status 0x%x, not by SIG%s\n", status, argv[4]);
        fail = 1;
    }
    // The child: reaped by bench check (gone), or orphaned to this subreaper (wait for it).
    bool gone = false;
    int cstatus = 0;
    for (int i = 0; i < 1000 && !gone; i++) {  // up to about 10 s
        pid_t r = waitpid(child, &cstatus, WNOHANG);
        if (r == child) {
            gone = true;
            if (!WIFSIGNALED(cstatus)) {
                printf("FAIL: the child was not killed: status 0x%x\n", cstatus);
                fail = 1;
            }
        } else if (r < 0 && errno == ECHILD) {  // not ours: bench check reaped it
            gone = kill(child, 0) != 0;
        }
        if (!gone) nap_ms(10);
    }
    if (!gone) {
        printf("FAIL: the child %d outlived bench check\n", (int)child);
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
        fail = 1;
    }
    FILE *f = fopen(out, "r");
    char line[2048];
    bool said = false;
    char want[64];
    snprintf(want, sizeof want, "interrupted by signal %d", sig);
    while (f && fgets(line, sizeof line, f)) {
        fputs(line, stdout);
        said = said || strstr(line, want);
    }
    if (f) fclose(f);
    if (sig != SIGKILL) {
        DIR *d = opendir(tmp);
        struct dirent *e;
        while (d && (e = readdir(d)))
            if (e->d_name[0] != '.') {
                printf("FAIL: the temporary folder is left: %s/%s\n", tmp, e->d_name);
                fail = 1;
            }
        if (d) closedir(d);
        if (!said) {
            printf("FAIL: bench check did not say '%s'\n", want);
            fail = 1;
        }
    }
    if (!fail) printf("ok: SIG%s: the child is gone\n", argv[4]);
    return fail;
}
