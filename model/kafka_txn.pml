/*
 * One transactional id of the Kafka sink against the transaction coordinator, for the Spin model
 * checker: how a handle proves "committed" for its one transaction, under transaction protocol v1
 * and (with -DTV2) v2.
 *
 * twopc.pml models the whole job with a coordinator that only the sink touches; there the pool's
 * hold rule alone keeps EndTxn's answer truthful. This model zooms in on one id and lets the world
 * touch it too: the broker aborts an open transaction after its timeout, an operator ends one by
 * hand (`twopc kafka abort --force`), another process initialises the id, the job's producer
 * session goes on with a later transaction of the same producer id and epoch, and librdkafka
 * reports a commit as done without sending EndTxn. Every such event is a fault (at most MAXFAULT);
 * the process may crash once (kill -9) at any step, and then recovers.
 *
 * The coordinator (Apache Kafka's TransactionCoordinator, endTransaction):
 *   v1  the epoch stays across the transactions of one producer session. EndTxn(commit|abort) with
 *       an epoch other than the id's is PRODUCER_FENCED; with the id's epoch it ends an ongoing
 *       transaction, and on a completed one it answers NONE when the result is the same (a retry)
 *       and INVALID_TXN_STATE when not. So NONE says the id's *last* transaction ended that way.
 *   v2  every end bumps the epoch (E -> E+1). On an ongoing transaction only epoch E is valid; on a
 *       completed one only E (the epoch before the bump) is, and answers NONE for the same result
 *       (retryOnEpochBump); an abort after the timeout fences with a bump as well.
 *   Both: InitProducerId bumps the epoch, aborts what is ongoing, and leaves the id empty;
 *   DescribeTransactions shows state, producer id, epoch and the start time of the current or last
 *   transaction (a fresh stamp each time one begins).
 *
 * The sink (connectors/kafka/sink, wire/kafka_proof.c): begin (the first record opens the
 * transaction at the coordinator, or joins the one open there), pre-commit (describe: the
 * transaction must be ongoing with librdkafka's producer id; the handle stores the coordinator's
 * producer id, epoch and start time), the checkpoint completes (the handle is listed), commit on
 * notify (librdkafka's EndTxn, then the proof), and the hold rule: the id is reused only once a
 * later checkpoint no longer lists the handle. The proof: describe; ongoing with the same producer
 * id, epoch and start time -> EndTxn(commit) with them, describe again; complete-commit with the
 * same producer id and start time at epoch E or E+1 -> committed; anything else -> data loss.
 * Recovery after the crash proves the restored handle the same way, then initialises the id.
 *
 * Properties (assertions):
 *   A. A verdict "committed" means that very transaction is committed (a commit is proven for it).
 *   B. Nothing is committed by the sink's own EndTxn but the transaction its handle names.
 *   C. When the run ends, every transaction a completed checkpoint listed is committed, or a data
 *      loss was reported (loudly): never a silent loss.
 *   D. Without a fault, no data loss is ever reported (crashes alone lose nothing).
 *
 * Mutants (-D; `make model` checks that each yields a counterexample):
 *   MUTANT_INFER_COMMITTED  recovery takes EndTxn's NONE as "committed" (the id's state, not the
 *                           transaction's): v1, a transaction aborted by hand, then a later one of
 *                           the same producer id and epoch committed -> A
 *   MUTANT_EPOCH_BEFORE_BUMP  the handle stores the epoch librdkafka had before its last end (the
 *                           statistics the sink once read): v2 bumped it at that end, so recovery
 *                           meets an epoch it cannot prove -> D
 *   MUTANT_TRUST_SUCCESS    a commit that librdkafka reports as done is not proven: it never sent
 *                           EndTxn, the id is released, a crash, and recovery's InitProducerId
 *                           aborts the transaction with nobody told -> C
 */

#ifndef NT
#define NT 2          /* transactions the sink begins on the id */
#endif
#ifndef MAXFAULT
#define MAXFAULT 1
#endif
#define NS 8          /* start stamps 1..NS-1 */

#define S_EMPTY 0
#define S_ONGOING 1
#define S_COMMIT 2    /* PrepareCommit or CompleteCommit: the markers are the broker's business */
#define S_ABORT 3

#define A_NONE 0
#define A_FENCED 1
#define A_INVALID 2
#define A_MAPPING 3

#define X_OPEN 1
#define X_COMMITTED 2
#define X_ABORTED 3

#define V_COMMITTED 1
#define V_OPEN 2
#define V_LOSS 3

/* sink phases */
#define P_IDLE 0      /* no transaction of its own on the id */
#define P_OPEN 1      /* records written */
#define P_PRE 2       /* pre-committed, checkpoint in flight */
#define P_NOTIFY 3    /* checkpoint complete, commit on notify */
#define P_PROVE 4     /* commit sent (or said done): the proof runs */
#define P_RECOVER 5   /* after the crash: recovery proves the restored handle */
#define P_END 6

