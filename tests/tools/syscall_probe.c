/* syscall_probe.c - reads a file through a raw syscall(2), which no preload
 * sees: the ELF preflight (hooks/elf_inspect.c) must warn about it.
 * Usage: syscall_probe FILE; prints the number of bytes read. */
#include <fcntl.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s FILE\n", argv[0]);
        return 2;
    }
    int fd = open(argv[1], O_RDONLY);
    if (fd < 0) {
        perror(argv[1]);
        return 1;
    }
    char buffer[4096];
    long total = 0;
    long count;
    while ((count = syscall(SYS_read, fd, buffer, sizeof buffer)) > 0)
        total += count;
    close(fd);
    if (count < 0) {
        perror(argv[1]);
        return 1;
    }
    printf("%ld\n", total);
    return 0;
}
