/*
 * Incremental checkpoints of keyed state (docs/keyed-state.md, "Incremental checkpoints"), for the
 * Spin model checker: one subtask with keyed state, the checkpoint coordinator, the files of
 * checkpoint.dir with their retention, and crashes.
 *
 *   change     the subtask puts or deletes a key (runtime/keyed.c: tpc_keyed_put / _delete): the
 *              entry's epoch is the table's; while a snapshot may build on the present state
 *              (tracking: a chain or a snapshot in flight) a put lists the key as changed and a
 *              delete logs a delete entry
 *   barrier    tpc__keyed_freeze(): incremental when the chain has 1 .. MAXCHAIN - 1 links (the
 *              listed keys and the logged deletes, with the chain as links), else full (every key;
 *              none at all when the state is empty); the epoch moves on; the snapshot is noted
 *              as taken with the chain it would end
 *   complete   tpc__keyed_completed(): the taken snapshot's chain becomes the chain; keys listed
 *              and deletes logged before its barrier are forgotten; older taken ones are dropped
 *   aborted    tpc__keyed_aborted(): the taken snapshot is dropped
 *   write      complete_checkpoint() in runtime/coordinator.c: a checkpoint whose links are not all
 *              in the folder is aborted (missing_ref()); else its file is written, and older
 *              checkpoints in flight are subsumed (dropped without a notification)
 *   announce   the completion record; then retention (tpc__checkpoint_retain(): the newest RETAIN
 *              and every file they list as refs); then the notification to the subtask
 *   crash      kill -9: the subtask's memory, the checkpoints in flight and the mailboxes are gone;
 *              the restart restores the newest file at or above the record (restore.c: pick() with
 *              read_chain()), moves the record up to it, and starts without a chain
 *
 * Properties (assertions): every checkpoint file, read with its chain, holds exactly the state the
 * subtask had at its barrier (checked when it is written and when it is restored); no retained
 * file ever lists a link that is not in the folder; a restore always finds the record's checkpoint.
 *
 * Mutants (model/check.sh): MUTANT_NO_REF_CHECK writes a checkpoint whose link retention removed;
 * MUTANT_RETAIN_NEWEST keeps only the newest RETAIN files; MUTANT_FORGET_AT_BARRIER forgets the
 * changed keys and deletes at each barrier instead of at the completion of the snapshot that
 * wrote them (what a snapshot that then aborts, or is subsumed, carried is lost).
 */

#ifndef K
#define K 2 /* keys; a value 0 is "absent" */
#endif
#ifndef NV
#define NV 2 /* values 1 .. NV */
#endif
#ifndef MAXUPD
#define MAXUPD 3 /* changes in all */
#endif
#ifndef MAXCK
#define MAXCK 6 /* checkpoint ids 1 .. MAXCK */
#endif
#ifndef MAXCHAIN
#define MAXCHAIN 3 /* state.incremental.max-chain */
#endif
#ifndef RETAIN
#define RETAIN 1 /* checkpoint.retained */
#endif
#ifndef MAXCRASH
#define MAXCRASH 1
#endif
#ifndef MAXABORT
#define MAXABORT 1
#endif
#ifndef CONC
#define CONC 2 /* checkpoint.max-concurrent */
#endif

typedef snap_t {
    bool present;
    byte nlinks;
    byte links[MAXCHAIN];
    bool wrote[K]; /* an entry for the key: its value, or a delete (val 0) */
    byte val[K];
    byte truth[K]; /* not in the file: the subtask's state at the barrier */
};

snap_t file[MAXCK + 1];  /* checkpoint.dir, by id */
snap_t acked[MAXCK + 1]; /* snapshots acknowledged, not yet written */
byte record;             /* the completion record */

