/*
 * twopc's commit protocol as the code implements it, for the Spin model checker.
 *
 * One job: NSPLIT splits of LEN segments read by a source vertex chained (forward edge) to an
 * exactly-once Kafka sink vertex, both at parallelism P; source subtask i and sink subtask i are
 * one model task i. Processes (one per task, the coordinator, the faults) take turns; each step is
 * one function of the code, done atomically (docs/model.md maps every step to its function):
 *
 *   coordinator   trigger (periodic, and the final one once every task finished), abort of a
 *                 checkpoint, write of the checkpoint file, completion record + notifications
 *   task i        emit a segment into the current transaction (Kafka id taken at the first record),
 *                 finish, handle its mailbox (trigger -> snapshot, notify -> commit, aborted),
 *                 close after the final notification
 *   start         restore (pick the checkpoint, spread its state), per task: recovery commits one
 *                 by one, then the initialisation of its ids, then begin
 *   faults        crash of the process (kill -9) at any step, the newest checkpoint file damaged
 *                 while the job is down (operator fault), restart at another parallelism
 *
 * The Kafka broker keeps, per transactional id, the producer epoch, the ongoing transaction and
 * whether the last ended one committed; InitProducerId bumps the epoch and aborts what is ongoing; EndTxn(commit)
 * with an epoch commits whatever is ongoing on the id under that epoch (transaction version 1, as
 * librdkafka 2.0.2 uses it: the epoch does not change between transactions of one producer),
 * answers "done" for an id whose last transaction was committed, and is data loss otherwise.
 *
 * Bounds (override with -D): see the #defines below. Ghost variables (segc, tlisted, loss_reported)
 * only observe; they never steer a step.
 *
 * Mutants, each a -D flag (`make model` checks that every one yields a counterexample):
 *   MUTANT_INIT_EARLY        restored handles spread round robin as list state (before the
 *                            ownership rule of tpc_txn_owns()): a subtask initialises an id whose
 *                            transaction another subtask restored, before or after that subtask's
 *                            recovery commit
 *   MUTANT_OLDER             restore skips a damaged newest checkpoint for an older one
 *   MUTANT_SNAPSHOT_COMMIT   commit at snapshot instead of on notify
 *   MUTANT_BEGIN_AFTER_FINISH  snapshot begins a transaction after finish()
 *   MUTANT_NO_RECORD_ON_RESTORE  a restore of a checkpoint newer than the completion record leaves
 *                            the record behind (restore.c moves it up before any task opens)
 *   MUTANT_PG_CLEAN_ALL      (with SINK_PG) every subtask rolls back every prepared transaction
 *                            it did not restore itself, not only those of the subtasks it owns
 *   MUTANT_STRICT_NEWER      a design alternative, not the code: refuse to restore whenever a
 *                            checkpoint file newer than the completion record exists
 *
 * SINK_PG replaces the Kafka sink by the PostgreSQL one (connectors/postgres): BEGIN at the first
 * record, PREPARE TRANSACTION '<gid>' with a marker row at pre-commit, COMMIT PREPARED on notify
 * and in recovery (42704: the marker row tells committed from lost), a crash rolls back what was
 * not prepared, and the restore rolls back prepared transactions of owned subtasks that it did not
 * restore.
 */

/* ---- bounds ---------------------------------------------------------------------------- */
#ifndef PA
#define PA 2            /* parallelism of the first run */
#endif
#ifndef PB
#define PB 1            /* the other parallelism a restart may choose */
#endif
#ifndef PMAX
#define PMAX 2          /* max(PA, PB), and the highest parallelism the ids can belong to */
#endif
#define NSPLIT 2        /* source splits */
#ifndef LEN
#define LEN 2           /* segments per split */
#endif
#define NSEG (NSPLIT * LEN)
#ifndef POOL
#define POOL 2          /* transactional.id.pool-size */
#endif
#define NIDS (PMAX * POOL)
#ifndef MAXCRASH
#define MAXCRASH 2      /* crashes (kill -9) of the process */
#endif
#ifndef MAXABORT
#define MAXABORT 1      /* checkpoints aborted by decline or timeout */
#endif
#ifndef MAXDAMAGE
#define MAXDAMAGE 1     /* newest checkpoint file damaged by the operator */
#endif
#ifndef PERMAX
#define PERMAX 3        /* periodic checkpoints only take ids up to this */
#endif
#define RETAIN 2        /* checkpoint.retained */
#define MAXCK 10        /* checkpoint ids 1..MAXCK-1 */
#define NTX 12          /* transactions 1..NTX-1 */
#define NPEND 3         /* pending transactions per subtask */
#define MBCAP 8         /* mailbox (unbounded in the code: never full here) */

/* ---- names ----------------------------------------------------------------------------- */
#define T_NONE 0   /* not part of this run (index >= P) */
#define T_INIT 1   /* open + initialize_state: recovery, then ids, then begin */
#define T_RUN 2
#define T_WAIT 3   /* finished its operator, waits for the final notification */
#define T_DONE 4   /* closed */

#define X_OPEN 1
#define X_COMMITTED 2
#define X_ABORTED 3

#define K_UNUSED 0   /* no producer in this process */
#define K_FREE 1
#define K_BUSY 2
#define K_HELD 3     /* committed or restored: waits for a later checkpoint */
#define K_GONE 4     /* id of a subtask that no longer runs, fenced */

