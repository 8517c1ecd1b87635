/* Fortran programs under Open MPI. Its Fortran bindings (mpif.h, `use mpi`,
 * `use mpi_f08`) call PMPI_* directly, so the C entry points never see
 * them: we export the Fortran symbols themselves, in every name mangling
 * (mpi_allreduce_, mpi_allreduce__, mpi_allreduce, MPI_ALLREDUCE) and the
 * mpi_f08 ones (mpi_allreduce_f08_), turn Fortran handles and MPI_IN_PLACE
 * into C's, and hand what HCOMM does not take to the library's own PMPI
 * Fortran binding with the arguments untouched.
 *
 * MPICH's mpif.h and `use mpi` bindings, and the buffer-carrying ones of
 * `use mpi_f08`, call the C MPI_* names (after converting MPI_IN_PLACE),
 * which interpose_coll.c catches; only its mpi_f08 MPI_Init,
 * MPI_Init_thread and MPI_Barrier call PMPI_* and are exported here. */
#include "compat_mpi/interpose.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#if defined(OPEN_MPI) || defined(MPICH)

typedef MPI_Fint F;

static void set_ierr(F *ierr, int rc) {
    if (ierr) *ierr = (F)rc; /* optional in mpi_f08 */
}

/* The library's PMPI Fortran binding, found once. */
static void *binding(const char *name, _Atomic(void *) *slot) {
    void *fn = atomic_load_explicit(slot, memory_order_acquire);
    if (!fn) {
        fn = dlsym(RTLD_DEFAULT, name);
        atomic_store_explicit(slot, fn, memory_order_release);
    }
    return fn;
}

typedef void (*init_t)(F *);
typedef void (*init_thread_t)(F *, F *, F *);
typedef void (*barrier_t)(F *, F *);

/* MPI_Init from Fortran: the binding calls PMPI_Init, so HCOMM starts
 * here. name: the library's own binding. */
static void init_with(const char *name, _Atomic(void *) *slot, F *ierr) {
    init_t next = binding(name, slot);
    if (next)
        next(ierr);
    else
        set_ierr(ierr, PMPI_Init(NULL, NULL));
    hcmpi_after_init();
}

static void init_thread_with(const char *name, _Atomic(void *) *slot,
                             F *required, F *provided, F *ierr) {
    init_thread_t next = binding(name, slot);
    if (next) {
        next(required, provided, ierr);
    } else {
        int p = 0;
        set_ierr(ierr, PMPI_Init_thread(NULL, NULL, *required, &p));
        *provided = p;
    }
    hcmpi_after_init();
}

static void barrier_with(const char *name, _Atomic(void *) *slot, F *comm,
                         F *ierr) {
    int rc;
    MPI_Comm c = PMPI_Comm_f2c(*comm);
    if (hcmpi_try_barrier(c, &rc)) {
        set_ierr(ierr, rc);
        return;
    }
    barrier_t next = binding(name, slot);
    if (next)
        next(comm, ierr);
    else
        set_ierr(ierr, PMPI_Barrier(c));
}

#if defined(OPEN_MPI)

/* Fortran's MPI_IN_PLACE and MPI_BOTTOM are the addresses of variables
 * (common blocks, or bind(C) variables in mpi_f08); the program, the MPI
 * library and we all resolve them to the same global definition. */
static const void *in_place[4], *bottom[4];
static pthread_once_t resolve_once = PTHREAD_ONCE_INIT;

static void resolve(void) {
    static const char *ip[4] = {"mpi_fortran_in_place_", "mpi_fortran_in_place",
                                "mpi_fortran_in_place__",
                                "MPI_FORTRAN_IN_PLACE"};
    static const char *bt[4] = {"mpi_fortran_bottom_", "mpi_fortran_bottom",
                                "mpi_fortran_bottom__", "MPI_FORTRAN_BOTTOM"};
    for (int i = 0; i < 4; i++) {
        in_place[i] = dlsym(RTLD_DEFAULT, ip[i]);
        bottom[i] = dlsym(RTLD_DEFAULT, bt[i]);
    }
}

/* C's view of a Fortran buffer argument. MPI_BOTTOM (absolute addresses
 * in a derived datatype) becomes C's, which the packing of
 * interpose_dtype.c reads from as MPI does: going to MPI on the rank that
 * passes it alone would leave its peers in HCOMM. */
static void *c_buf(void *buf) {
    pthread_once(&resolve_once, resolve);
    for (int i = 0; i < 4 && buf; i++) {
        if (buf == in_place[i]) return MPI_IN_PLACE;
        if (buf == bottom[i]) return MPI_BOTTOM;
    }
    return buf;
}

#define STRIP(...) __VA_ARGS__
#define PMPI_NAME(base, f08) ((f08) ? "pmpi_" base "_f08_" : "pmpi_" base "_")