/* The subtask's memory (gone with a crash). */
byte val[K];
byte ep[K];       /* the epoch of the key's last change */
bool listed[K];   /* in the list of changed entries */
bool tomb[K];     /* a delete logged */
byte tomb_ep[K];  /* the epoch of the last one */
byte epoch;
byte nlinks;
byte links[MAXCHAIN];
typedef taken_t {
    bool on;
    byte epoch;
    byte nlinks;
    byte links[MAXCHAIN];
};
taken_t taken[MAXCK + 1];
byte upd;

mtype = {TRIGGER, COMPLETE, ABORTED};
chan mail = [8] of {mtype, byte}; /* coordinator -> subtask */
chan acks = [8] of {byte};        /* subtask -> coordinator */

/* The coordinator's memory. */
byte next_id = 1;
bool inflight[MAXCK + 1];
byte ninflight;
byte announce_id, retain_id, notify_id; /* the steps of a written checkpoint still to come */
byte crashes, aborts;

/* Scratch, not part of a state: each use is within one atomic step. */
hidden byte rebuilt[K];
hidden byte i, j, l, m, kept, pick, id, k, v, ntaken;
hidden byte ok, incremental, noval;
hidden byte keep[MAXCK + 1];

/* Forget what nothing reads any more, so that equal states are stored once. */
inline clear_snap(x)
{
    x.present = false;
    x.nlinks = 0;
    m = 0;
    do
    :: m < MAXCHAIN -> x.links[m] = 0; m++
    :: else -> break
    od;
    m = 0;
    do
    :: m < K -> x.wrote[m] = false; x.val[m] = 0; x.truth[m] = 0; m++
    :: else -> break
    od
}

inline clear_taken(x)
{
    x.on = false;
    x.epoch = 0;
    x.nlinks = 0;
    m = 0;
    do
    :: m < MAXCHAIN -> x.links[m] = 0; m++
    :: else -> break
    od
}

/* The state checkpoint f holds, read with its chain, into rebuilt[]; every link must be there
 * and hold the chain up to it. */
inline rebuild(f)
{
    i = 0;
    do
    :: i < K -> rebuilt[i] = 0; i++
    :: else -> break
    od;
    j = 0;
    do
    :: j < file[f].nlinks ->
        l = file[f].links[j];
        assert(file[l].present);
        assert(file[l].nlinks == j);
        m = 0;
        do
        :: m < j -> assert(file[l].links[m] == file[f].links[m]); m++
        :: else -> break
        od;
        i = 0;
        do
        :: i < K -> if :: file[l].wrote[i] -> rebuilt[i] = file[l].val[i] :: else fi; i++
        :: else -> break
        od;
        j++
    :: else -> break
    od;
    i = 0;
    do
    :: i < K ->
        if :: file[f].wrote[i] -> rebuilt[i] = file[f].val[i] :: else fi;
        assert(rebuilt[i] == file[f].truth[i]);
        i++
    :: else -> break
    od
}

#define tracking (nlinks > 0 || ntaken > 0)

