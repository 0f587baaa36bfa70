/* rules.c -- the jobs collection's validator and transition rule
 * (docs/validation.md, "Transition rules"): what a write through the
 * generic document commands may do to a job.  job.c's rules table
 * installs them; the state machine they guard, and the invariants J1-J18
 * they keep, head job.c.  Kept apart from job.c because the two texts
 * grew with every feature of the queue (flows, cancel, unique windows)
 * and are data, not code. */
#include "txn/jobq/jobq.h"

/* The shape the protocol relies on (docs/validation.md): a write through
 * the generic document commands that breaks it is refused, and the audit
 * reports any job that does not match (docs/jobs.md).  A job goes
 * only once it is over: a live one may hold a lease, effects and a
 * unique key. */
#define ID "{\"bsonType\":\"string\",\"minLength\":1,\"maxLength\":128}"
/* A collection an effect may name (dtx_check_collection's rule): a job
 * naming any other value in fx_colls would stop recovery and the audit
 * at it. */
#define COLL                                                                  \
  "{\"bsonType\":\"string\",\"pattern\":"                                  \
  "\"^(?!_dtx|system\\\\.)[A-Za-z0-9_.-]{1,120}$\"}"
#define LONG "{\"bsonType\":\"long\"}"
#define LONG_OR_NULL "{\"bsonType\":[\"long\",\"null\"]}"
#define LIVE                                                                  \
  "\"" DTX_JOB_READY "\",\"" DTX_JOB_DELAYED "\",\"" DTX_JOB_RUNNING       \
  "\",\"" DTX_JOB_WAITING "\",\"" DTX_JOB_HELD "\""
#define OVER                                                                  \
  "\"" DTX_JOB_SUCCEEDED "\",\"" DTX_JOB_DEAD "\",\"" DTX_JOB_CANCELED "\""
