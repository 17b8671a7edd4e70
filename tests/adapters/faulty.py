"""A faulty dryz adapter for the tests: it behaves (answers every logit unchanged: DRY off) until a fault.

    faulty.py garbage-hello | bad-schema-hello | exit-hello | exit-after N | hang-after N | garbage-after N
"""

import json
import sys
import time

mode = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 0
seen = 0
for line in sys.stdin:
    req = json.loads(line)
    if req.get("op") == "hello":
        if mode == "garbage-hello":
            print("hello there", flush=True)
            continue
        if mode == "exit-hello":
            print("cannot start my engine", file=sys.stderr, flush=True)
            sys.exit(3)
        schema = "other/1" if mode == "bad-schema-hello" else "dryz.adapter/1"
        print(json.dumps({"schema": schema, "engine": "faulty", "version": "0", "vocabularies": ["symbols"],
                          "batch": 1}), flush=True)
        continue
    seen += 1
    if seen > n:
        if mode == "exit-after":
            print("engine died", file=sys.stderr, flush=True)
            sys.exit(7)
        if mode == "hang-after":
            time.sleep(3600)
        if mode == "garbage-after":
            print("{not json", flush=True)
            continue
    print(json.dumps({"id": req["id"], "logits": [c[1] for c in req["candidates"]], "sorted": req["sorted"]}),
          flush=True)