proctype task()
{
end:
    do
    :: atomic {
           upd < MAXUPD ->
           upd++;
           select(k : 0 .. K - 1);
           select(v : 0 .. NV);
           ntaken = 0;
           i = 1;
           do
           :: i <= MAXCK -> ntaken = ntaken + taken[i].on; i++
           :: else -> break
           od;
           val[k] = v;
           ep[k] = epoch;
           if
           :: v != 0 && tracking -> listed[k] = true
           :: v == 0 -> listed[k] = false;
               if :: tracking -> tomb[k] = true; tomb_ep[k] = epoch :: else fi
           :: else
           fi
       }
    :: atomic {
           mail?TRIGGER(id) ->
           incremental = nlinks > 0 && nlinks < MAXCHAIN;
           noval = true;
           i = 0;
           do
           :: i < K -> noval = noval && val[i] == 0; i++
           :: else -> break
           od;
           acked[id].present = true;
           if
           :: !incremental && noval -> /* no keyed state: nothing written, nothing taken */
               acked[id].nlinks = 0;
               i = 0;
               do
               :: i < K -> acked[id].wrote[i] = false; acked[id].truth[i] = 0; i++
               :: else -> break
               od
           :: else ->
               acked[id].nlinks = (incremental -> nlinks : 0);
               i = 0;
               do
               :: i < MAXCHAIN -> acked[id].links[i] = links[i]; i++
               :: else -> break
               od;
               i = 0;
               do
               :: i < K ->
                   acked[id].truth[i] = val[i];
                   if
                   :: incremental ->
                       acked[id].wrote[i] = listed[i] || tomb[i];
                       acked[id].val[i] = (listed[i] -> val[i] : 0)
                   :: else -> acked[id].wrote[i] = val[i] != 0; acked[id].val[i] = val[i]
                   fi;
                   i++
               :: else -> break
               od;
               epoch++;
               taken[id].on = true;
               taken[id].epoch = epoch;
               i = 0;
               do
               :: i < MAXCHAIN -> taken[id].links[i] = (incremental -> links[i] : 0); i++
               :: else -> break
               od;
               if
               :: incremental -> taken[id].links[nlinks] = id; taken[id].nlinks = nlinks + 1
               :: else -> taken[id].links[0] = id; taken[id].nlinks = 1
               fi
#ifdef MUTANT_FORGET_AT_BARRIER
               ;
               i = 0;
               do
               :: i < K -> listed[i] = false; tomb[i] = false; i++
               :: else -> break
               od
#endif
           fi;
           acks!id;
           id = 0;
           k = 0;
           v = 0;
           i = 0;
           ntaken = 0;
           incremental = false;
           noval = false
       }
    :: atomic {
           mail?COMPLETE(id) ->
           if
           :: taken[id].on ->
               nlinks = taken[id].nlinks;
               i = 0;
               do
               :: i < MAXCHAIN -> links[i] = taken[id].links[i]; i++
               :: else -> break
               od;
               i = 0;
               do
               :: i < K ->
                   if :: listed[i] && ep[i] < taken[id].epoch -> listed[i] = false :: else fi;
                   if :: tomb[i] && tomb_ep[i] < taken[id].epoch -> tomb[i] = false :: else fi;
                   i++
               :: else -> break
               od
           :: else
           fi;
           i = 1;
           do
           :: i <= id -> clear_taken(taken[i]); i++
           :: else -> break
           od;
           id = 0
       }
    :: atomic { mail?ABORTED(id) -> clear_taken(taken[id]); id = 0 }
    od
}