_Static_assert(DTX_JOB_CHILDREN_MAX == 1000, "job_shape's children maxItems");
const char dtx__job_shape[] =
    "{\"$jsonSchema\":{\"bsonType\":\"object\","
    "\"required\":[\"_id\",\"queue\",\"type\",\"state\",\"priority\","
    "\"rank\",\"run_at\",\"attempts\",\"max_attempts\",\"backoff_ms\","
    "\"fx_colls\",\"created\"," DTX__KIT_ITEM_REQUIRED "],"
    "\"properties\":{\"_id\":" ID ",\"queue\":" ID ",\"type\":" ID ","
    "\"state\":{\"enum\":[\"" DTX_JOB_READY "\",\"" DTX_JOB_DELAYED
    "\",\"" DTX_JOB_RUNNING "\",\"" DTX_JOB_SUCCEEDED "\",\"" DTX_JOB_DEAD
    "\",\"" DTX_JOB_CANCELED "\",\"" DTX_JOB_WAITING "\",\"" DTX_JOB_HELD
    "\"]},"
    "\"priority\":{\"bsonType\":\"long\",\"minimum\":-100,\"maximum\":100},"
    "\"rank\":{\"bsonType\":\"long\",\"minimum\":-100,\"maximum\":100},"
    "\"run_at\":" LONG ",\"attempts\":{\"bsonType\":\"long\",\"minimum\":0},"
    "\"max_attempts\":{\"bsonType\":\"long\",\"minimum\":1},"
    "\"backoff_ms\":{\"bsonType\":\"long\",\"minimum\":0,"
    "\"maximum\":3600000},"
    "\"unique_key\":{\"bsonType\":[\"string\",\"null\"]},"
    "\"unique_live\":{\"bsonType\":\"string\"},"
    "\"last_error\":{\"bsonType\":[\"string\",\"null\"]},"
    "\"fx_colls\":{\"bsonType\":\"array\",\"items\":" COLL "},"
    "\"fx_cleared\":{\"bsonType\":\"bool\"},"
    "\"fx_pins\":{\"bsonType\":\"object\"},"
    "\"fx_until\":" LONG ","
    "\"ev_n\":{\"bsonType\":\"long\",\"minimum\":0},"
    "\"ev_sent\":{\"bsonType\":\"long\",\"minimum\":0},"
    "\"ev_out\":{\"bsonType\":\"array\"},"
    "\"ev_pend\":" LONG ","
    "\"cancel_requested\":" LONG "," /* J17 */
    "\"unique_until\":" LONG ",\"unique_for_ms\":{\"bsonType\":\"long\","
    "\"minimum\":0}," /* J18 */
    "\"created\":" LONG ",\"finished\":" LONG_OR_NULL ","
    /* flows (flow.c) */
    "\"parent\":" ID ",\"failed_child\":" ID ","
    "\"children\":{\"bsonType\":\"array\",\"maxItems\":1000,"
    "\"items\":" ID "},"
    "\"on_child_fail\":{\"enum\":[\"fail\",\"hold\"]},"
    DTX__KIT_ITEM_PROPS "}},"
    /* J7: what each state carries, as the steps of the diagram write it.
     * A state written by hand without the fields that go with it (a
     * succeeded job set back to ready would run again; a delayed one set
     * to succeeded would never run) contradicts one of these. */
    "\"$nor\":["
    "{\"state\":{\"$in\":[" LIVE "]},\"finished\":{\"$ne\":null}},"
    "{\"state\":{\"$in\":[" OVER "]},\"finished\":null},"
    "{\"state\":{\"$ne\":\"" DTX_JOB_SUCCEEDED "\"},"
    "\"result\":{\"$ne\":null}},"
    /* A parent made dead by its child (flow.c, failed_child) never ran. */
    "{\"state\":{\"$in\":[\"" DTX_JOB_SUCCEEDED "\",\"" DTX_JOB_DEAD
    "\"]},\"attempts\":{\"$lt\":1},\"failed_child\":{\"$exists\":false}},"
    "{\"state\":{\"$in\":[\"" DTX_JOB_RUNNING "\",\"" DTX_JOB_SUCCEEDED
    "\",\"" DTX_JOB_DEAD "\"]},\"epoch\":{\"$lt\":1},"
    "\"failed_child\":{\"$exists\":false}},"
    /* J13-J15: a waiting job has children; a held one a parent; only a
     * dead one names the child that failed it. */
    "{\"state\":\"" DTX_JOB_WAITING "\",\"children.0\":{\"$exists\":false}},"
    "{\"state\":\"" DTX_JOB_WAITING "\",\"epoch\":{\"$gt\":0}},"
    "{\"state\":\"" DTX_JOB_HELD "\",\"parent\":{\"$exists\":false}},"
    "{\"state\":{\"$ne\":\"" DTX_JOB_DEAD "\"},"
    "\"failed_child\":{\"$exists\":true}}]}";
#undef ID
#undef COLL
#undef LONG
#undef LONG_OR_NULL
#undef LIVE
#undef OVER

/* The transition rule (docs/validation.md, "Transition rules"): a
 * plain update of a job can make only a change the protocol makes.
 *  - What add records and no step changes is immutable (a rewritten
 *    payload, queue or max_attempts would run another job under this
 *    one's history and effect markers).
 *  - epoch only grows (J1: a holder fenced off stays fenced off), and so
 *    does fx_until (effect.c F3: markers must outlive every bounded
 *    write).
 *  - The state moves only along the diagram's edges; a terminal job
 *    changes only by recovery's forgetting of its markers (which sets
 *    fx_cleared), and a dead one is retried only while its markers are
 *    kept (J6).  So a succeeded job cannot be made runnable again (its
 *    effects would be judged anew), nor a canceled one revived.
 *  - fx_cleared, once true, stays true (a retry after the markers went
 *    could apply the effects twice).
 *  - fx_pins and fx_colls change only by the job's own steps (a rule of
 *    scope "plain"): a pin forgotten or moved by hand made the next call
 *    of the effect pick a second document (effect.c F1), and a collection
 *    taken off the list hid a marker from recovery.
 * The delete guard admits a terminal job whose markers are gone (fx_colls
 * emptied by recovery): a job deleted with markers left, then added again
 * under its id, would apply its effects a second time.
 * What the rules cannot compare (attempts reset on a running job) the
 * audit reports (audit.c). */
#define S_(x) "\"" x "\""
#define TERMINAL_MOVE(st)                                                     \
  "{\"name\":\"forget-markers(" st ")\",\"from\":{\"state\":" S_(st)      \
  "},\"to\":{\"state\":" S_(st) ",\"fx_cleared\":true}}"
