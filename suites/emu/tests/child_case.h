/* child_case.h — how the emulator's tests run a launch that must fail: this program again, with
 * --case NAME, in a child process whose stderr is captured (the report, then the sticky error),
 * so that a hang is the child's alarm and the sticky error does not leak into the other checks.
 * Each test checks the status and the text itself. */
#ifndef TANDEM_EMU_TESTS_CHILD_CASE_H
#define TANDEM_EMU_TESTS_CHILD_CASE_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

// Runs `/proc/self/exe --case name` (argv[0] prog) with TANDEM_EMU_ABORT unset; *err gets its
// stderr. Returns waitpid's status.
static int child_case_run(const char *prog, const char *name, std::string *err) {
    int fd[2];
    if (pipe(fd) != 0) {
        perror("pipe");
        exit(1);
    }
    fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 2);
        close(fd[0]);
        close(fd[1]);
        unsetenv("TANDEM_EMU_ABORT");   // the report, then the sticky error: what is checked
        execl("/proc/self/exe", prog, "--case", name, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    char buf[4096];
    ssize_t k;
    while ((k = read(fd[0], buf, sizeof buf)) > 0 || (k < 0 && errno == EINTR))
        if (k > 0) err->append(buf, (size_t)k);
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return status;
}

#endif
