/*
 * Owners of one unit, one after another, for the Spin model checker: the owner-epoch fence.
 *
 * A unit is a complete twopc job over its share of the input (docs/model.md, twopc.pml). When its
 * work moves to another process, the old owner may not know: it was frozen (SIGSTOP, a long pause)
 * and resumes after the take-over, a zombie that goes on where it stopped. Here owner 1 runs the
 * unit; owner k+1 may take it over at any moment after owner k started, and every earlier owner
 * keeps running as a zombie, at any speed, until a fence stops it or its job ends. An owner that
 * is not the last may also simply die (kill -9) at any step.
 *
 * One owner is the job of twopc.pml folded to one subtask (a source of NSEG records chained to an
 * exactly-once sink) with the steps that matter between owners:
 *
 *   take over   read the completion record (checkpoint, owner epoch, version), list the checkpoint
 *               files, pick the restore point: the record's checkpoint, or a newer valid file
 *               written under the record's owner epoch (a crash between file and record); then
 *               compare-and-set the record to (that checkpoint, my epoch) against the version read.
 *               Refused: read again. An epoch above mine in the record: I am a zombie, stop.
 *   recover     commit every pending transaction the restored checkpoint lists (Kafka: EndTxn with
 *               the stored producer epoch; PostgreSQL: COMMIT PREPARED; committed before is fine,
 *               gone is data loss)
 *   init ids    Kafka: InitProducerId on the unit's ids, which bumps the producer epoch and aborts
 *               what is open on them (every zombie producer is fenced); PostgreSQL: roll back the
 *               prepared transactions of the unit with an older owner epoch than mine that the
 *               restore did not list
 *   emit        one record into the current transaction (Kafka: a fenced producer fails)
 *   snapshot    pre-commit the current transaction for checkpoint n (PostgreSQL: PREPARE
 *               TRANSACTION under a gid that carries the owner epoch), keep it pending
 *   file        create chk-n, create-only: if a file of that id exists (another owner's), the
 *               checkpoint is aborted and its pending transactions go into the next one
 *   complete    compare-and-set the record to (n, my epoch) against the version I last wrote.
 *               Refused: the unit was taken over, stop before notifying anything
 *   notify      commit the pending transactions <= n with the live producer (Kafka: fenced means
 *               read the record: still mine, a zombie's initialisation fenced me, so restart from
 *               the record; not mine, stop); PostgreSQL: then roll back prepared transactions of
 *               older owner epochs that the restore did not list (a zombie's, never announced)
 *   stop        a fence error: close, which aborts the current transaction (never pending ones)
 *
 * The unit's Kafka transactional ids are folded into one producer epoch: a take-over initialises
 * all of them after its recovery commits, so they share their fate. The last owner, after its job
 * ended and every zombie stopped, takes one more checkpoint (the unit runs on; its next checkpoint
 * cleans up after the zombies).
 *
 * Properties:
 *   1. A transaction is committed only if a checkpoint file lists it (assert in commit()).
 *   2. No record is committed twice (segc <= 1), and when every owner has stopped, every record
 *      is committed exactly once.
 *   3. No data loss is ever reported: a recovery commit finds its transaction open, prepared or
 *      committed, never aborted.
 *   4. When every owner has stopped, no transaction is left open or prepared.
 *
 * Mutants (-D; `make model` checks that each yields a counterexample):
 *   MUTANT_NO_CAS         the completion record is overwritten, not compared-and-set: a zombie's
 *                         completion succeeds after the take-over and notifies its sinks
 *   MUTANT_NEWER_ANY      a take-over restores a file newer than the record whatever owner epoch
 *                         wrote it (a zombie's file, written after a take-over, is never
 *                         announced; its transactions may be gone)
 *   MUTANT_PG_ROLLBACK_ANY  (SINK_PG) the clean-up rolls back prepared transactions of every other
 *                         owner epoch, newer ones too: a zombie rolls back the new owner's
 *   MUTANT_SHARED_IDS     every owner uses the same transactional ids (not ids that carry the
 *                         owner epoch): a zombie that resumes between its own take-over and its
 *                         initialisation fences the new owner and aborts what it pre-committed
 *   MUTANT_OVERWRITE_FILE checkpoint files are not create-only: a zombie's file replaces the new
 *                         owner's completed checkpoint of the same id
 */