/* Exports impl as the four manglings of a Fortran 77 name. */
#define F77_NAMES(lower, upper, impl, proto)                                   \
    HCMPI_EXPORT void lower proto __attribute__((alias(#impl)));               \
    HCMPI_EXPORT void lower##_ proto __attribute__((alias(#impl)));            \
    HCMPI_EXPORT void lower##__ proto __attribute__((alias(#impl)));           \
    HCMPI_EXPORT void upper proto __attribute__((alias(#impl)));

/* f77 and f08 entry points of one call: the same arguments (mpi_f08 passes
 * a handle type by reference, as a pointer to its integer), but a
 * different binding to fall back to. */
#define ENTRY_POINTS(name, lower, upper, proto, args)                          \
    static void f77_##name proto {                                             \
        name##_impl(STRIP args, 0);                                            \
    }                                                                          \
    static void f08_##name proto {                                             \
        name##_impl(STRIP args, 1);                                            \
    }                                                                          \
    F77_NAMES(lower, upper, f77_##name, proto)                                 \
    HCMPI_EXPORT void lower##_f08_ proto __attribute__((alias("f08_" #name)));

/* --- the collectives -------------------------------------------------------
 */

typedef void (*reduce_like_t)(void *, void *, F *, F *, F *, F *, F *);

static void allreduce_impl(void *s, void *r, F *n, F *dt, F *op, F *comm,
                           F *ierr, int f08) {
    static _Atomic(void *) slot[2];
    int rc;
    const void *cs = c_buf(s);
    void *cr = c_buf(r);
    MPI_Datatype t = PMPI_Type_f2c(*dt);
    MPI_Op o = PMPI_Op_f2c(*op);
    MPI_Comm c = PMPI_Comm_f2c(*comm);
    if (hcmpi_try_allreduce(cs, cr, *n, t, o, c, &rc)) {
        set_ierr(ierr, rc);
        return;
    }
    reduce_like_t next = binding(PMPI_NAME("allreduce", f08), &slot[f08]);
    if (next)
        next(s, r, n, dt, op, comm, ierr);
    else
        set_ierr(ierr, PMPI_Allreduce(cs, cr, *n, t, o, c));
}
ENTRY_POINTS(allreduce, mpi_allreduce, MPI_ALLREDUCE,
             (void *s, void *r, F *n, F *dt, F *op, F *comm, F *ierr),
             (s, r, n, dt, op, comm, ierr))

typedef void (*iallreduce_t)(void *, void *, F *, F *, F *, F *, F *, F *);

static void iallreduce_impl(void *s, void *r, F *n, F *dt, F *op, F *comm,
                            F *req, F *ierr, int f08) {
    static _Atomic(void *) slot[2];
    int rc;
    MPI_Request creq = MPI_REQUEST_NULL;
    const void *cs = c_buf(s);
    void *cr = c_buf(r);
    MPI_Datatype t = PMPI_Type_f2c(*dt);
    MPI_Op o = PMPI_Op_f2c(*op);
    MPI_Comm c = PMPI_Comm_f2c(*comm);
    if (hcmpi_try_iallreduce(cs, cr, *n, t, o, c, &creq, &rc)) {
        *req = PMPI_Request_c2f(creq);
        set_ierr(ierr, rc);
        return;
    }
    iallreduce_t next = binding(PMPI_NAME("iallreduce", f08), &slot[f08]);
    if (next) {
        next(s, r, n, dt, op, comm, req, ierr);
        return;
    }
    set_ierr(ierr, PMPI_Iallreduce(cs, cr, *n, t, o, c, &creq));
    *req = PMPI_Request_c2f(creq);
}
ENTRY_POINTS(iallreduce, mpi_iallreduce, MPI_IALLREDUCE,
             (void *s, void *r, F *n, F *dt, F *op, F *comm, F *req, F *ierr),
             (s, r, n, dt, op, comm, req, ierr))

/* allgather and alltoall share a signature. */
typedef void (*gather_like_t)(void *, F *, F *, void *, F *, F *, F *, F *);
typedef int (*try_gather_like_t)(const void *, int, MPI_Datatype, void *, int,
                                 MPI_Datatype, MPI_Comm, int *);
typedef int (*c_gather_like_t)(const void *, int, MPI_Datatype, void *, int,
                               MPI_Datatype, MPI_Comm);

static void gather_like(try_gather_like_t try_fn, c_gather_like_t c_fn,
                        gather_like_t next, void *s, F *sn, F *st, void *r,
                        F *rn, F *rt, F *comm, F *ierr) {
    int rc;
    const void *cs = c_buf(s);
    void *cr = c_buf(r);
    MPI_Datatype cst = PMPI_Type_f2c(*st), crt = PMPI_Type_f2c(*rt);
    MPI_Comm c = PMPI_Comm_f2c(*comm);
    if (try_fn(cs, *sn, cst, cr, *rn, crt, c, &rc)) {
        set_ierr(ierr, rc);
        return;
    }
    if (next)
        next(s, sn, st, r, rn, rt, comm, ierr);
    else
        set_ierr(ierr, c_fn(cs, *sn, cst, cr, *rn, crt, c));
}

static void allgather_impl(void *s, F *sn, F *st, void *r, F *rn, F *rt,
                           F *comm, F *ierr, int f08) {
    static _Atomic(void *) slot[2];
    gather_like(hcmpi_try_allgather, PMPI_Allgather,
                binding(PMPI_NAME("allgather", f08), &slot[f08]), s, sn, st, r,
                rn, rt, comm, ierr);
}
ENTRY_POINTS(allgather, mpi_allgather, MPI_ALLGATHER,
             (void *s, F *sn, F *st, void *r, F *rn, F *rt, F *comm, F *ierr),
             (s, sn, st, r, rn, rt, comm, ierr))

static void alltoall_impl(void *s, F *sn, F *st, void *r, F *rn, F *rt, F *comm,
                          F *ierr, int f08) {
    static _Atomic(void *) slot[2];
    gather_like(hcmpi_try_alltoall, PMPI_Alltoall,
                binding(PMPI_NAME("alltoall", f08), &slot[f08]), s, sn, st, r,
                rn, rt, comm, ierr);
}
ENTRY_POINTS(alltoall, mpi_alltoall, MPI_ALLTOALL,
             (void *s, F *sn, F *st, void *r, F *rn, F *rt, F *comm, F *ierr),
             (s, sn, st, r, rn, rt, comm, ierr))

typedef void (*bcast_t)(void *, F *, F *, F *, F *, F *);

static void bcast_impl(void *buf, F *n, F *dt, F *root, F *comm, F *ierr,
                       int f08) {
    static _Atomic(void *) slot[2];
    int rc;
    void *cb = c_buf(buf);
    MPI_Datatype t = PMPI_Type_f2c(*dt);
    MPI_Comm c = PMPI_Comm_f2c(*comm);
    if (hcmpi_try_bcast(cb, *n, t, *root, c, &rc)) {
        set_ierr(ierr, rc);
        return;
    }
    bcast_t next = binding(PMPI_NAME("bcast", f08), &slot[f08]);
    if (next)
        next(buf, n, dt, root, comm, ierr);
    else
        set_ierr(ierr, PMPI_Bcast(cb, *n, t, *root, c));
}
ENTRY_POINTS(bcast, mpi_bcast, MPI_BCAST,
             (void *buf, F *n, F *dt, F *root, F *comm, F *ierr),
             (buf, n, dt, root, comm, ierr))

typedef void (*reduce_t)(void *, void *, F *, F *, F *, F *, F *, F *);

static void reduce_impl(void *s, void *r, F *n, F *dt, F *op, F *root, F *comm,
                        F *ierr, int f08) {
    static _Atomic(void *) slot[2];
    int rc;
    const void *cs = c_buf(s);
    void *cr = c_buf(r);
    MPI_Datatype t = PMPI_Type_f2c(*dt);
    MPI_Op o = PMPI_Op_f2c(*op);
    MPI_Comm c = PMPI_Comm_f2c(*comm);
    if (hcmpi_try_reduce(cs, cr, *n, t, o, *root, c, &rc)) {
        set_ierr(ierr, rc);
        return;
    }
    reduce_t next = binding(PMPI_NAME("reduce", f08), &slot[f08]);
    if (next)
        next(s, r, n, dt, op, root, comm, ierr);
    else
        set_ierr(ierr, PMPI_Reduce(cs, cr, *n, t, o, *root, c));
}
ENTRY_POINTS(reduce, mpi_reduce, MPI_REDUCE,
             (void *s, void *r, F *n, F *dt, F *op, F *root, F *comm, F *ierr),
             (s, r, n, dt, op, root, comm, ierr))

static void rsb_impl(void *s, void *r, F *n, F *dt, F *op, F *comm, F *ierr,
                     int f08) {
    static _Atomic(void *) slot[2];
    int rc;
    const void *cs = c_buf(s);
    void *cr = c_buf(r);
    MPI_Datatype t = PMPI_Type_f2c(*dt);
    MPI_Op o = PMPI_Op_f2c(*op);
    MPI_Comm c = PMPI_Comm_f2c(*comm);
    if (hcmpi_try_reduce_scatter_block(cs, cr, *n, t, o, c, &rc)) {
        set_ierr(ierr, rc);
        return;
    }
    reduce_like_t next =
        binding(PMPI_NAME("reduce_scatter_block", f08), &slot[f08]);
    if (next)
        next(s, r, n, dt, op, comm, ierr);
    else
        set_ierr(ierr, PMPI_Reduce_scatter_block(cs, cr, *n, t, o, c));
}
ENTRY_POINTS(rsb, mpi_reduce_scatter_block, MPI_REDUCE_SCATTER_BLOCK,
             (void *s, void *r, F *n, F *dt, F *op, F *comm, F *ierr),
             (s, r, n, dt, op, comm, ierr))

static void barrier_impl(F *comm, F *ierr, int f08) {
    static _Atomic(void *) slot[2];
    barrier_with(PMPI_NAME("barrier", f08), &slot[f08], comm, ierr);
}
ENTRY_POINTS(barrier, mpi_barrier, MPI_BARRIER, (F * comm, F *ierr),
             (comm, ierr))

/* --- gather, scatter, the v-forms and the non-blocking forms ------------
 * Each takes what the C entry point takes, so that a program calling from
 * C on some ranks and from Fortran on others is still taken on all or
 * none. Fortran's count arrays are C's: MPI_Fint is int here. */
_Static_assert(sizeof(F) == sizeof(int), "MPI_Fint arrays read as int");

/* The C request of a taken non-blocking call, handed back as Fortran's. */
static void set_req(F *req, MPI_Request creq) {
    *req = PMPI_Request_c2f(creq);
}

typedef void (*rooted_move_t)(void *, F *, F *, void *, F *, F *, F *, F *,
                              F *);
typedef void (*irooted_move_t)(void *, F *, F *, void *, F *, F *, F *, F *,
                               F *, F *);
typedef int (*try_rooted_move_t)(const void *, int, MPI_Datatype, void *, int,
                                 MPI_Datatype, int, MPI_Comm, MPI_Request *,
                                 int *);

/* gather and scatter, blocking (req NULL) or not */
static void rooted_move(try_rooted_move_t try_fn, const char *base, int f08,
                        _Atomic(void *) *slot, void *s, F *sn, F *st, void *r,
                        F *rn, F *rt, F *root, F *comm, F *req, F *ierr) {
    int rc;
    MPI_Request creq = MPI_REQUEST_NULL;
    const void *cs = c_buf(s);
    void *cr = c_buf(r);
    MPI_Datatype cst = PMPI_Type_f2c(*st), crt = PMPI_Type_f2c(*rt);
    MPI_Comm c = PMPI_Comm_f2c(*comm);
    if (try_fn(cs, *sn, cst, cr, *rn, crt, *root, c, req ? &creq : NULL, &rc)) {
        if (req) set_req(req, creq);
        set_ierr(ierr, rc);
        return;
    }
    char name[64];
    snprintf(name, sizeof(name), "%s%s%s", req ? "pmpi_i" : "pmpi_", base,
             f08 ? "_f08_" : "_");
    void *next = binding(name, slot);
    if (next && req)
        ((irooted_move_t)next)(s, sn, st, r, rn, rt, root, comm, req, ierr);
    else if (next)
        ((rooted_move_t)next)(s, sn, st, r, rn, rt, root, comm, ierr);
    else if (req) {
        int is_gather = try_fn == hcmpi_try_gather;
        set_ierr(ierr, is_gather ? PMPI_Igather(cs, *sn, cst, cr, *rn, crt,
                                                *root, c, &creq)
                                 : PMPI_Iscatter(cs, *sn, cst, cr, *rn, crt,
                                                 *root, c, &creq));
        set_req(req, creq);
    } else {
        set_ierr(ierr,
                 try_fn == hcmpi_try_gather
                     ? PMPI_Gather(cs, *sn, cst, cr, *rn, crt, *root, c)
                     : PMPI_Scatter(cs, *sn, cst, cr, *rn, crt, *root, c));
    }
}

#define ROOTED_MOVE(name, try_fn, lower, upper)                                \
    static void name##_impl(void *s, F *sn, F *st, void *r, F *rn, F *rt,      \
                            F *root, F *comm, F *ierr, int f08) {              \
        static _Atomic(void *) slot[2];                                        \
        rooted_move(try_fn, #name, f08, &slot[f08], s, sn, st, r, rn, rt,      \
                    root, comm, NULL, ierr);                                   \
    }                                                                          \
    ENTRY_POINTS(name, lower, upper,                                           \
                 (void *s, F *sn, F *st, void *r, F *rn, F *rt, F *root,       \
                  F *comm, F *ierr),                                           \
                 (s, sn, st, r, rn, rt, root, comm, ierr))                     \
    static void i##name##_impl(void *s, F *sn, F *st, void *r, F *rn, F *rt,   \
                               F *root, F *comm, F *req, F *ierr, int f08) {   \
        static _Atomic(void *) slot[2];                                        \
        rooted_move(try_fn, #name, f08, &slot[f08], s, sn, st, r, rn, rt,      \
                    root, comm, req, ierr);                                    \
    }                                                                          \
    ENTRY_POINTS(i##name, mpi_i##name, MPI_I##upper,                           \
                 (void *s, F *sn, F *st, void *r, F *rn, F *rt, F *root,       \
                  F *comm, F *req, F *ierr),                                   \
                 (s, sn, st, r, rn, rt, root, comm, req, ierr))

ROOTED_MOVE(gather, hcmpi_try_gather, mpi_gather, GATHER)
ROOTED_MOVE(scatter, hcmpi_try_scatter, mpi_scatter, SCATTER)

static void allgatherv_any(void *s, F *sn, F *st, void *r, F *rc, F *rd, F *rt,
                           F *comm, F *req, F *ierr, int f08) {
    static _Atomic(void *) slot[2][2];
    int rcode;
    MPI_Request creq = MPI_REQUEST_NULL;
    const void *cs = c_buf(s);
    void *cr = c_buf(r);
    MPI_Datatype cst = PMPI_Type_f2c(*st), crt = PMPI_Type_f2c(*rt);
    MPI_Comm c = PMPI_Comm_f2c(*comm);
    const int *crc = (const int *)rc, *crd = (const int *)rd;
    if (hcmpi_try_allgatherv(cs, *sn, cst, cr, crc, crd, crt, c,
                             req ? &creq : NULL, &rcode)) {
        if (req) set_req(req, creq);
        set_ierr(ierr, rcode);
        return;
    }
    void *next = binding(req ? PMPI_NAME("iallgatherv", f08)
                             : PMPI_NAME("allgatherv", f08),
                         &slot[req != NULL][f08]);
    typedef void (*f_t)(void *, F *, F *, void *, F *, F *, F *, F *, F *);
    typedef void (*fi_t)(void *, F *, F *, void *, F *, F *, F *, F *, F *,
                         F *);
    if (next && req)
        ((fi_t)next)(s, sn, st, r, rc, rd, rt, comm, req, ierr);
    else if (next)
        ((f_t)next)(s, sn, st, r, rc, rd, rt, comm, ierr);
    else if (req) {
        set_ierr(ierr,
                 PMPI_Iallgatherv(cs, *sn, cst, cr, crc, crd, crt, c, &creq));
        set_req(req, creq);
    } else {
        set_ierr(ierr, PMPI_Allgatherv(cs, *sn, cst, cr, crc, crd, crt, c));
    }
}

static void allgatherv_impl(void *s, F *sn, F *st, void *r, F *rc, F *rd, F *rt,
                            F *comm, F *ierr, int f08) {
    allgatherv_any(s, sn, st, r, rc, rd, rt, comm, NULL, ierr, f08);
}
ENTRY_POINTS(allgatherv, mpi_allgatherv, MPI_ALLGATHERV,
             (void *s, F *sn, F *st, void *r, F *rc, F *rd, F *rt, F *comm,
              F *ierr),
             (s, sn, st, r, rc, rd, rt, comm, ierr))
static void iallgatherv_impl(void *s, F *sn, F *st, void *r, F *rc, F *rd,
                             F *rt, F *comm, F *req, F *ierr, int f08) {
    allgatherv_any(s, sn, st, r, rc, rd, rt, comm, req, ierr, f08);
}
ENTRY_POINTS(iallgatherv, mpi_iallgatherv, MPI_IALLGATHERV,
             (void *s, F *sn, F *st, void *r, F *rc, F *rd, F *rt, F *comm,
              F *req, F *ierr),
             (s, sn, st, r, rc, rd, rt, comm, req, ierr))

static void alltoallv_any(void *s, F *sc, F *sd, F *st, void *r, F *rc, F *rd,
                          F *rt, F *comm, F *req, F *ierr, int f08) {
    static _Atomic(void *) slot[2][2];
    int rcode;
    MPI_Request creq = MPI_REQUEST_NULL;
    const void *cs = c_buf(s);
    void *cr = c_buf(r);
    MPI_Datatype cst = PMPI_Type_f2c(*st), crt = PMPI_Type_f2c(*rt);
    MPI_Comm c = PMPI_Comm_f2c(*comm);
    const int *csc = (const int *)sc, *csd = (const int *)sd;
    const int *crc = (const int *)rc, *crd = (const int *)rd;
    if (hcmpi_try_alltoallv(cs, csc, csd, cst, cr, crc, crd, crt, c,
                            req ? &creq : NULL, &rcode)) {
        if (req) set_req(req, creq);
        set_ierr(ierr, rcode);
        return;
    }
    void *next = binding(req ? PMPI_NAME("ialltoallv", f08)
                             : PMPI_NAME("alltoallv", f08),
                         &slot[req != NULL][f08]);
    typedef void (*f_t)(void *, F *, F *, F *, void *, F *, F *, F *, F *, F *);
    typedef void (*fi_t)(void *, F *, F *, F *, void *, F *, F *, F *, F *, F *,
                         F *);
    if (next && req)
        ((fi_t)next)(s, sc, sd, st, r, rc, rd, rt, comm, req, ierr);
    else if (next)
        ((f_t)next)(s, sc, sd, st, r, rc, rd, rt, comm, ierr);
    else if (req) {
        set_ierr(ierr, PMPI_Ialltoallv(cs, csc, csd, cst, cr, crc, crd, crt, c,
                                       &creq));
        set_req(req, creq);
    } else {
        set_ierr(ierr, PMPI_Alltoallv(cs, csc, csd, cst, cr, crc, crd, crt, c));
    }
}

static void alltoallv_impl(void *s, F *sc, F *sd, F *st, void *r, F *rc, F *rd,
                           F *rt, F *comm, F *ierr, int f08) {
    alltoallv_any(s, sc, sd, st, r, rc, rd, rt, comm, NULL, ierr, f08);
}
ENTRY_POINTS(alltoallv, mpi_alltoallv, MPI_ALLTOALLV,
             (void *s, F *sc, F *sd, F *st, void *r, F *rc, F *rd, F *rt,
              F *comm, F *ierr),
             (s, sc, sd, st, r, rc, rd, rt, comm, ierr))
static void ialltoallv_impl(void *s, F *sc, F *sd, F *st, void *r, F *rc, F *rd,
                            F *rt, F *comm, F *req, F *ierr, int f08) {
    alltoallv_any(s, sc, sd, st, r, rc, rd, rt, comm, req, ierr, f08);
}
ENTRY_POINTS(ialltoallv, mpi_ialltoallv, MPI_IALLTOALLV,
             (void *s, F *sc, F *sd, F *st, void *r, F *rc, F *rd, F *rt,
              F *comm, F *req, F *ierr),
             (s, sc, sd, st, r, rc, rd, rt, comm, req, ierr))

static void reduce_scatter_any(void *s, void *r, F *rc, F *dt, F *op, F *comm,
                               F *req, F *ierr, int f08) {
    static _Atomic(void *) slot[2][2];
    int rcode;
    MPI_Request creq = MPI_REQUEST_NULL;
    const void *cs = c_buf(s);
    void *cr = c_buf(r);
    MPI_Datatype t = PMPI_Type_f2c(*dt);
    MPI_Op o = PMPI_Op_f2c(*op);
    MPI_Comm c = PMPI_Comm_f2c(*comm);
    const int *crc = (const int *)rc;
    if (hcmpi_try_reduce_scatter(cs, cr, crc, t, o, c, req ? &creq : NULL,
                                 &rcode)) {
        if (req) set_req(req, creq);
        set_ierr(ierr, rcode);
        return;
    }
    void *next = binding(req ? PMPI_NAME("ireduce_scatter", f08)
                             : PMPI_NAME("reduce_scatter", f08),
                         &slot[req != NULL][f08]);
    typedef void (*f_t)(void *, void *, F *, F *, F *, F *, F *);
    typedef void (*fi_t)(void *, void *, F *, F *, F *, F *, F *, F *);
    if (next && req)
        ((fi_t)next)(s, r, rc, dt, op, comm, req, ierr);
    else if (next)
        ((f_t)next)(s, r, rc, dt, op, comm, ierr);
    else if (req) {
        set_ierr(ierr, PMPI_Ireduce_scatter(cs, cr, crc, t, o, c, &creq));
        set_req(req, creq);
    } else {
        set_ierr(ierr, PMPI_Reduce_scatter(cs, cr, crc, t, o, c));
    }
}

static void reduce_scatter_impl(void *s, void *r, F *rc, F *dt, F *op, F *comm,
                                F *ierr, int f08) {
    reduce_scatter_any(s, r, rc, dt, op, comm, NULL, ierr, f08);
}
ENTRY_POINTS(reduce_scatter, mpi_reduce_scatter, MPI_REDUCE_SCATTER,
             (void *s, void *r, F *rc, F *dt, F *op, F *comm, F *ierr),
             (s, r, rc, dt, op, comm, ierr))
static void ireduce_scatter_impl(void *s, void *r, F *rc, F *dt, F *op, F *comm,
                                 F *req, F *ierr, int f08) {
    reduce_scatter_any(s, r, rc, dt, op, comm, req, ierr, f08);
}
ENTRY_POINTS(ireduce_scatter, mpi_ireduce_scatter, MPI_IREDUCE_SCATTER,
             (void *s, void *r, F *rc, F *dt, F *op, F *comm, F *req, F *ierr),
             (s, r, rc, dt, op, comm, req, ierr))

/* The non-blocking forms of the calls taken before: Fortran's arguments
 * plus a request. */
static void ibcast_impl(void *buf, F *n, F *dt, F *root, F *comm, F *req,
                        F *ierr, int f08) {
    static _Atomic(void *) slot[2];
    int rc;
    MPI_Request creq = MPI_REQUEST_NULL;
    void *cb = c_buf(buf);
    MPI_Datatype t = PMPI_Type_f2c(*dt);
    MPI_Comm c = PMPI_Comm_f2c(*comm);
    if (!hcmpi_try_ibcast(cb, *n, t, *root, c, &creq, &rc)) {
        typedef void (*f_t)(void *, F *, F *, F *, F *, F *, F *);
        f_t next = (f_t)binding(PMPI_NAME("ibcast", f08), &slot[f08]);
        if (next) {
            next(buf, n, dt, root, comm, req, ierr);
            return;
        }
        rc = PMPI_Ibcast(cb, *n, t, *root, c, &creq);
    }
    set_req(req, creq);
    set_ierr(ierr, rc);
}
ENTRY_POINTS(ibcast, mpi_ibcast, MPI_IBCAST,
             (void *buf, F *n, F *dt, F *root, F *comm, F *req, F *ierr),
             (buf, n, dt, root, comm, req, ierr))

typedef int (*try_igather_like_t)(const void *, int, MPI_Datatype, void *, int,
                                  MPI_Datatype, MPI_Comm, MPI_Request *, int *);
typedef int (*c_igather_like_t)(const void *, int, MPI_Datatype, void *, int,
                                MPI_Datatype, MPI_Comm, MPI_Request *);
typedef void (*igather_like_t)(void *, F *, F *, void *, F *, F *, F *, F *,
                               F *);

static void igather_like(try_igather_like_t try_fn, c_igather_like_t c_fn,
                         igather_like_t next, void *s, F *sn, F *st, void *r,
                         F *rn, F *rt, F *comm, F *req, F *ierr) {
    int rc;
    MPI_Request creq = MPI_REQUEST_NULL;
    const void *cs = c_buf(s);
    void *cr = c_buf(r);
    MPI_Datatype cst = PMPI_Type_f2c(*st), crt = PMPI_Type_f2c(*rt);
    MPI_Comm c = PMPI_Comm_f2c(*comm);
    if (!try_fn(cs, *sn, cst, cr, *rn, crt, c, &creq, &rc)) {
        if (next) {
            next(s, sn, st, r, rn, rt, comm, req, ierr);
            return;
        }
        rc = c_fn(cs, *sn, cst, cr, *rn, crt, c, &creq);
    }
    set_req(req, creq);
    set_ierr(ierr, rc);
}

static void iallgather_impl(void *s, F *sn, F *st, void *r, F *rn, F *rt,
                            F *comm, F *req, F *ierr, int f08) {
    static _Atomic(void *) slot[2];
    igather_like(hcmpi_try_iallgather, PMPI_Iallgather,
                 binding(PMPI_NAME("iallgather", f08), &slot[f08]), s, sn, st,
                 r, rn, rt, comm, req, ierr);
}
ENTRY_POINTS(iallgather, mpi_iallgather, MPI_IALLGATHER,
             (void *s, F *sn, F *st, void *r, F *rn, F *rt, F *comm, F *req,
              F *ierr),
             (s, sn, st, r, rn, rt, comm, req, ierr))

static void ialltoall_impl(void *s, F *sn, F *st, void *r, F *rn, F *rt,
                           F *comm, F *req, F *ierr, int f08) {
    static _Atomic(void *) slot[2];
    igather_like(hcmpi_try_ialltoall, PMPI_Ialltoall,
                 binding(PMPI_NAME("ialltoall", f08), &slot[f08]), s, sn, st, r,
                 rn, rt, comm, req, ierr);
}
ENTRY_POINTS(ialltoall, mpi_ialltoall, MPI_IALLTOALL,
             (void *s, F *sn, F *st, void *r, F *rn, F *rt, F *comm, F *req,
              F *ierr),
             (s, sn, st, r, rn, rt, comm, req, ierr))

static void ireduce_impl(void *s, void *r, F *n, F *dt, F *op, F *root, F *comm,
                         F *req, F *ierr, int f08) {
    static _Atomic(void *) slot[2];
    int rc;
    MPI_Request creq = MPI_REQUEST_NULL;
    const void *cs = c_buf(s);
    void *cr = c_buf(r);
    MPI_Datatype t = PMPI_Type_f2c(*dt);
    MPI_Op o = PMPI_Op_f2c(*op);
    MPI_Comm c = PMPI_Comm_f2c(*comm);
    if (!hcmpi_try_ireduce(cs, cr, *n, t, o, *root, c, &creq, &rc)) {
        typedef void (*f_t)(void *, void *, F *, F *, F *, F *, F *, F *, F *);
        f_t next = (f_t)binding(PMPI_NAME("ireduce", f08), &slot[f08]);
        if (next) {
            next(s, r, n, dt, op, root, comm, req, ierr);
            return;
        }
        rc = PMPI_Ireduce(cs, cr, *n, t, o, *root, c, &creq);
    }
    set_req(req, creq);
    set_ierr(ierr, rc);
}
ENTRY_POINTS(ireduce, mpi_ireduce, MPI_IREDUCE,
             (void *s, void *r, F *n, F *dt, F *op, F *root, F *comm, F *req,
              F *ierr),
             (s, r, n, dt, op, root, comm, req, ierr))

static void irsb_impl(void *s, void *r, F *n, F *dt, F *op, F *comm, F *req,
                      F *ierr, int f08) {
    static _Atomic(void *) slot[2];
    int rc;
    MPI_Request creq = MPI_REQUEST_NULL;
    const void *cs = c_buf(s);
    void *cr = c_buf(r);
    MPI_Datatype t = PMPI_Type_f2c(*dt);
    MPI_Op o = PMPI_Op_f2c(*op);
    MPI_Comm c = PMPI_Comm_f2c(*comm);
    if (!hcmpi_try_ireduce_scatter_block(cs, cr, *n, t, o, c, &creq, &rc)) {
        typedef void (*f_t)(void *, void *, F *, F *, F *, F *, F *, F *);
        f_t next =
            (f_t)binding(PMPI_NAME("ireduce_scatter_block", f08), &slot[f08]);
        if (next) {
            next(s, r, n, dt, op, comm, req, ierr);
            return;
        }
        rc = PMPI_Ireduce_scatter_block(cs, cr, *n, t, o, c, &creq);
    }
    set_req(req, creq);
    set_ierr(ierr, rc);
}
ENTRY_POINTS(irsb, mpi_ireduce_scatter_block, MPI_IREDUCE_SCATTER_BLOCK,
             (void *s, void *r, F *n, F *dt, F *op, F *comm, F *req, F *ierr),
             (s, r, n, dt, op, comm, req, ierr))

static void ibarrier_impl(F *comm, F *req, F *ierr, int f08) {
    static _Atomic(void *) slot[2];
    int rc;
    MPI_Request creq = MPI_REQUEST_NULL;
    MPI_Comm c = PMPI_Comm_f2c(*comm);
    if (!hcmpi_try_ibarrier(c, &creq, &rc)) {
        typedef void (*f_t)(F *, F *, F *);
        f_t next = (f_t)binding(PMPI_NAME("ibarrier", f08), &slot[f08]);
        if (next) {
            next(comm, req, ierr);
            return;
        }
        rc = PMPI_Ibarrier(c, &creq);
    }
    set_req(req, creq);
    set_ierr(ierr, rc);
}
ENTRY_POINTS(ibarrier, mpi_ibarrier, MPI_IBARRIER, (F * comm, F *req, F *ierr),
             (comm, req, ierr))

static void init_impl(F *ierr, int f08) {
    static _Atomic(void *) slot[2];
    init_with(PMPI_NAME("init", f08), &slot[f08], ierr);
}
ENTRY_POINTS(init, mpi_init, MPI_INIT, (F * ierr), (ierr))

static void init_thread_impl(F *required, F *provided, F *ierr, int f08) {
    static _Atomic(void *) slot[2];
    init_thread_with(PMPI_NAME("init_thread", f08), &slot[f08], required,
                     provided, ierr);
}
ENTRY_POINTS(init_thread, mpi_init_thread, MPI_INIT_THREAD,
             (F * required, F *provided, F *ierr), (required, provided, ierr))

#elif defined(MPICH)

/* MPICH's own mpi_f08 bindings are pmpir_*_f08_. */
HCMPI_EXPORT void mpi_init_f08_(F *ierr) {
    static _Atomic(void *) slot;
    init_with("pmpir_init_f08_", &slot, ierr);
}

HCMPI_EXPORT void mpi_init_thread_f08_(F *required, F *provided, F *ierr) {
    static _Atomic(void *) slot;
    init_thread_with("pmpir_init_thread_f08_", &slot, required, provided, ierr);
}

HCMPI_EXPORT void mpi_barrier_f08_(F *comm, F *ierr) {
    static _Atomic(void *) slot;
    barrier_with("pmpir_barrier_f08_", &slot, comm, ierr);
}

#endif

#endif /* OPEN_MPI || MPICH */