#define M_TRIG 1
#define M_NOTE 2
#define M_ABRT 3

#define E_NO 0
#define E_FINISHED 1
#define E_REFUSED 2
#define E_GAVEUP 3   /* a failure with no restart left: loud, not silent */

/* ---- the world outside the process: Kafka and checkpoint.dir (survive a crash) ------------ */
byte kep[NIDS];     /* broker: producer epoch of each transactional id */
byte kopen[NIDS];   /* broker: transaction ongoing on the id, 0 none */
bool klastc[NIDS];  /* ... and whether it was committed */

byte tst[NTX];      /* X_* as the broker sees the transaction */
byte tkid[NTX];     /* its transactional id + 1 */
byte tep[NTX];      /* producer epoch stored in its handle */
byte tck[NTX];      /* checkpoint it was pre-committed for, 0 = not */
byte tseg[NTX];     /* segments written into it (bit mask) */
byte ntx = 1;
#ifdef SINK_PG
#define X_PREPARED 4
byte tgs[NTX], tgp[NTX], tgb[NTX];   /* gid "<prefix>:<s>:<p>:<b>" of a PostgreSQL transaction */
short pknown[PMAX];                  /* transactions this subtask restored (bit mask) */
#endif

bool fpres[MAXCK];              /* checkpoint file chk-<gc> exists */
bool fvalid[MAXCK];             /* and reads back (checksum) */
byte fpar[MAXCK];               /* sink parallelism in it */
byte fpend[MAXCK * PMAX * NPEND]; /* pending handles per subtask, oldest first */
byte fsoff[MAXCK * NSPLIT];     /* split offsets */
byte fsown[MAXCK * NSPLIT];     /* subtask + 1 that listed the split (0: none, it closed) */
bool ffin[MAXCK * PMAX];        /* operator finished */
bool fclosed[MAXCK * PMAX];     /* subtask closed at trigger time */
byte lrec;                      /* completion record: newest completed checkpoint, 0 = none */
byte newest;                    /* newest file (derived from fpres) */
byte hipar;                     /* highest parallelism noted in the record */

/* ghosts */
byte segc[NSEG];    /* commits per segment */
bool tlisted[NTX];  /* a written checkpoint lists the transaction as pending */
byte crashes, aborts, damages, ended;

/* ---- the process (lost in a crash) ------------------------------------------------------ */
byte P;             /* parallelism of this run */
byte R;             /* restored checkpoint, 0 = none */
byte nextck;        /* next checkpoint id */
byte cpid[2];       /* checkpoints in flight */
byte cpwait[2];     /* tasks not acked yet (bit mask) */
byte final_id;
byte announce;      /* written, record and notifications not yet done */

byte ts[PMAX];
bool cur_has[PMAX]; /* a current transaction is open */
byte cur[PMAX];     /* its table entry, 0 = nothing written yet (empty) */
byte pend[PMAX * NPEND];
byte rq[PMAX * NPEND * PMAX];   /* restored pending handles to recover, oldest first */
byte lastck[PMAX], flr[PMAX], lastnot[PMAX], faf[PMAX], latest_begin[PMAX];
bool fnot[PMAX], fin[PMAX];
byte known[PMAX];   /* ids of the handles this subtask restored (bit mask over NIDS) */

byte kslot[NIDS];   /* K_* */
byte krel[NIDS];    /* held until a checkpoint >= this completes */
byte kpep[NIDS];    /* epoch of this process's producer on the id, 0 = none */

byte soff[NSPLIT], sown[NSPLIT];

chan mb[PMAX] = [MBCAP] of { byte, byte };

hidden byte gi, gj, gk, gn, gc, gt, gx, gy, gz, gm, gw;

#define PD(cc, s, q)  (((cc) * PMAX + (s)) * NPEND + (q))
#define PS(cc, jj)    ((cc) * NSPLIT + (jj))
#define PF(cc, s)     ((cc) * PMAX + (s))
#define OWNER(s)      ((s) % P)
#define LIVE(q)       (ts[q] == T_INIT || ts[q] == T_RUN || ts[q] == T_WAIT)

/* ---- Kafka ------------------------------------------------------------------------------- */

/* A transaction becomes visible: the properties "nothing but what a completed checkpoint lists
 * is committed" and "every segment at most once" are checked here, on every commit. */
inline broker_commit(tt)
{
    printf("MSC: broker commits txn %d (id %d, segments %d)\n", tt, tkid[tt] - 1, tseg[tt]);
#ifdef SINK_PG
    assert(tst[tt] == X_PREPARED);
#else
    assert(tst[tt] == X_OPEN);
#endif
    /* a completed checkpoint (one whose file was written) lists it: nothing else is ever
     * committed, and nothing whose checkpoint did not complete */
    assert(tlisted[tt]);
    tst[tt] = X_COMMITTED;
    gx = 0;
    do
    :: gx < NSEG ->
        if
        :: tseg[tt] & (1 << gx) -> segc[gx]++; assert(segc[gx] <= 1)
        :: else
        fi;
        gx++
    :: else -> break
    od;
#ifndef SINK_PG
    kopen[tkid[tt] - 1] = 0;
    klastc[tkid[tt] - 1] = true
#else
    skip
#endif
}

#ifdef SINK_PG
/* COMMIT PREPARED '<gid>' (tpc__pg_commit); 42704 -> resolve_missing(): pg_prepared_xacts, then
 * the marker row, which the transaction wrote itself: present = committed before, absent = lost. */