/* the proof runs after a commit on notify (not in MUTANT_TRUST_SUCCESS) and in recovery */
#ifdef MUTANT_TRUST_SUCCESS
#define PROVING (phase == P_RECOVER)
#else
#define PROVING (phase == P_PROVE || phase == P_RECOVER)
#endif

/* ---- the coordinator (survives a crash) ---- */
byte cst = S_EMPTY;
byte cpid = 1;
byte cep = 0;
byte cstart = 0;
byte stamp = 0;
byte xst[NS];        /* each transaction (by start stamp) as the broker sees it */
bool listed[NS];     /* ghost: a completed checkpoint listed it */

/* ---- the checkpoint (survives a crash) ---- */
byte hpid, hep, hstart;   /* the pending handle of the newest completed checkpoint, hstart 0 = none */

/* ---- the process (lost in a crash) ---- */
byte phase = P_IDLE;
byte ppid = 1, pep = 0;   /* librdkafka's producer id and epoch */
byte pstale = 0;          /* its epoch before its last end */
byte pcur;                /* start stamp of the producer's transaction (ghost) */
byte pre_pid, pre_ep, pre_start;
byte began;
byte pv;                  /* proof step: 0 describe, 1 EndTxn sent, 2 describe again */

byte faults, ans, verdict;
bool crashed, loss, sinkcall;

inline complete(cm)
{
    if
    :: sinkcall -> assert(cstart == hstart)   /* B */
    :: else
    fi;
    if
    :: cm -> xst[cstart] = X_COMMITTED; cst = S_COMMIT
    :: else -> xst[cstart] = X_ABORTED; cst = S_ABORT
    fi
}

/* EndTxn(commit = cm) with producer id pd and epoch ep; the answer in ans */
inline end_txn(cm, pd, ep)
{
    if
    :: pd != cpid -> ans = A_MAPPING
    :: else ->
#ifdef TV2
        if
        :: cst == S_ONGOING && ep == cep -> complete(cm); cep++; ans = A_NONE
        :: cst == S_ONGOING && ep != cep -> ans = A_FENCED
        :: (cst == S_COMMIT || cst == S_ABORT) && ep + 1 == cep ->
            if
            :: (cst == S_COMMIT) == cm -> ans = A_NONE
            :: else -> ans = A_INVALID
            fi
        :: (cst == S_COMMIT || cst == S_ABORT) && ep + 1 != cep -> ans = A_FENCED
        :: cst == S_EMPTY && ep == cep -> ans = A_INVALID
        :: cst == S_EMPTY && ep != cep -> ans = A_FENCED
        fi
#else
        if
        :: ep != cep -> ans = A_FENCED
        :: ep == cep && cst == S_ONGOING -> complete(cm); ans = A_NONE
        :: ep == cep && cst == S_COMMIT ->
            if
            :: cm -> ans = A_NONE
            :: else -> ans = A_INVALID
            fi
        :: ep == cep && cst == S_ABORT ->
            if
            :: cm -> ans = A_INVALID
            :: else -> ans = A_NONE
            fi
        :: ep == cep && cst == S_EMPTY -> ans = A_INVALID
        fi
#endif
    fi
}

/* InitProducerId: a new epoch, what is ongoing aborted, the id empty */
inline init_producer()
{
    if
    :: cst == S_ONGOING -> xst[cstart] = X_ABORTED
    :: else
    fi;
    cep++;
    cst = S_EMPTY
}

/* DescribeTransactions, judged against the handle (wire/kafka_proof.c) */
inline describe_verdict()
{
    if
    :: cst == S_COMMIT && cpid == hpid && cstart == hstart && (cep == hep || cep == hep + 1) ->
        verdict = V_COMMITTED
    :: cst == S_ONGOING && cpid == hpid && cep == hep && cstart == hstart -> verdict = V_OPEN
    :: else -> verdict = V_LOSS
    fi
}

/* the run has failed: the job restarts and recovers as after a crash (the crash budget is one) */
inline fail()
{
    printf("MSC: crash or failure: restart and recover\n");
    crashed = true;
    phase = P_RECOVER;
    pv = 0
}

/* the proof has come to a verdict: for the commit on notify (P_PROVE) or recovery (P_RECOVER) */
inline judged()
{
    printf("MSC: verdict for txn %d: %d (1 committed, 3 data loss)\n", hstart, verdict);
    if
    :: verdict == V_COMMITTED -> assert(xst[hstart] == X_COMMITTED)   /* A */
    :: else -> assert(faults > 0); loss = true                          /* D */
    fi;
    if
    :: phase == P_RECOVER || loss -> init_producer(); phase = P_END
    :: else -> ppid = cpid; pstale = pep; pep = cep; phase = P_IDLE
    fi
}