#ifndef NOWN
#define NOWN 2          /* owners, one after another */
#endif
#ifndef NSEG
#define NSEG 2          /* records of the unit's input */
#endif
#ifndef PERIODIC
#define PERIODIC 1      /* periodic checkpoints per owner attempt (and the final one) */
#endif
#define MAXCK 12        /* checkpoint ids 1..MAXCK-1 */
#define NTX 12          /* transactions 1..NTX-1 */
#define NPEND 3         /* pending transactions of an owner */

#define X_OPEN 1
#define X_PREPARED 2
#define X_COMMITTED 3
#define X_ABORTED 4

/* ---- the world: the completion record, the checkpoint files, Kafka or PostgreSQL ---------- */
byte rck;                       /* completion record: newest completed checkpoint, 0 = none */
byte rep;                       /* its owner epoch, 0 = none yet */
byte rver;                      /* its version (the etag a compare-and-set is against) */
bool fpres[MAXCK];              /* chk-n exists (written whole, create-only) */
byte fep[MAXCK];                /* the owner epoch that wrote it */
byte foff[MAXCK];               /* source offset */
byte fpend[MAXCK * NPEND];      /* pending transactions it lists */

byte tst[NTX];                  /* X_*: the transaction as Kafka or PostgreSQL sees it */
byte tseg[NTX];                 /* records in it (bit mask) */
byte tow[NTX];                  /* owner epoch of the owner that began it (the gid's) */
byte tkp[NTX];                  /* Kafka producer epoch it was opened under */
byte ntx = 1;
byte kep[NOWN + 1];             /* Kafka: producer epoch of the ids of each owner epoch */
bool lateinit[NOWN + 1];        /* ghost: this owner initialised its ids after a take-over */

/* ghosts */
byte segc[NSEG];
bool tlisted[NTX];
bool loss_reported;
byte started;                   /* owners started */
byte gone;                      /* owners stopped, dead or ended */
byte lastend;                   /* the last owner's job ended */

hidden byte gx, gy;

/* ---- the world's steps ------------------------------------------------------------------ */

inline commit(tt)
{
    printf("MSC: commit txn %d (owner epoch %d, records %d)\n", tt, tow[tt], tseg[tt]);
#ifdef SINK_PG
    assert(tst[tt] == X_PREPARED);
#else
    assert(tst[tt] == X_OPEN);
#endif
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
    od
}

/* Recovery commit of a restored handle: Kafka EndTxn(commit) with its producer epoch, or
 * PostgreSQL COMMIT PREPARED (42704: the marker row tells committed from lost). */
inline recover_one(tt)
{
    if
#ifdef SINK_PG
    :: tst[tt] == X_PREPARED -> commit(tt)
#else
    :: tst[tt] == X_OPEN && tkp[tt] == kep[tow[tt]] -> commit(tt)
#endif
    :: tst[tt] == X_COMMITTED -> skip
    :: else -> loss_reported = true
    fi;
    assert(!loss_reported)
}

/* ---- one owner ---------------------------------------------------------------------------- */

