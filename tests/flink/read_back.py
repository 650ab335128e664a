"""Reads a published table back with Flink, through the connector options
ctasd gives for it (`GET /v1/catalogs/{c}/databases/{d}/tables/{t}`), and
prints one line: RESULT {"rows": n, "distinct_ids": n, "id_sum": n}.

Usage: flink run -py read_back.py <spec.json>, the spec holding
{"columns": "id BIGINT, note STRING", "options": {...}}.
"""

import json
import sys

from pyflink.table import EnvironmentSettings, TableEnvironment

spec = json.load(open(sys.argv[1]))
t_env = TableEnvironment.create(EnvironmentSettings.in_batch_mode())
with_clause = ", ".join(f"'{k}' = '{v}'" for k, v in sorted(spec["options"].items()))
t_env.execute_sql(f"CREATE TEMPORARY TABLE published ({spec['columns']}) WITH ({with_clause})")
with t_env.execute_sql(
    "SELECT COUNT(*), COUNT(DISTINCT id), SUM(id) FROM published"
).collect() as results:
    rows, distinct_ids, id_sum = next(results)
print("RESULT " + json.dumps({"rows": rows, "distinct_ids": distinct_ids, "id_sum": id_sum}))