/* J18: a terminal job's passed unique window goes (job.unique.expire). */
#define UNIQUE_EXPIRE(st)                                                     \
  "{\"name\":\"unique-expire(" st ")\",\"from\":{\"state\":" S_(st)    \
  ",\"unique_until\":{\"$exists\":true}},\"to\":{\"state\":" S_(st)     \
  ",\"unique_until\":{\"$exists\":false},"                                \
  "\"unique_live\":{\"$exists\":false}}}"
const char dtx__job_transition[] =
    "[{\"immutable\":[\"queue\",\"type\",\"payload\",\"priority\",\"rank\","
    "\"max_attempts\",\"backoff_ms\",\"unique_key\",\"created\",\"sched\","
    "\"parent\",\"on_child_fail\"],"
    "\"increasing\":[\"epoch\",\"fx_until\",\"ev_n\",\"ev_sent\"]},"
    /* The edges judge plain writes (the job's own steps make only these,
     * and also the events relay's pull, which keeps any state: J21) */
    "{\"scope\":\"plain\",\"steps\":[\"job\"],"
    "\"moves\":["
    "{\"name\":\"claim\",\"from\":{\"state\":" S_(DTX_JOB_READY) "},"
    "\"to\":{\"state\":" S_(DTX_JOB_RUNNING) "}},"
    "{\"name\":\"renew\",\"from\":{\"state\":" S_(DTX_JOB_RUNNING) "},"
    "\"to\":{\"state\":" S_(DTX_JOB_RUNNING) "}},"
    /* J17: a running job whose cancel was requested ends canceled only */
    "{\"name\":\"complete\",\"from\":{\"state\":" S_(DTX_JOB_RUNNING) ","
    "\"cancel_requested\":{\"$exists\":false}},"
    "\"to\":{\"state\":" S_(DTX_JOB_SUCCEEDED) "}},"
    "{\"name\":\"cancel-running\",\"from\":{\"state\":" S_(DTX_JOB_RUNNING)
    ",\"cancel_requested\":{\"$exists\":true}},"
    "\"to\":{\"state\":" S_(DTX_JOB_CANCELED) "}},"
    "{\"name\":\"fail\",\"from\":{\"state\":" S_(DTX_JOB_RUNNING) ","
    "\"cancel_requested\":{\"$exists\":false}},"
    "\"to\":{\"state\":{\"$in\":[" S_(DTX_JOB_DELAYED) "," S_(DTX_JOB_DEAD)
    "]}}},"
    "{\"name\":\"promote\",\"from\":{\"state\":" S_(DTX_JOB_DELAYED) "},"
    "\"to\":{\"state\":" S_(DTX_JOB_READY) "}},"
    "{\"name\":\"cancel\",\"from\":{\"state\":{\"$in\":[" S_(DTX_JOB_READY)
    "," S_(DTX_JOB_DELAYED) "," S_(DTX_JOB_WAITING) "," S_(DTX_JOB_HELD)
    "]}},\"to\":{\"state\":" S_(DTX_JOB_CANCELED) "}},"
    "{\"name\":\"retry\",\"from\":{\"state\":" S_(DTX_JOB_DEAD) ","
    "\"fx_cleared\":{\"$ne\":true},\"failed_child\":{\"$exists\":false}},"
    "\"to\":{\"state\":" S_(DTX_JOB_READY) ",\"attempts\":0}},"
    /* flows (flow.c): attach to a job never claimed (J13), release a
     * held child (J14), settle a waiting parent (J15), retry a parent
     * its child failed */
    "{\"name\":\"flow-attach\",\"from\":{\"state\":{\"$in\":["
    S_(DTX_JOB_READY) "," S_(DTX_JOB_DELAYED) "," S_(DTX_JOB_WAITING)
    "]},\"epoch\":0},\"to\":{\"state\":" S_(DTX_JOB_WAITING) "}},"
    "{\"name\":\"flow-release\",\"from\":{\"state\":" S_(DTX_JOB_HELD)
    "},\"to\":{\"state\":{\"$in\":[" S_(DTX_JOB_READY) ","
    S_(DTX_JOB_DELAYED) "]}}},"
    "{\"name\":\"flow-settle\",\"from\":{\"state\":" S_(DTX_JOB_WAITING)
    "},\"to\":{\"state\":{\"$in\":[" S_(DTX_JOB_READY) ","
    S_(DTX_JOB_DELAYED) "," S_(DTX_JOB_DEAD) "]}}},"
    "{\"name\":\"flow-retry\",\"from\":{\"state\":" S_(DTX_JOB_DEAD)
    ",\"failed_child\":{\"$exists\":true}},\"to\":{\"state\":"
    S_(DTX_JOB_WAITING) ",\"attempts\":0}},"
    TERMINAL_MOVE(DTX_JOB_SUCCEEDED) "," TERMINAL_MOVE(DTX_JOB_DEAD) ","
    TERMINAL_MOVE(DTX_JOB_CANCELED) ","
    UNIQUE_EXPIRE(DTX_JOB_SUCCEEDED) "," UNIQUE_EXPIRE(DTX_JOB_DEAD) ","
    UNIQUE_EXPIRE(DTX_JOB_CANCELED) "]},"
    "{\"moves\":["
    "{\"name\":\"markers-kept\",\"from\":{\"fx_cleared\":{\"$ne\":true}},"
    "\"to\":{}},"
    "{\"name\":\"markers-forgotten\",\"from\":{\"fx_cleared\":true},"
    "\"to\":{\"fx_cleared\":true}}]},"
    "{\"scope\":\"plain\",\"steps\":[\"job\"],"
    "\"insert\":{\"sched\":{\"$exists\":false},"
    "\"_id\":{\"$not\":{\"$regex\":\"^" DTX__SCHED_ID_PREFIX "\"}}},"
    "\"why\":\"a schedule's jobs are its ticks' (docs/jobs.md, "
    "Schedules)\"},"
    "{\"scope\":\"plain\",\"steps\":[\"job\"],"
    "\"immutable\":[\"" DTX_JOB_PINS "\",\"fx_colls\"],"
    "\"why\":\"a job's effect pins and collections change only by its "
    "steps: a pin moved or forgotten applies the effect to a second "
    "document (docs/jobs.md)\"},"
    /* events (events.c, J21): the outbox grows only by the job's own
     * steps and empties only by the relay */
    "{\"scope\":\"plain\",\"steps\":[\"job\"],"
    "\"immutable\":[\"ev_out\",\"ev_n\",\"ev_sent\",\"ev_pend\"],"
    "\"why\":\"a job's events are recorded only by its steps and "
    "relayed only by doctx (docs/jobs.md, Events)\"},"
    /* Flows (flow.c): the link and the wait change only by the job's
     * steps -- a child dropped from a parent's list, or a parent moved out
     * of waiting by hand, would run the parent before that child (J13); a
     * job inserted plainly as a child would run apart from its parent's
     * record (J14). */
    "{\"scope\":\"plain\",\"steps\":[\"job\"],"
    "\"immutable\":[\"children\",\"failed_child\"],"
    "\"insert\":{\"state\":{\"$nin\":[" S_(DTX_JOB_WAITING) ","
    S_(DTX_JOB_HELD) "]},\"parent\":{\"$exists\":false},"
    "\"children\":{\"$exists\":false}},"
    "\"moves\":["
    "{\"name\":\"not-a-flow-wait\",\"from\":{\"state\":{\"$nin\":["
    S_(DTX_JOB_WAITING) "," S_(DTX_JOB_HELD) "]}},\"to\":{\"state\":"
    "{\"$nin\":[" S_(DTX_JOB_WAITING) "," S_(DTX_JOB_HELD) "]}}},"
    "{\"name\":\"waiting-cancel\",\"from\":{\"state\":"
    S_(DTX_JOB_WAITING) "},\"to\":{\"state\":{\"$in\":["
    S_(DTX_JOB_WAITING) "," S_(DTX_JOB_CANCELED) "]}}},"
    "{\"name\":\"held-cancel\",\"from\":{\"state\":" S_(DTX_JOB_HELD)
    "},\"to\":{\"state\":{\"$in\":[" S_(DTX_JOB_HELD) ","
    S_(DTX_JOB_CANCELED) "]}}}],"
    "\"why\":\"a flow's parent waits and its children are recorded only "
    "by doctx job add --parent and the job's own steps (docs/jobs.md, "
    "Flows)\"},"
    /* J16 (progress): a job's progress is written only by the fenced
     * job.progress step of its running attempt. */
    "{\"scope\":\"plain\",\"steps\":[\"job\"],"
    "\"immutable\":[\"progress\"],"
    "\"why\":\"a job's progress is written only by its running attempt "
    "(doctx job progress ID EPOCH VALUE, docs/jobs.md)\"},"
    /* J16-J18 on insert: a plain insert writes none of what only a
     * job's steps write -- a job inserted with a progress no attempt
     * reported, a cancel nobody asked for (its claim would end it
     * canceled), or a window its end never opened. */
    "{\"scope\":\"plain\",\"steps\":[\"job\"],"
    "\"insert\":{\"progress\":{\"$exists\":false},"
    "\"cancel_requested\":{\"$exists\":false},"
    "\"unique_until\":{\"$exists\":false}},"
    "\"why\":\"a job's progress, cancel request and unique window are "
    "written by its steps only (doctx job progress, job cancel, its end; "
    "docs/jobs.md)\"},"
    /* J1, J10, J12: only the claim step puts a job in running and bumps
     * its epoch -- it reads the queue's pause and takes a running slot
     * first, which no rule on the job alone can check, so a plain update
     * (or insert) into running ran a job in a paused or full queue, and a
     * plain epoch bump freed its holder's slot. */
    "{\"scope\":\"plain\",\"steps\":[\"job\"],"
    "\"immutable\":[\"epoch\"],"
    "\"insert\":{\"state\":{\"$ne\":" S_(DTX_JOB_RUNNING) "}},"
    "\"moves\":[{\"name\":\"not-a-claim\",\"from\":{},\"to\":{\"state\":"
    "{\"$ne\":" S_(DTX_JOB_RUNNING) "}}},"
    "{\"name\":\"still-running\",\"from\":{\"state\":"
    S_(DTX_JOB_RUNNING) "},\"to\":{\"state\":" S_(DTX_JOB_RUNNING) "}}],"
    "\"why\":\"a job runs only by a claim, which honours its queue's pause "
    "and max_running (doctx job claim, job work; docs/jobs.md)\"},"
    /* J17 (cancel): a cancel request, once recorded, is never taken back */
    "{\"increasing\":[\"cancel_requested\"]},"
    /* J18 (unique window): the window is the add's; a key and its window
     * change only by the job's steps, and on a terminal job only by the
     * expiry (job.unique.expire: both go, the state kept) */
    "{\"immutable\":[\"unique_for_ms\"],\"moves\":["
    "{\"name\":\"unique-kept\",\"from\":{},\"to\":{\"unique_until\":"
    "{\"$exists\":false}}},"
    "{\"name\":\"unique-window\",\"from\":{},\"to\":{\"state\":{\"$in\":["
    S_(DTX_JOB_SUCCEEDED) "," S_(DTX_JOB_DEAD) "," S_(DTX_JOB_CANCELED) "]}}}]},"
    "{\"scope\":\"plain\",\"steps\":[\"job\"],"
    "\"immutable\":[\"unique_live\",\"unique_until\"],"
    "\"why\":\"a job's unique key and its window change only by its steps "
    "(docs/jobs.md, Uniqueness)\"}]";
#undef TERMINAL_MOVE
#undef UNIQUE_EXPIRE
#undef S_

/* A log entry (events.c). */
const char dtx__job_event_shape[] =
    "{\"$jsonSchema\":{\"bsonType\":\"object\","
    "\"required\":[\"_id\",\"queue\",\"seq\",\"job\",\"born\",\"n\","
    "\"event\",\"at\"],"
    "\"properties\":{\"_id\":{\"bsonType\":\"string\"},"
    "\"queue\":{\"bsonType\":\"string\"},"
    "\"seq\":{\"bsonType\":\"long\",\"minimum\":1},"
    "\"job\":{\"bsonType\":\"string\"},"
    "\"born\":{\"bsonType\":\"long\"},"
    "\"n\":{\"bsonType\":\"long\",\"minimum\":1},"
    "\"event\":{\"bsonType\":\"string\"},"
    "\"at\":{\"bsonType\":\"long\"}}}}";
