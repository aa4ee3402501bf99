"""MPI example: every rank contributes its rank number; the allreduce sum proves all ranks are connected."""

from __future__ import annotations

import socket
import sys

from mpi4py import MPI


def main() -> None:
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    if rank == 0:  # which MPI the ranks run on: mpi4py loads the library of the environment it is installed in
        sys.stdout.write(f"MPI library: {MPI.Get_library_version().splitlines()[0].strip()}\n")
        sys.stdout.flush()
    total = comm.allreduce(rank, op=MPI.SUM)
    # One write per line: with unbuffered output, print() writes text and newline separately, and mpirun may
    # interleave another rank's line between them.
    sys.stdout.write(f"rank {rank}/{size} on {socket.gethostname()}: sum of ranks = {total}\n")
    sys.stdout.flush()
    if rank == 0 and total != size * (size - 1) // 2:
        raise SystemExit(f"allreduce returned {total}, expected {size * (size - 1) // 2}")


if __name__ == "__main__":
    main()
