/* mpi_requests.c - gradient all-reduces posted with MPI_Iallreduce and
 * completed or freed in every way MPI allows (tests/integration/test_mpi.c).
 *
 *   mpi_requests HOW STEPS [--pmpi] [--real]
 *
 * Each step posts two gradient-sized all-reduces (2048 elements, MPI_SUM),
 * finishes their requests as HOW says, then calls MPI_Barrier, which ends
 * the step for the shim.  HOW: wait, waitall, waitany, waitsome, test,
 * testall, testany, testsome (each test call repeated until done),
 * request_free (MPI_Request_get_status until it is done, which leaves the
 * request allocated, then MPI_Request_free: Open MPI refuses to free an
 * active collective's request), many (300 all-reduces per step, then one
 * MPI_Waitall).
 * --pmpi: every MPI call by its PMPI_ name, as Fortran's bindings call them.
 * --real: the elements are MPI_REAL (Fortran's REAL) instead of MPI_FLOAT.
 *
 * Output on rank 0: "done STEPS".  MPI errors abort (the default handler). */
#include <mpi.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ELEMENTS 2048
#define MANY 300

static bool use_pmpi;

/* The same MPI function by its MPI_ or its PMPI_ name. */
#define CALL(name) (use_pmpi ? PMPI_##name : MPI_##name)

static void finish(const char *how, int count, MPI_Request *requests)
{
    if (strcmp(how, "wait") == 0) {
        for (int i = 0; i < count; i++)
            CALL(Wait)(&requests[i], MPI_STATUS_IGNORE);
    } else if (strcmp(how, "waitall") == 0 || strcmp(how, "many") == 0) {
        CALL(Waitall)(count, requests, MPI_STATUSES_IGNORE);
    } else if (strcmp(how, "waitany") == 0) {
        for (int done = 0; done < count; done++) {
            int index;
            CALL(Waitany)(count, requests, &index, MPI_STATUS_IGNORE);
        }
    } else if (strcmp(how, "waitsome") == 0) {
        int indices[MANY];
        for (int done = 0; done < count;) {
            int completed;
            CALL(Waitsome)(count, requests, &completed, indices, MPI_STATUSES_IGNORE);
            done += completed;
        }
    } else if (strcmp(how, "test") == 0) {
        for (int i = 0; i < count; i++)
            for (int flag = 0; !flag;)
                CALL(Test)(&requests[i], &flag, MPI_STATUS_IGNORE);
    } else if (strcmp(how, "testall") == 0) {
        for (int flag = 0; !flag;)
            CALL(Testall)(count, requests, &flag, MPI_STATUSES_IGNORE);
    } else if (strcmp(how, "testany") == 0) {
        for (int done = 0; done < count;) {
            int index, flag;
            CALL(Testany)(count, requests, &index, &flag, MPI_STATUS_IGNORE);
            done += flag && index != MPI_UNDEFINED;
        }
    } else if (strcmp(how, "testsome") == 0) {
        int indices[MANY];
        for (int done = 0; done < count;) {
            int completed;
            CALL(Testsome)(count, requests, &completed, indices, MPI_STATUSES_IGNORE);
            done += completed;
        }
    } else {   /* request_free: once MPI_Request_get_status says it is done */
        for (int i = 0; i < count; i++) {
            for (int flag = 0; !flag;)
                CALL(Request_get_status)(requests[i], &flag, MPI_STATUS_IGNORE);
            CALL(Request_free)(&requests[i]);
        }
    }
}

int main(int argc, char **argv)
{
    static const char *const ways[] = {"wait", "waitall", "waitany", "waitsome", "test",
                                       "testall", "testany", "testsome", "request_free",
                                       "many"};
    bool known = false;
    for (size_t i = 0; argc >= 3 && i < sizeof ways / sizeof ways[0]; i++)
        known |= strcmp(argv[1], ways[i]) == 0;
    int steps = argc >= 3 ? atoi(argv[2]) : 0;
    bool real = false;
    for (int i = 3; i < argc; i++) {
        if (strcmp(argv[i], "--pmpi") == 0)
            use_pmpi = true;
        else if (strcmp(argv[i], "--real") == 0)
            real = true;
        else
            known = false;
    }
    if (!known || steps <= 0) {
        fprintf(stderr, "usage: mpi_requests wait|waitall|waitany|waitsome|test|testall|"
                        "testany|testsome|request_free|many STEPS [--pmpi] [--real]\n");
        return 2;
    }
    const char *how = argv[1];
    CALL(Init)(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int per_step = strcmp(how, "many") == 0 ? MANY : 2;
    int buffers = per_step;
    float *send = malloc((size_t)buffers * ELEMENTS * sizeof *send);
    float *receive = malloc((size_t)buffers * ELEMENTS * sizeof *receive);
    MPI_Request *requests = malloc((size_t)per_step * sizeof *requests);
    if (send == NULL || receive == NULL || requests == NULL)
        return 1;
    for (size_t i = 0; i < (size_t)buffers * ELEMENTS; i++)
        send[i] = (float)((i % 17) + rank) * 0.01f;
    MPI_Datatype type = real ? MPI_REAL : MPI_FLOAT;
    for (int step = 0; step < steps; step++) {
        for (int piece = 0; piece < per_step; piece++)
            CALL(Iallreduce)(send + (size_t)piece * ELEMENTS, receive + (size_t)piece * ELEMENTS,
                             ELEMENTS, type, MPI_SUM, MPI_COMM_WORLD, &requests[piece]);
        finish(how, per_step, requests);
        CALL(Barrier)(MPI_COMM_WORLD);
    }
    CALL(Barrier)(MPI_COMM_WORLD);
    if (rank == 0)
        printf("done %d\n", steps);
    fflush(stdout);
    CALL(Finalize)();
    free(send);
    free(receive);
    free(requests);
    return 0;
}