proctype coordinator()
{
end:
    do
    :: atomic { /* trigger */
           next_id <= MAXCK && ninflight < CONC && announce_id == 0 ->
           inflight[next_id] = true;
           ninflight++;
           mail!TRIGGER(next_id);
           next_id++
       }
    :: atomic { /* an ack: write the checkpoint, or abort it when a link is gone */
           announce_id == 0 && acks?[id] ->
           acks?id;
           if
           :: !inflight[id] -> clear_snap(acked[id]) /* aborted or subsumed meanwhile */
           :: else ->
               ok = true;
               i = 0;
               do
               :: i < acked[id].nlinks -> ok = ok && file[acked[id].links[i]].present; i++
               :: else -> break
               od;
#ifdef MUTANT_NO_REF_CHECK
               ok = true;
#endif
               inflight[id] = false;
               ninflight--;
               if
               :: !ok -> mail!ABORTED(id); clear_snap(acked[id])
               :: else ->
                   file[id].present = true;
                   file[id].nlinks = acked[id].nlinks;
                   i = 0;
                   do
                   :: i < MAXCHAIN -> file[id].links[i] = acked[id].links[i]; i++
                   :: else -> break
                   od;
                   i = 0;
                   do
                   :: i < K ->
                       file[id].wrote[i] = acked[id].wrote[i];
                       file[id].val[i] = acked[id].val[i];
                       file[id].truth[i] = acked[id].truth[i];
                       i++
                   :: else -> break
                   od;
                   rebuild(id);
                   clear_snap(acked[id]);
                   i = 1; /* older checkpoints in flight are subsumed */
                   do
                   :: i < id -> if :: inflight[i] -> inflight[i] = false; ninflight-- :: else fi; i++
                   :: else -> break
                   od;
                   announce_id = id
               fi
           fi
       }
    :: atomic { announce_id != 0 && retain_id == 0 -> record = announce_id; retain_id = announce_id }
    :: atomic { /* retention: the newest RETAIN and what they list */
           retain_id != 0 && notify_id == 0 ->
           kept = 0;
           i = MAXCK;
           do
           :: i >= 1 ->
               keep[i] = keep[i] || (file[i].present && kept < RETAIN);
               if
               :: file[i].present && kept < RETAIN ->
                   kept++
#ifndef MUTANT_RETAIN_NEWEST
                   ;
                   j = 0;
                   do
                   :: j < file[i].nlinks -> keep[file[i].links[j]] = true; j++
                   :: else -> break
                   od
#endif
               :: else
               fi;
               i--
           :: else -> break
           od;
           i = 1;
           do
           :: i <= MAXCK -> if :: !keep[i] && file[i].present -> clear_snap(file[i]) :: else fi; keep[i] = false; i++
           :: else -> break
           od;
           /* no file in the folder lists a link that is gone */
           i = 1;
           do
           :: i <= MAXCK ->
               j = 0;
               do
               :: file[i].present && j < file[i].nlinks -> assert(file[file[i].links[j]].present); j++
               :: else -> break
               od;
               i++
           :: else -> break
           od;
           notify_id = retain_id
       }
    :: atomic {
           notify_id != 0 ->
           mail!COMPLETE(notify_id);
           announce_id = 0;
           retain_id = 0;
           notify_id = 0
       }
    :: atomic { /* a decline or a timeout */
           aborts < MAXABORT && ninflight > 0 && announce_id == 0 ->
           id = 0;
           i = 1;
           do
           :: i <= MAXCK && inflight[i] -> id = i;
               if
               :: break /* this one */
               :: i++   /* or a later one */
               fi
           :: i <= MAXCK && !inflight[i] -> i++
           :: i > MAXCK -> break
           od;
           inflight[id] = false;
           ninflight--;
           aborts++;
           mail!ABORTED(id)
       }
    :: atomic { /* kill -9 and restart */
           crashes < MAXCRASH ->
           crashes++;
           do
           :: mail?_, _
           :: acks?_
           :: empty(mail) && empty(acks) -> break
           od;
           i = 1;
           do
           :: i <= MAXCK -> inflight[i] = false; clear_taken(taken[i]); clear_snap(acked[i]); i++
           :: else -> break
           od;
           ninflight = 0;
           announce_id = 0;
           retain_id = 0;
           notify_id = 0;
           nlinks = 0;
           pick = 0;
           i = MAXCK;
           do
           :: i >= 1 && i >= record && file[i].present -> pick = i; break
           :: i >= 1 && !(i >= record && file[i].present) -> i--
           :: else -> break
           od;
           assert(record == 0 || pick != 0);
           if
           :: pick != 0 -> rebuild(pick); if :: pick > record -> record = pick :: else fi
           :: else -> i = 0; do :: i < K -> rebuilt[i] = 0; i++ :: else -> break od
           fi;
           i = 0;
           do
           :: i < K -> val[i] = rebuilt[i]; listed[i] = false; tomb[i] = false; ep[i] = 0; tomb_ep[i] = 0; i++
           :: else -> break
           od;
           epoch = 0;
           i = 0;
           do
           :: i < MAXCHAIN -> links[i] = 0; i++
           :: else -> break
           od
       }
    od
}

init
{
    atomic { run task(); run coordinator() }
}
