/* fork_safety.h - every lock of the library across fork(2) (fork_safety.c). */
#ifndef ADAPTSHIM_FORK_SAFETY_H
#define ADAPTSHIM_FORK_SAFETY_H

/* Registers the pthread_atfork handlers, once, in a configured process
 * (shim_initialize): before a fork every lock the library owns is taken in
 * one order, after it the parent gives them back and the child makes its
 * private ones anew. */
void shim_fork_safety_install(void);

/* The hooks of files that have no header of their own. */
/* io_mmap.c: the table of the shim's anonymous view mappings. */
void shim_mappings_fork_prepare(void);
void shim_mappings_fork_parent(void);
void shim_mappings_fork_child(void);
/* mpi_requests.c: the outstanding gradient Iallreduces. */
void shim_mpi_requests_fork_prepare(void);
void shim_mpi_requests_fork_parent(void);
void shim_mpi_requests_fork_child(void);

#endif
