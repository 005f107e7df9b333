"""One Apache Flink SQL MATCH_RECOGNIZE job in batch mode; run by bench/throughput.py in bench/.venv-flink.

Usage: flink_job.py EVENTS.csv QUERY.json OUT.csv — the CSV has the columns seq,time,checkpoint,runner,speed
(no header); QUERY.json gives "pattern" and "define" (Flink SQL text). Prints one JSON line:
{"rows": …, "startup_s": …, "query_s": …} — start-up is the TableEnvironment (JVM) and the table
definition, query is planning, the batch job and ``to_pandas()``.
"""

from __future__ import annotations

import json
import sys
import time


def main() -> None:
    events, query, out = sys.argv[1:4]
    spec = json.loads(open(query).read())
    t0 = time.perf_counter()
    from pyflink.table import EnvironmentSettings, TableEnvironment

    env = TableEnvironment.create(EnvironmentSettings.in_batch_mode())
    env.get_config().set("parallelism.default", str(spec.get("parallelism", 2)))
    # a rowtime attribute for ORDER BY; `seq` breaks ties between equal times in arrival order
    env.execute_sql(f"""CREATE TABLE marathon (
        seq BIGINT, `time` BIGINT, checkpoint STRING, runner INT, speed INT,
        ts AS TO_TIMESTAMP_LTZ(`time`, 3), WATERMARK FOR ts AS ts
    ) WITH ('connector' = 'filesystem', 'path' = '{events}', 'format' = 'csv')""")
    t1 = time.perf_counter()
    result = env.sql_query(f"""SELECT runner, last_seq FROM marathon MATCH_RECOGNIZE (
        PARTITION BY runner ORDER BY ts, seq
        MEASURES LAST(seq) AS last_seq
        ONE ROW PER MATCH
        AFTER MATCH SKIP PAST LAST ROW
        PATTERN ( {spec['pattern']} )
        DEFINE {spec['define']}
    )""").to_pandas()
    t2 = time.perf_counter()
    result.sort_values("last_seq").to_csv(out, index=False)
    print(json.dumps({"rows": len(result), "startup_s": round(t1 - t0, 3), "query_s": round(t2 - t1, 3)}))


if __name__ == "__main__":
    main()