inline pg_commit(tt)
{
    if
    :: tst[tt] == X_PREPARED -> broker_commit(tt)
    :: tst[tt] == X_COMMITTED -> skip   /* marker row present */
    :: else -> loss_reported = true     /* no marker row: TPC_ERR_DATA_LOSS */
    fi;
    assert(!loss_reported);
    assert(tst[tt] == X_COMMITTED)
}
#endif

/* InitProducerId: a new epoch; what is ongoing on the id is aborted. */
inline init_producer(kk)
{
    printf("MSC: init producer id %d (epoch %d -> %d, aborts txn %d)\n", kk, kep[kk], kep[kk] + 1, kopen[kk]);
    kep[kk]++;
    if
    :: kopen[kk] != 0 ->
        tst[kopen[kk]] = X_ABORTED;
        klastc[kk] = false;
        kopen[kk] = 0
    :: else
    fi
}

/* tpc__kafka_pool_complete(): held ids whose checkpoint is now complete come back. */
inline pool_complete(ii, ck)
{
    gy = 0;
    do
    :: gy < NIDS ->
        if
        :: kslot[gy] == K_HELD && krel[gy] <= ck && (gy / POOL) % P == ii ->
            if
            :: kpep[gy] != 0 -> kslot[gy] = K_FREE
            :: else ->
                init_producer(gy);
                if
                :: gy / POOL == ii -> kslot[gy] = K_FREE; kpep[gy] = kep[gy]
                :: else -> kslot[gy] = K_GONE   /* an orphan: fenced, then its producer stops */
                fi
            fi
        :: else
        fi;
        gy++
    :: else -> break
    od;
    skip
}

/* ---- the transaction state machine (txn/txn_task.gc) ---------------------------------------- */

inline begin(ii)
{
    /* the connector contract (docs/guarantees.md): begin is called at start and at each
     * checkpoint until finish(), never after */
    assert(!fin[ii] || ts[ii] == T_INIT);
    cur_has[ii] = true;
    cur[ii] = 0;
    if
    :: lastck[ii] + 1 > latest_begin[ii] -> latest_begin[ii] = lastck[ii] + 1
    :: else
    fi
}

/* commit_pending(): every pending transaction of a checkpoint <= ck, oldest first, with the
 * live producer (tpc__kafka_commit), then tpc__kafka_pool_complete and _hold. */
inline commit_pending(ii, ck)
{
    do
    :: pend[ii * NPEND] != 0 && tck[pend[ii * NPEND]] <= ck ->
        gt = pend[ii * NPEND];
#ifdef SINK_PG
        pg_commit(gt);
#else
        gk = tkid[gt] - 1;
        assert(kpep[gk] == kep[gk]);   /* the live producer is not fenced */
        assert(kopen[gk] == gt);
        broker_commit(gt);
        pool_complete(ii, tck[gt]);
        kslot[gk] = K_HELD;
        krel[gk] = latest_begin[ii];
#endif
        pend[ii * NPEND] = pend[ii * NPEND + 1];
        pend[ii * NPEND + 1] = pend[ii * NPEND + 2];
        pend[ii * NPEND + 2] = 0
    :: else -> break
    od;
    skip
}

/* snapshot(): pre-commit the current transaction for checkpoint cc and keep it pending; begin a
 * new one unless finished; write pending handles and split offsets as the state of cc; ack. */
inline snapshot(ii, cc)
{
    printf("MSC: task %d snapshot %d (current txn %d)\n", ii, cc, cur[ii]);
    if
    :: cc > lastck[ii] -> lastck[ii] = cc
    :: else
    fi;
    if
    :: cur_has[ii] && cur[ii] != 0 ->
        gt = cur[ii];
        tck[gt] = cc;   /* pre_commit: flushed; producer id and epoch go into the handle */
#ifdef SINK_PG
        /* marker row, then PREPARE TRANSACTION '<gid>': the gid must be free, and no committed
         * marker row may carry it (its primary key), or the subtask fails for ever */
        gz = 1;
        do
        :: gz < ntx ->
            assert(gz == gt || tgs[gz] != tgs[gt] || tgp[gz] != tgp[gt] || tgb[gz] != tgb[gt] ||
                   tst[gz] == X_ABORTED);
            gz++
        :: else -> break
        od;
        tst[gt] = X_PREPARED;
#endif
#ifdef MUTANT_SNAPSHOT_COMMIT
        broker_commit(gt);
        kslot[tkid[gt] - 1] = K_FREE;
#else
        gz = 0;
        do
        :: pend[ii * NPEND + gz] != 0 -> gz++; assert(gz < NPEND)
        :: else -> break
        od;
        pend[ii * NPEND + gz] = gt;
#endif
    :: else
    fi;
    cur_has[ii] = false;
    cur[ii] = 0;
    if
#ifdef MUTANT_BEGIN_AFTER_FINISH
    :: true -> begin(ii)
#else
    :: !fin[ii] -> begin(ii)
    :: else
#endif
    fi;
    gz = 0;
    do
    :: gz < NPEND -> fpend[PD(cc, ii, gz)] = pend[ii * NPEND + gz]; gz++
    :: else -> break
    od;
    gz = 0;
    do
    :: gz < NSPLIT ->
        if
        :: sown[gz] == ii -> fsoff[PS(cc, gz)] = soff[gz]; fsown[PS(cc, gz)] = ii + 1
        :: else
        fi;
        gz++
    :: else -> break
    od;
    ffin[PF(cc, ii)] = fin[ii];
    flr[ii] = cc;
    if
    :: fin[ii] && faf[ii] == 0 -> faf[ii] = cc
    :: else
    fi;
    if
    :: cpid[0] == cc -> cpwait[0] = cpwait[0] & ~(1 << ii)
    :: cpid[1] == cc -> cpwait[1] = cpwait[1] & ~(1 << ii)
    :: else
    fi
}