proctype owner(byte me)
{
    byte ck, ep, ver, f, nck, off, cur, n, soff, i, budget;
    byte pend[NPEND], spend[NPEND], known[NPEND];
    byte phase;     /* 0 running, 1 snapshot taken, 2 file written, 3 record written */
    bool fin;
    byte kp;        /* my producer epoch */

    printf("MSC: owner %d starts\n", me);
restart:
    /* take over, or restart from the record */
    atomic {
        if
        :: rep > me -> goto stop
        :: else
        fi;
        ck = rck; ep = rep; ver = rver;
        f = ck;
        nck = ck + 1;
        i = 1;
        do
        :: i < MAXCK ->
            if
            :: fpres[i] && i >= nck -> nck = i + 1
            :: else
            fi;
#ifdef MUTANT_NEWER_ANY
            if :: fpres[i] && i > f -> f = i :: else fi;
#else
            if :: fpres[i] && i > f && fep[i] == ep -> f = i :: else fi;
#endif
            i++
        :: else -> break
        od
    }
    atomic {
#ifndef MUTANT_NO_CAS
        if
        :: rver != ver -> goto restart   /* refused: read again */
        :: else
        fi;
#endif
        printf("MSC: owner %d takes the record (%d, epoch %d) -> (%d, epoch %d)\n", me, rck, rep, f, me);
        rck = f; rep = me; rver++; ver = rver;
        /* restore f: what the file lists (the process's memory is new) */
        off = 0;
        i = 0;
        do
        :: i < NPEND ->
            pend[i] = 0; known[i] = 0;
            if :: f > 0 -> known[i] = fpend[f * NPEND + i] :: else fi;
            i++
        :: else -> break
        od;
        if :: f > 0 -> off = foff[f] :: else fi;
        cur = 0; phase = 0; fin = false; budget = PERIODIC
    }
    /* recover: commit what the restored checkpoint lists */
    atomic {
        i = 0;
        do
        :: i < NPEND ->
            if :: known[i] != 0 -> recover_one(known[i]) :: else fi;
            i++
        :: else -> break
        od
    }
    /* initialise the unit's ids */
    atomic {
#ifdef SINK_PG
        gy = 1;
        do
        :: gy < ntx ->
            if
#ifdef MUTANT_PG_ROLLBACK_ANY
            :: tst[gy] == X_PREPARED && tow[gy] != me &&
#else
            :: tst[gy] == X_PREPARED && tow[gy] < me &&
#endif
               known[0] != gy && known[1] != gy && known[2] != gy ->
                printf("MSC: owner %d rolls back txn %d of owner epoch %d\n", me, gy, tow[gy]);
                tst[gy] = X_ABORTED
            :: else
            fi;
            gy++
        :: else -> break
        od
#else
        /* the ids carry the owner epoch: mine are initialised (what an earlier attempt of mine
         * left open is aborted), and those of the epoch I took the record from are fenced */
        if :: rep > me -> lateinit[me] = true :: else fi;
        kep[me]++;
        kp = kep[me];
        printf("MSC: owner %d initialises its ids (producer epoch %d), fences those of owner epoch %d\n", me, kp, ep);
#ifdef MUTANT_SHARED_IDS
        /* one set of ids for every owner epoch: initialising mine fences every other owner's */
        gy = 1;
        do
        :: gy < ntx -> if :: tst[gy] == X_OPEN -> tst[gy] = X_ABORTED :: else fi; gy++
        :: else -> break
        od;
        gy = 0;
        do
        :: gy <= NOWN -> if :: gy != me -> kep[gy]++ :: else fi; gy++
        :: else -> break
        od
#else
        if :: ep != me && ep > 0 -> kep[ep]++ :: else fi;
        gy = 1;
        do
        :: gy < ntx ->
            if :: tst[gy] == X_OPEN && (tow[gy] == me || tow[gy] == ep) -> tst[gy] = X_ABORTED :: else fi;
            gy++
        :: else -> break
        od
#endif
#endif
    }

    do
    /* emit */
    :: atomic { phase == 0 && !fin && off < NSEG ->
#ifndef SINK_PG
        if
        :: kp != kep[me] -> goto stop
        :: else
        fi;
#endif
        if
        :: cur == 0 ->
            assert(ntx < NTX);
            cur = ntx; ntx++;
            tst[cur] = X_OPEN; tow[cur] = me; tkp[cur] = kp
        :: else
        fi;
        tseg[cur] = tseg[cur] | (1 << off);
        off++
    }
    /* finish: the input ended */
    :: atomic { phase == 0 && !fin && off == NSEG -> fin = true }
    /* snapshot (periodic within the budget, or the final one) */
    :: atomic { phase == 0 && (budget > 0 || fin) && nck < MAXCK ->
        if :: !fin -> budget-- :: else fi;
        n = nck; nck++;
        if
        :: cur != 0 ->
#ifdef SINK_PG
            tst[cur] = X_PREPARED;
#endif
            i = 0;
            do
            :: pend[i] != 0 -> i++; assert(i < NPEND)
            :: else -> break
            od;
            pend[i] = cur
        :: else
        fi;
        cur = 0;
        soff = off;
        i = 0;
        do
        :: i < NPEND -> spend[i] = pend[i]; i++
        :: else -> break
        od;
        phase = 1
    }
    /* write chk-n, create-only */
    :: atomic { phase == 1 ->
        if
#ifndef MUTANT_OVERWRITE_FILE
        :: fpres[n] -> phase = 0   /* another owner's file: this checkpoint is aborted */
#endif
        :: else ->
            printf("MSC: owner %d writes chk-%d\n", me, n);
            fpres[n] = true; fep[n] = me; foff[n] = soff;
            i = 0;
            do
            :: i < NPEND ->
                fpend[n * NPEND + i] = spend[i];
                if :: spend[i] != 0 -> tlisted[spend[i]] = true :: else fi;
                i++
            :: else -> break
            od;
            phase = 2
        fi
    }
    /* complete: the record, compare-and-set */
    :: atomic { phase == 2 ->
#ifndef MUTANT_NO_CAS
        if
        :: rver != ver -> printf("MSC: owner %d: record taken, stops\n", me); goto stop
        :: else
        fi;
#endif
        printf("MSC: owner %d completes %d\n", me, n);
        rck = n; rep = me; rver++; ver = rver;
        phase = 3
    }
    /* notify: commit what is pending up to n */
    :: atomic { phase == 3 ->
        do
        :: pend[0] != 0 ->
#ifndef SINK_PG
            if
            :: kp != kep[me] -> goto stop
            :: else
            fi;
#endif
            if
            :: tst[pend[0]] == X_COMMITTED -> skip   /* a new owner's recovery was first */
            :: else -> commit(pend[0])
            fi;
            pend[0] = pend[1]; pend[1] = pend[2]; pend[2] = 0
        :: else -> break
        od;
#ifdef SINK_PG
        gy = 1;
        do
        :: gy < ntx ->
            if
#ifdef MUTANT_PG_ROLLBACK_ANY
            :: tst[gy] == X_PREPARED && tow[gy] != me &&
#else
            :: tst[gy] == X_PREPARED && tow[gy] < me &&
#endif
               known[0] != gy && known[1] != gy && known[2] != gy ->
                printf("MSC: owner %d rolls back txn %d of owner epoch %d\n", me, gy, tow[gy]);
                tst[gy] = X_ABORTED
            :: else
            fi;
            gy++
        :: else -> break
        od;
#endif
        phase = 0;
        if
        :: fin -> goto ended
        :: else
        fi
    }
    /* kill -9 of an owner that is not the last */
    :: me < NOWN -> goto dead
    od;

stop:
    /* close(): abort the current transaction, never a pending one */
    atomic {
        printf("MSC: owner %d stops on a fence\n", me);
#ifdef SINK_PG
        if :: cur != 0 && tst[cur] == X_OPEN -> tst[cur] = X_ABORTED :: else fi;
#else
        if :: cur != 0 && tst[cur] == X_OPEN && kp == kep[me] -> tst[cur] = X_ABORTED :: else fi;
#endif
        gone++
    }
    goto out;
dead:
    atomic {
        printf("MSC: owner %d killed\n", me);
#ifdef SINK_PG
        /* the connection dies: what was not prepared is rolled back */
        if :: cur != 0 && tst[cur] == X_OPEN -> tst[cur] = X_ABORTED :: else fi;
#endif
        gone++
    }
    goto out;
ended:
    atomic {
        printf("MSC: owner %d: job ended\n", me);
        gone++;
        if :: me == NOWN -> lastend = 1 :: else fi
    }
out:
    skip
}