init
{
    do
    /* ---- the sink ---- */
    :: atomic { phase == P_IDLE && began < NT && hstart == 0 ->   /* hold rule: the id is free */
        if
        :: ppid != cpid || pep != cep -> fail()      /* AddPartitionsToTxn fenced */
        :: else ->
            if
            :: cst == S_ONGOING -> pcur = cstart     /* joins what is open there */
            :: else ->
                assert(stamp + 1 < NS);
                stamp++;
                cst = S_ONGOING;
                cstart = stamp;
                xst[stamp] = X_OPEN;
                pcur = stamp
            fi;
            printf("MSC: sink begins txn %d (producer epoch %d)\n", pcur, pep);
            began++;
            phase = P_OPEN
        fi }
    :: atomic { phase == P_OPEN ->                   /* pre-commit */
        if
        :: cst == S_ONGOING && cpid == ppid && cstart == pcur ->
            pre_pid = cpid;
#ifdef MUTANT_EPOCH_BEFORE_BUMP
            pre_ep = pstale;
#else
            pre_ep = cep;
#endif
            pre_start = cstart;
            printf("MSC: pre-commit txn %d, handle epoch %d (coordinator epoch %d)\n", pre_start, pre_ep, cep);
            phase = P_PRE
        :: else -> fail()                             /* the checkpoint fails, the job restarts */
        fi }
    :: atomic { phase == P_PRE ->                     /* the checkpoint completes */
        hpid = pre_pid; hep = pre_ep; hstart = pre_start;
        listed[hstart] = true;
        printf("MSC: checkpoint complete, lists txn %d\n", hstart);
        phase = P_NOTIFY }
    :: atomic { phase == P_NOTIFY ->                  /* commit on notify */
        end_txn(true, ppid, pep);
        printf("MSC: librdkafka commits (epoch %d): answer %d\n", pep, ans);
        if
        :: ans == A_NONE -> phase = P_PROVE; pv = 0
        :: else -> fail()
        fi }
    :: atomic { phase == P_NOTIFY && faults < MAXFAULT ->   /* "done", but no EndTxn was sent */
        faults++;
        printf("MSC: librdkafka says committed without sending EndTxn\n");
        phase = P_PROVE;
        pv = 0 }
#ifdef MUTANT_TRUST_SUCCESS
    :: atomic { phase == P_PROVE -> ppid = cpid; pstale = pep; pep = cep; phase = P_IDLE }
#endif
    :: atomic { PROVING && hstart != 0 && pv == 0 ->
#ifdef MUTANT_INFER_COMMITTED
        if
        :: phase == P_RECOVER ->
            sinkcall = true; end_txn(true, hpid, hep); sinkcall = false;
            printf("MSC: recovery EndTxn(commit, epoch %d): answer %d\n", hep, ans);
            if
            :: ans == A_NONE -> verdict = V_COMMITTED
            :: else -> verdict = V_LOSS
            fi;
            judged()
        :: else ->
#endif
        describe_verdict();
        if
        :: verdict == V_OPEN -> pv = 1
        :: else -> judged()
        fi
#ifdef MUTANT_INFER_COMMITTED
        fi
#endif
        }
    :: atomic { PROVING && pv == 1 ->   /* the sink's own EndTxn */
        sinkcall = true; end_txn(true, hpid, hep); sinkcall = false;
        pv = 2 }
    :: atomic { PROVING && pv == 2 ->   /* describe again */
        describe_verdict();
        if
        :: verdict == V_OPEN -> verdict = V_LOSS     /* still open after EndTxn: not proven */
        :: else
        fi;
        judged() }
    :: atomic { phase == P_IDLE && hstart != 0 ->    /* a later checkpoint no longer lists it */
        hstart = 0 }
    :: atomic { phase == P_RECOVER && hstart == 0 -> init_producer(); phase = P_END }
    :: atomic { !crashed && phase != P_END ->        /* kill -9 */
        fail() }
    :: atomic { (phase == P_IDLE && began == NT && hstart == 0) || phase == P_END ->
        stamp = 1;                                    /* C: no silent loss */
        do
        :: stamp < NS ->
            assert(!listed[stamp] || xst[stamp] == X_COMMITTED || loss);
            stamp++
        :: else -> break
        od;
        break }

    /* ---- the world ---- */
    :: atomic { faults < MAXFAULT && cst == S_ONGOING ->   /* the broker's transaction timeout */
        faults++;
        printf("MSC: broker times out txn %d\n", cstart);
        xst[cstart] = X_ABORTED;
        cst = S_ABORT;
        cep++ }
    :: atomic { faults < MAXFAULT && cst == S_ONGOING ->   /* an operator's EndTxn(abort) */
        faults++;
        printf("MSC: operator aborts txn %d by hand\n", cstart);
        end_txn(false, cpid, cep) }
    :: atomic { faults < MAXFAULT ->                       /* another process initialises the id */
        faults++;
        printf("MSC: another process initialises the id\n");
        init_producer() }
    :: atomic { faults < MAXFAULT && cst != S_ONGOING && stamp + 1 < NS ->
        /* the same producer session (id and epoch) runs a later transaction and commits it */
        faults++;
        stamp++;
        cst = S_ONGOING;
        cstart = stamp;
        xst[stamp] = X_OPEN;
        printf("MSC: the producer session runs txn %d (epoch %d) and commits it\n", stamp, cep);
        end_txn(true, cpid, cep) }
    od
}