/* ---- the coordinator (runtime/coordinator.gc) ------------------------------------------------ */

inline clear_staging(cc)
{
    gw = 0;
    do
    :: gw < PMAX * NPEND -> fpend[cc * PMAX * NPEND + gw] = 0; gw++
    :: else -> break
    od;
    gw = 0;
    do
    :: gw < NSPLIT -> fsoff[PS(cc, gw)] = 0; fsown[PS(cc, gw)] = 0; gw++
    :: else -> break
    od;
    gw = 0;
    do
    :: gw < PMAX -> ffin[PF(cc, gw)] = false; fclosed[PF(cc, gw)] = false; gw++
    :: else -> break
    od;
    skip
}

inline post_all(kind, cc)
{
    gz = 0;
    do
    :: gz < PMAX ->
        if
        :: LIVE(gz) -> assert(nfull(mb[gz])); mb[gz]!kind, cc
        :: else
        fi;
        gz++
    :: else -> break
    od;
    skip
}

inline abort_ck(q)
{
    gc = cpid[q];
    printf("MSC: checkpoint %d aborted\n", gc);
    cpid[q] = 0;
    cpwait[q] = 0;
    post_all(M_ABRT, gc);
    if
    :: gc == final_id -> final_id = 0
    :: else
    fi;
    clear_staging(gc)
}

inline trigger()
{
    gc = nextck;
    printf("MSC: trigger checkpoint %d\n", gc);
    nextck++;
    assert(nextck < MAXCK);
    if
    :: cpid[0] == 0 -> gm = 0
    :: else -> assert(cpid[1] == 0); gm = 1
    fi;
    cpid[gm] = gc;
    cpwait[gm] = 0;
    gz = 0;
    do
    :: gz < P ->
        if
        :: ts[gz] == T_DONE -> fclosed[PF(gc, gz)] = true
        :: else ->
            cpwait[gm] = cpwait[gm] | (1 << gz);
            assert(nfull(mb[gz]));
            mb[gz]!M_TRIG, gc
        fi;
        gz++
    :: else -> break
    od;
    skip
}

/* ---- restore (runtime/restore.gc, txn initialize) ------------------------------------------ */

/* Pick the checkpoint to restore into R, or refuse (ended = E_REFUSED). */
inline pick()
{
    R = 0;
    gx = 0;   /* newest file */
    gz = 1;
    do
    :: gz < MAXCK -> if :: fpres[gz] -> gx = gz :: else fi; gz++
    :: else -> break
    od;
#ifdef MUTANT_OLDER
    /* the code before the completion record: the newest valid file, skipping damaged ones */
    gz = gx;
    do
    :: gz > 0 && fpres[gz] && fvalid[gz] -> R = gz; break
    :: gz > 0 && !(fpres[gz] && fvalid[gz]) -> gz--
    :: gz == 0 -> break
    od;
    if
    :: R == 0 && gx != 0 -> ended = E_REFUSED
    :: else
    fi
#else
    /* the bound: the record; without one, the newest file (it was complete when written) */
    gy = lrec;
    if
    :: gy == 0 -> gy = gx
    :: else
    fi;
#ifdef MUTANT_STRICT_NEWER
    /* a design alternative: refuse whenever a file newer than the record exists */
    if
    :: lrec != 0 && gx > lrec -> gy = gx + 1
    :: else
    fi;
#endif
    /* newest valid file at or above the bound; a damaged file above it was never announced */
    gz = gx;
    do
    :: gz > 0 && gz >= gy && fpres[gz] && fvalid[gz] -> R = gz; break
    :: gz > 0 && gz > gy && !(fpres[gz] && fvalid[gz]) -> gz--
    :: gz > 0 && gz == gy && !(fpres[gz] && fvalid[gz]) -> ended = E_REFUSED; break
    :: gz == 0 || gz < gy -> if :: gy > 0 -> ended = E_REFUSED :: else fi; break
    od
#endif
}

inline reset_process()
{
#ifdef SINK_PG
    /* the data connections die with the process: what was not prepared is rolled back */
    gz = 1;
    do
    :: gz < ntx -> if :: tst[gz] == X_OPEN -> tst[gz] = X_ABORTED :: else fi; gz++
    :: else -> break
    od;
#endif
    gz = 0;
    do
    :: gz < PMAX ->
        do
        :: nempty(mb[gz]) -> mb[gz]?_, _
        :: empty(mb[gz]) -> break
        od;
        ts[gz] = T_NONE; cur_has[gz] = false; cur[gz] = 0;
        pend[gz * NPEND] = 0; pend[gz * NPEND + 1] = 0; pend[gz * NPEND + 2] = 0;
        lastck[gz] = 0; flr[gz] = 0; lastnot[gz] = 0; faf[gz] = 0; latest_begin[gz] = 0;
        fnot[gz] = false; fin[gz] = false; known[gz] = 0;
#ifdef SINK_PG
        pknown[gz] = 0;
#endif
        gz++
    :: else -> break
    od;
    gz = 0;
    do
    :: gz < PMAX * NPEND * PMAX -> rq[gz] = 0; gz++
    :: else -> break
    od;
    gz = 0;
    do
    :: gz < NIDS -> kslot[gz] = K_UNUSED; krel[gz] = 0; kpep[gz] = 0; gz++
    :: else -> break
    od;
    cpid[0] = 0; cpid[1] = 0; cpwait[0] = 0; cpwait[1] = 0; final_id = 0; announce = 0;
    /* in-flight checkpoint state that never became a file is gone */
    gz = 1;
    do
    :: gz < MAXCK -> if :: !fpres[gz] -> clear_staging(gz) :: else fi; gz++
    :: else -> break
    od;
    skip
}

