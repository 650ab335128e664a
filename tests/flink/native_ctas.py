"""Plain Flink SQL onto a ctasd catalog, as a Flink user writes it: a
catalog of type 'ctasd', atomic CTAS switched on, one CREATE TABLE … AS
SELECT. No ctasd job, sink statement or status report is written by hand.

Usage: flink run -py native_ctas.py <spec.json>, the spec holding
{"url": ctasd's URL, "catalog": the catalog's name in ctasd and in Flink,
 "table": the target, "database": its database (default "default"),
 "password": the catalog database's password (optional), "rows": N,
 "statement": "create" (default) | "if_not_exists" | "create_or_replace",
 "fail_at": N (optional: a Python UDF raises at that row),
 "rows_per_second": N (optional: a datagen source, that slow),
 "engine": the ctasd engine that watches (optional),
 "detached": bool (optional: submit and return, as `flink run -d`),
 "ddl": [statements] (optional: run first, each to its end),
 "mode": "batch" (default) | "streaming",
 "options": {key: value} (optional: more options in the statement's WITH)}.
Prints "REFUSED: <message>" (and fails) when the statement is refused
before any job runs, "DONE" once its job finished.
"""

import json
import sys

from pyflink.table import DataTypes, EnvironmentSettings, TableEnvironment
from pyflink.table.udf import udf

spec = json.load(open(sys.argv[1]))
t_env = TableEnvironment.create(
    EnvironmentSettings.in_streaming_mode()
    if spec.get("mode") == "streaming"
    else EnvironmentSettings.in_batch_mode()
)
extra = "".join(f", '{key}' = '{spec[key]}'" for key in ("password", "engine") if key in spec)
t_env.execute_sql(
    f"CREATE CATALOG {spec['catalog']} WITH ('type' = 'ctasd', 'url' = '{spec['url']}'{extra})"
)
t_env.get_config().set("table.rtas-ctas.atomicity-enabled", "true")
for ddl in spec.get("ddl", []):
    try:
        t_env.execute_sql(ddl)
        print(f"DDL DONE: {ddl}")
    except Exception as refused:
        print(f"DDL REFUSED: {ddl}: {refused}")
rows = [(i, f"row {i}") for i in range(spec["rows"])]
schema = DataTypes.ROW(
    [DataTypes.FIELD("id", DataTypes.BIGINT()), DataTypes.FIELD("note", DataTypes.STRING())]
)
if "rows_per_second" in spec:
    t_env.execute_sql(
        "CREATE TEMPORARY TABLE orders (id BIGINT, note STRING) WITH ('connector' = 'datagen', "
        f"'rows-per-second' = '{spec['rows_per_second']}', 'number-of-rows' = '{spec['rows']}')"
    )
else:
    t_env.create_temporary_view("orders", t_env.from_elements(rows, schema))
ids = "id"
if "fail_at" in spec:
    fail_at = spec["fail_at"]

    @udf(result_type=DataTypes.BIGINT())
    def checked(i):
        if i >= fail_at:
            raise ValueError(f"ctasd-e2e: row {i} is refused")
        return i

    t_env.create_temporary_function("checked", checked)
    ids = "checked(id)"

create = {
    "create": "CREATE TABLE",
    "if_not_exists": "CREATE TABLE IF NOT EXISTS",
    "create_or_replace": "CREATE OR REPLACE TABLE",
}[spec.get("statement", "create")]
options = {"format": "csv", **spec.get("options", {})}
with_clause = ", ".join(f"'{key}' = '{value}'" for key, value in options.items())
statement = (
    f"{create} {spec['catalog']}.`{spec.get('database', 'default')}`.{spec['table']} "
    f"WITH ({with_clause}) AS SELECT {ids} AS id, note FROM orders"
)
try:
    result = t_env.execute_sql(statement)
except Exception as refused:  # the statement never became a job
    print(f"REFUSED: {refused}")
    sys.exit(3)
if not spec.get("detached"):
    result.wait()
print("DONE")
