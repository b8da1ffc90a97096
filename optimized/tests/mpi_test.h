/* optimized/tests/mpi_test.h — start and end of a test program that runs alone (one
 * rank, no MPI) or under mpirun (every rank checks; the worst result is every rank's). */
#ifndef OPT_MPI_TEST_H
#define OPT_MPI_TEST_H

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/test.h"

/* 1 when started by mpirun (MPI initialised), 0 alone; -1 if MPI_Init failed. */
static inline int t_mpi_start(void) {
    if (!getenv("OMPI_COMM_WORLD_SIZE")) return 0;
    if (MPI_Init(NULL, NULL) != MPI_SUCCESS) { fprintf(stderr, "MPI_Init failed\n"); return -1; }
    return 1;
}

/* t_finish(), combined over the ranks (worst) when use_mpi; finalises MPI. */
static inline int t_mpi_finish(int use_mpi) {
    int rc = t_finish();
    if (!use_mpi) return rc;
    int worst = rc;
    MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return worst;
}

#endif