/* the last owner's next checkpoint, after every zombie stopped: nothing to commit, and the
 * PostgreSQL clean-up of older owner epochs */
inline cleanup()
{
#ifdef SINK_PG
    gy = 1;
    do
    :: gy < ntx ->
        if
        :: tst[gy] == X_PREPARED && tow[gy] < NOWN -> tst[gy] = X_ABORTED
        :: else
        fi;
        gy++
    :: else -> break
    od
#else
    /* a zombie that initialised its ids after the take-over had fenced them leaves its
     * pre-committed transactions open until the broker aborts them (transaction.timeout.ms);
     * nobody else may leave one open */
    gy = 1;
    do
    :: gy < ntx ->
        if
        :: tst[gy] == X_OPEN && lateinit[tow[gy]] -> tst[gy] = X_ABORTED
        :: else
        fi;
        gy++
    :: else -> break
    od
#endif
}

inline check_end()
{
    gx = 0;
    do
    :: gx < NSEG -> assert(segc[gx] == 1); gx++
    :: else -> break
    od;
    gy = 1;
    do
    :: gy < ntx -> assert(tst[gy] == X_COMMITTED || tst[gy] == X_ABORTED); gy++
    :: else -> break
    od
}

init
{
    rck = 0; rep = 0; rver = 0;
    atomic { started = 1; run owner(1) }
    do
    :: started < NOWN -> atomic { started++; run owner(started) }
    :: started == NOWN -> break
    od;
    (gone == NOWN);
    assert(lastend == 1);
    cleanup();
    check_end()
}
