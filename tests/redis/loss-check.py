#!/usr/bin/env python3
"""loss-check.py MODE AUDIT_EXIT JOURNAL STORE_LIST AUDIT_JSON LOAD_SUMMARY

The judge of run-redis.sh's loss phase.  Recounts, independently of the
audit, how many acknowledged transfers (one JSON line each in JOURNAL, as
acked_load wrote them) the store no longer has as acknowledged
(STORE_LIST: `doctx transfer list` output), and compares with what
`doctx audit --settled --json --acked JOURNAL` reported (AUDIT_JSON, its
exit status AUDIT_EXIT).  Prints one summary line.  Exit 1 when the audit
hid a loss (counts differ, or clean while something was lost), when its
exit status disagrees with its report, or, in MODE wait1, when it found
anything at all."""
import collections
import json
import sys

mode, audit_exit, journal, store_list, audit_json, load = sys.argv[1:7]
store = {}
for line in open(store_list):
    if line.startswith("{"):
        doc = json.loads(line)
        store[doc["_id"]] = doc
acked = lost = 0
for line in open(journal):
    if not line.strip():
        continue
    ack = json.loads(line)
    acked += 1
    now = store.get(ack["_id"])
    # An acknowledged transfer is terminal: it must be there, unchanged.
    if (now is None or now["state"] != ack["state"] or
            any(now[k] != ack[k] for k in ("from", "to", "amount"))):
        lost += 1
report = json.load(open(audit_json))
kinds = collections.Counter(f["kind"] for f in report["findings"])
print(f"loss {mode}: load {load}; acked {acked}, lost {lost} (audit says "
      f"{report['acked_lost']}), findings {dict(kinds) or 'none'}, "
      f"audit exit {audit_exit}")
ok = (lost == report["acked_lost"] and report["acked"] == acked and
      report["ok"] == (not report["findings"]) and
      (int(audit_exit) == 0) == report["ok"] and
      (lost == 0 or not report["ok"]))
if mode == "wait1":
    ok = ok and report["ok"]
sys.exit(0 if ok else 1)