/* Add restored handle tt to subtask ii's recovery queue, keeping it in checkpoint order. */
inline enqueue(ii, tt)
{
    gz = ii * NPEND * PMAX;
    do
    :: rq[gz] != 0 -> gz++
    :: else -> break
    od;
    /* insertion sort: handles of one subtask arrive oldest first already */
    do
    :: gz > ii * NPEND * PMAX && tck[rq[gz - 1]] > tck[tt] -> rq[gz] = rq[gz - 1]; gz--
    :: else -> break
    od;
    rq[gz] = tt;
#ifdef SINK_PG
    pknown[ii] = pknown[ii] | (1 << tt)
#else
    known[ii] = known[ii] | (1 << (tkid[tt] - 1))
#endif
}

/* Spread checkpoint R over the P subtasks of this run and start them. */
inline restore()
{
    /* next id: past every file and the record */
    nextck = lrec + 1;
    gz = 1;
    do
    :: gz < MAXCK -> if :: fpres[gz] && gz >= nextck -> nextck = gz + 1 :: else fi; gz++
    :: else -> break
    od;
    if
    :: P > hipar -> hipar = P
    :: else
    fi;
    if
    :: R == 0 ->
        gz = 0;
        do
        :: gz < NSPLIT -> soff[gz] = 0; sown[gz] = gz % P; gz++
        :: else -> break
        od
    :: else ->
        /* splits: list state, back to their subtask or round robin over old subtasks' entries */
        gn = 0;
        gi = 0;
        do
        :: gi < fpar[R] ->
            gj = 0;
            do
            :: gj < NSPLIT ->
                if
                :: fsown[PS(R, gj)] == gi + 1 ->
                    soff[gj] = fsoff[PS(R, gj)];
                    if
                    :: P == fpar[R] -> sown[gj] = gi
                    :: else -> sown[gj] = gn % P
                    fi;
                    gn++
                :: else
                fi;
                gj++
            :: else -> break
            od;
            gi++
        :: else -> break
        od;
        /* splits of closed subtasks are done */
        gj = 0;
        do
        :: gj < NSPLIT ->
            if
            :: fsown[PS(R, gj)] == 0 -> soff[gj] = LEN; sown[gj] = PMAX
            :: else
            fi;
            gj++
        :: else -> break
        od;
        /* sink handles */
        gn = 0;
        gi = 0;
        do
        :: gi < fpar[R] ->
            gj = 0;
            do
            :: gj < NPEND && fpend[PD(R, gi, gj)] != 0 ->
#ifdef MUTANT_INIT_EARLY
                if
                :: P == fpar[R] -> enqueue(gi, fpend[PD(R, gi, gj)])
                :: else -> enqueue(gn % P, fpend[PD(R, gi, gj)])
                fi;
                gn++;
#else
                enqueue(OWNER(gi), fpend[PD(R, gi, gj)]);
#endif
                gj++
            :: else -> break
            od;
#ifdef MUTANT_INIT_EARLY
            /* the entry of the current transaction (empty at the snapshot) takes a turn too */
            if
            :: !ffin[PF(R, gi)] && !fclosed[PF(R, gi)] -> gn++
            :: else
            fi;
#endif
            gi++
        :: else -> break
        od
    fi;
    gi = 0;
    do
    :: gi < P ->
        if
        :: R != 0 && fclosed[PF(R, gi)] -> ts[gi] = T_DONE   /* start closed */
        :: else ->
            ts[gi] = T_INIT;
            fin[gi] = R != 0 && ffin[PF(R, gi)];
            lastck[gi] = R; flr[gi] = R; lastnot[gi] = R
        fi;
        gi++
    :: else -> break
    od;
    skip
}

/* tpc__kafka_abort_lingering(): hold the ids of restored handles, initialise the other ids this
 * subtask owns (its pool, and the ids of subtasks that no longer run). */
#ifdef SINK_PG
/* tpc__pg_abort_lingering(): roll back every prepared transaction of a subtask this one owns
 * that the restored handles do not list (tpc_txn_owns(): s mod P). */
