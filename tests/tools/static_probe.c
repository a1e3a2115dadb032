/* static_probe.c - a program the Makefile links statically (-static and
 * -static-pie): LD_PRELOAD cannot reach it, and the ELF preflight
 * (hooks/elf_inspect.c) must refuse it. */
#include <stdio.h>

int main(int argc, char **argv)
{
    printf("%s: %d arguments\n", argv[0], argc - 1);
    return 0;
}