inline init_ids(ii)
{
    gy = 1;
    do
    :: gy < ntx ->
        if
        #ifdef MUTANT_PG_CLEAN_ALL
        :: tst[gy] == X_PREPARED && !(pknown[ii] & (1 << gy)) ->
#else
        :: tst[gy] == X_PREPARED && tgs[gy] % P == ii && !(pknown[ii] & (1 << gy)) ->
#endif
            printf("MSC: task %d rolls back prepared txn %d\n", ii, gy);
            tst[gy] = X_ABORTED
        :: else
        fi;
        gy++
    :: else -> break
    od;
    pknown[ii] = 0
}
inline init_ids_kafka(ii)
{
#else
inline init_ids(ii)
{
#endif
    gy = 0;
    do
    :: gy < NIDS ->
#ifdef MUTANT_INIT_EARLY
        if
        :: gy / POOL == ii ->   /* own pool only, as kafka_recover.gc before the ownership rule */
#else
        if
        :: (gy / POOL) % P == ii && gy / POOL < hipar ->
#endif
            if
            :: known[ii] & (1 << gy) -> kslot[gy] = K_HELD; krel[gy] = R + 1; kpep[gy] = 0
            :: else ->
                init_producer(gy);
                if
                :: gy / POOL == ii -> kslot[gy] = K_FREE; kpep[gy] = kep[gy]
                :: else -> kslot[gy] = K_GONE
                fi
            fi
        :: else
        fi;
        gy++
    :: else -> break
    od;
    skip
}

/* ---- the checks at the end of a run ------------------------------------------------------ */

inline check_end()
{
    if
    :: ended == E_FINISHED ->
        gz = 0;
        do
        :: gz < NSEG -> assert(segc[gz] == 1); gz++   /* every record exactly once */
        :: else -> break
        od;
        gz = 1;
        do
        :: gz < ntx ->
            assert(tst[gz] != X_OPEN);                 /* nothing lingers */
#ifdef SINK_PG
            assert(tst[gz] != X_PREPARED);             /* no prepared transaction is left */
#endif
            assert(!tlisted[gz] || tst[gz] == X_COMMITTED);
            gz++
        :: else -> break
        od
    :: ended == E_REFUSED ->
        assert(damages > 0)   /* refusals only after an operator fault */
    :: ended == E_GAVEUP -> assert(false)   /* within these bounds the id pool never runs out */
    fi;
    if
    :: crashes == 0 && damages == 0 -> assert(ended == E_FINISHED)
    :: else
    fi
}


/* A failure the job restarts from (an exhausted id pool): like a crash, from the same
 * parallelism; with no restart left the job fails loudly. */
inline fail()
{
    if
    :: crashes < MAXCRASH -> crashes++; printf("MSC: task failure (id pool exhausted)\n"); crash_restart()
    :: else -> ended = E_GAVEUP
    fi
}

/* kill -9, then a new process on the same checkpoint.dir at parallelism P. */
inline crash_restart()
{
    reset_process();
    pick();
    if
    :: ended == E_NO ->
        /* restore.gc check_graph: a partly finished vertex cannot change its parallelism; the
         * operator restarts it at the old one */
        if
        :: R != 0 && P != fpar[R] ->
            gz = 0;
            do
            :: gz < fpar[R] -> if :: ffin[PF(R, gz)] || fclosed[PF(R, gz)] -> P = fpar[R]; break :: else -> gz++ fi
            :: else -> break
            od
        :: else
        fi;
        printf("MSC: restart at parallelism %d from checkpoint %d (record %d)\n", P, R, lrec);
#ifndef MUTANT_NO_RECORD_ON_RESTORE
        /* restore.c note_parallelism(): the record moves up to the restored checkpoint, and
         * notes the parallelism, before any task opens */
        if
        :: R > lrec -> lrec = R
        :: else
        fi;
#endif
        restore()
    :: else -> printf("MSC: restart refused (record %d)\n", lrec)
    fi
}

#define HASSEG(q) ((sown[0] == q && soff[0] < LEN) || (sown[1] == q && soff[1] < LEN))

/* The first record of a transaction takes an id: a free one, else an unused one, initialised. */
inline emit(ii)
{
    gj = (sown[0] == ii && soff[0] < LEN -> 0 : 1);
    assert(cur_has[ii]);   /* records never arrive without an open transaction */
    if
#ifdef SINK_PG
    :: cur[ii] == 0 ->
        /* BEGIN on the data connection at the first record; the gid names subtask, parallelism
         * and the checkpoint the transaction was begun for (tpc__pg_begin) */
        gt = ntx;
        ntx++;
        assert(ntx < NTX);
        tgs[gt] = ii;
        tgp[gt] = P;
        tgb[gt] = latest_begin[ii];
        tst[gt] = X_OPEN;
        cur[ii] = gt
#else
    :: cur[ii] == 0 ->
        gk = NIDS;
        gn = 0;
        do
        :: gn < POOL && kslot[ii * POOL + gn] == K_FREE -> gk = ii * POOL + gn; break
        :: gn < POOL && kslot[ii * POOL + gn] != K_FREE -> gn++
        :: gn == POOL -> break
        od;
        gn = 0;
        do
        :: gk == NIDS && gn < POOL && kslot[ii * POOL + gn] == K_UNUSED ->
            gk = ii * POOL + gn;
            init_producer(gk);
            kpep[gk] = kep[gk];
            kslot[gk] = K_FREE
        :: gk == NIDS && gn < POOL && kslot[ii * POOL + gn] != K_UNUSED -> gn++
        :: else -> break
        od;
        if
        :: gk == NIDS -> fail()
        :: else ->
            assert(kpep[gk] == kep[gk] && kopen[gk] == 0);
            kslot[gk] = K_BUSY;
            gt = ntx;
            ntx++;
            assert(ntx < NTX);
            tkid[gt] = gk + 1;
            tep[gt] = kpep[gk];
            tst[gt] = X_OPEN;
            kopen[gk] = gt;
            cur[ii] = gt
        fi
#endif
    :: else
    fi;
    if
    :: ended == E_NO && ts[ii] == T_RUN ->
        tseg[cur[ii]] = tseg[cur[ii]] | (1 << (gj * LEN + soff[gj]));
#ifdef SINK_PG
        printf("MSC: task %d writes segment %d into txn %d (gid %d:%d:%d)\n", ii, gj * LEN + soff[gj], cur[ii], tgs[cur[ii]], tgp[cur[ii]], tgb[cur[ii]]);
#else
        printf("MSC: task %d writes segment %d into txn %d (id %d epoch %d)\n", ii, gj * LEN + soff[gj], cur[ii], tkid[cur[ii]] - 1, tep[cur[ii]]);
#endif
        soff[gj]++
    :: else   /* the failure restarted the job */
    fi
}

bool loss_reported;   /* a recovery commit answered "data loss" */

/* recover_and_commit of the oldest restored handle: EndTxn(commit) with its id and epoch. */
inline recover_one(ii)
{
    gt = rq[ii * NPEND * PMAX];
#ifdef SINK_PG
    gz = 0;
    do
    :: gz < NPEND * PMAX - 1 -> rq[ii * NPEND * PMAX + gz] = rq[ii * NPEND * PMAX + gz + 1]; gz++
    :: else -> rq[ii * NPEND * PMAX + gz] = 0; break
    od;
    printf("MSC: task %d recovery commit of txn %d\n", ii, gt);
    pg_commit(gt)
}
inline recover_one_kafka(ii)
{
#endif
    printf("MSC: task %d recovery commit of txn %d (id %d epoch %d; broker epoch %d)\n", ii, gt, tkid[gt] - 1, tep[gt], kep[tkid[gt] - 1]);
    gz = 0;
    do
    :: gz < NPEND * PMAX - 1 -> rq[ii * NPEND * PMAX + gz] = rq[ii * NPEND * PMAX + gz + 1]; gz++
    :: else -> rq[ii * NPEND * PMAX + gz] = 0; break
    od;
    gk = tkid[gt] - 1;
    if
    :: tep[gt] < kep[gk] -> loss_reported = true          /* PRODUCER_FENCED */
    :: tep[gt] == kep[gk] && kopen[gk] != 0 -> gm = kopen[gk]; broker_commit(gm)
    :: tep[gt] == kep[gk] && kopen[gk] == 0 && klastc[gk] -> skip   /* NONE: committed before */
    :: tep[gt] == kep[gk] && kopen[gk] == 0 && !klastc[gk] -> loss_reported = true  /* INVALID_TXN_STATE */
    fi;
    assert(!loss_reported);           /* a restore never reports data loss */
    assert(tst[gt] == X_COMMITTED)     /* and success means this transaction is committed */
}

inline write_ck(q)
{
    gc = cpid[q];
    printf("MSC: checkpoint %d written\n", gc);
    fpres[gc] = true;
    fvalid[gc] = true;
    if
    :: gc > newest -> newest = gc
    :: else
    fi;
    fpar[gc] = P;
    gz = 0;
    do
    :: gz < PMAX * NPEND ->
        if
        :: fpend[gc * PMAX * NPEND + gz] != 0 -> tlisted[fpend[gc * PMAX * NPEND + gz]] = true
        :: else
        fi;
        gz++
    :: else -> break
    od;
    /* checkpoint.retained: the newest RETAIN files stay */
    gn = 0;
    gx = MAXCK - 1;
    do
    :: gx > 0 ->
        if
        :: fpres[gx] && gn < RETAIN -> gn++
        :: fpres[gx] && gn >= RETAIN -> fpres[gx] = false; fvalid[gx] = false; fpar[gx] = 0; clear_staging(gx)
        :: else
        fi;
        gx--
    :: else -> break
    od;
    cpid[q] = 0;
    cpwait[q] = 0;
    /* older checkpoints still in flight are subsumed */
    if
    :: cpid[1 - q] != 0 && cpid[1 - q] < gc -> clear_staging(cpid[1 - q]); cpid[1 - q] = 0; cpwait[1 - q] = 0
    :: else
    fi;
    announce = gc
}

/* complete_checkpoint(): union_state_conflict() aborts a checkpoint of a vertex with union state
 * that is partly closed while another of its subtasks still runs. The sink's handles are owned
 * state, to which the rule does not apply (a closed sink subtask has nothing pending), so the
 * checkpoint is written. */
inline write_or_abort(q)
{
    write_ck(q)
}

#define ALLWAIT ((ts[0] == T_WAIT || ts[0] == T_DONE || 0 >= P) && (PMAX < 2 || ts[1] == T_WAIT || ts[1] == T_DONE || 1 >= P) && (PMAX < 3 || ts[PMAX - 1] == T_WAIT || ts[PMAX - 1] == T_DONE || PMAX - 1 >= P))
#define ALLDONE ((ts[0] == T_DONE || 0 >= P) && (PMAX < 2 || ts[1] == T_DONE || 1 >= P) && (PMAX < 3 || ts[PMAX - 1] == T_DONE || PMAX - 1 >= P))

proctype task(byte me)
{
end_task:
    do
    :: d_step { ended == E_NO && ts[me] == T_RUN && HASSEG(me) -> emit(me) }
    :: d_step { ended == E_NO && ts[me] == T_RUN && !HASSEG(me) ->
        fin[me] = true;   /* finish(): flush only */
        ts[me] = T_WAIT;
        final_id = 0 }    /* the coordinator sees WAITING_FOR_FINAL: a checkpoint after it is needed */
    :: d_step { ended == E_NO && (ts[me] == T_RUN || ts[me] == T_WAIT) && nempty(mb[me]) ->
      /* handle_mail(): everything in the mailbox, in order */
      do
      :: nempty(mb[me]) ->
        mb[me]?gm, gc;
        if
        :: gm == M_TRIG && gc > flr[me] ->
            snapshot(me, gc)
        :: gm == M_NOTE && gc > lastnot[me] ->
            printf("MSC: task %d notified of checkpoint %d\n", me, gc);
            lastnot[me] = gc;
            commit_pending(me, gc);
            if
            :: faf[me] != 0 && gc >= faf[me] -> fnot[me] = true
            :: else
            fi
        :: gm == M_ABRT -> skip   /* nothing: pending ones wait for a later checkpoint */
        :: else
        fi
      :: empty(mb[me]) -> break
      od;
      skip }
    :: d_step { ended == E_NO && ts[me] == T_WAIT && fnot[me] ->
        /* close(): the current transaction is empty or absent; pending ones are left alone */
        assert(!cur_has[me] || cur[me] == 0);
        cur_has[me] = false;
        ts[me] = T_DONE;
        do
        :: nempty(mb[me]) -> mb[me]?_, _
        :: empty(mb[me]) -> break
        od;
        /* a checkpoint still waiting for this subtask aborts */
        if
        :: cpid[0] != 0 && (cpwait[0] & (1 << me)) -> abort_ck(0)
        :: else
        fi;
        if
        :: cpid[1] != 0 && (cpwait[1] & (1 << me)) -> abort_ck(1)
        :: else
        fi }
    :: d_step { ended == E_NO && ts[me] == T_INIT && rq[me * NPEND * PMAX] != 0 -> recover_one(me) }
    :: d_step { ended == E_NO && ts[me] == T_INIT && rq[me * NPEND * PMAX] == 0 ->
        init_ids(me);
        known[me] = 0;
        begin(me);
        if
        :: fin[me] -> ts[me] = T_WAIT; final_id = 0   /* restored finished: finish() again */
        :: else -> ts[me] = T_RUN
        fi }
    od
}

proctype coordinator()
{
end_coord:
    do
    :: d_step { ended == E_NO && announce == 0 && !ALLDONE && ALLWAIT && final_id == 0 ->
        trigger(); final_id = gc }
    :: d_step { ended == E_NO && announce == 0 && !ALLWAIT && cpid[0] == 0 && cpid[1] == 0 &&
                nextck <= PERMAX -> trigger() }
    :: d_step { ended == E_NO && announce == 0 && cpid[0] != 0 && aborts < MAXABORT ->
        aborts++; abort_ck(0) }
    :: d_step { ended == E_NO && announce == 0 && cpid[1] != 0 && aborts < MAXABORT ->
        aborts++; abort_ck(1) }
    :: d_step { ended == E_NO && announce == 0 && cpid[0] != 0 && cpwait[0] == 0 -> write_or_abort(0) }
    :: d_step { ended == E_NO && announce == 0 && cpid[1] != 0 && cpwait[1] == 0 -> write_or_abort(1) }
    :: d_step { ended == E_NO && announce != 0 ->
#ifndef MUTANT_OLDER
        lrec = announce;   /* the completion record, before any sink may commit */
        printf("MSC: completion record = %d\n", lrec);
#endif
        post_all(M_NOTE, announce);
        announce = 0 }
    :: d_step { ended == E_NO && announce == 0 && ALLDONE -> ended = E_FINISHED }
    od
}

#define NEWEST_VALID (newest != 0 && fvalid[newest])

proctype faults()
{
end_faults:
    do
    :: atomic { ended == E_NO && crashes < MAXCRASH && ntx > 1 ->
        crashes++;
        printf("MSC: crash\n");
        if   /* the new process may run at another parallelism */
        :: P = PA
        :: P = PB
        fi;
        /* while it is down, the operator may damage (or delete) the newest checkpoint file; only
         * a restore reads the files, so this is the one moment that matters */
        if
        :: damages < MAXDAMAGE && NEWEST_VALID ->
            damages++;
            d_step {
                gx = newest;
                fvalid[gx] = false;
                printf("MSC: checkpoint file %d damaged\n", gx)
            }
        :: true
        fi;
        d_step { crash_restart() } }
    od
}

/* Blocks until the job ended: a state where nothing can move and the job has not ended is an
 * invalid end state (the job is stuck), which Spin reports. */
proctype watch()
{
    ended != E_NO;
    check_end()
}

init
{
    atomic {
        P = PA;
        hipar = PA;
        restore();
        nextck = 1;
        gi = 0;
        do
        :: gi < PMAX -> run task(gi); gi++
        :: else -> break
        od;
        run coordinator();
        run faults();
        run watch()
    }
}

#ifdef LTL_ENDS
/* Every run ends: no cycle of steps goes on for ever without the job ending (checked with
 * `pan -a -f`, acceptance cycles under weak fairness). */
ltl ends { <> (ended != E_NO) }
#endif
