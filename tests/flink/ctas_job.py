"""A CTAS job as a Flink user writes it for ctasd: it takes the settings
ctasd gave for the job (`engine_options`, which fix the Flink job id ctasd
watches for) and the sink ctasd prepared (`write_location.sink_statement`),
then inserts rows into that sink. Nobody reports statuses: ctasd watches.

Usage: flink run -py ctas_job.py <spec.json>, the spec holding
{"mode": "batch"|"streaming", "engine_options": {...}, "sink_statement": "...",
 "sink": "<table name in the statement>", "rows": N (batch) ,
 "fail_at": N (optional: a Python UDF raises at that row),
 "rows_per_second": N (optional: an endless or slow datagen source)}.
"""

import json
import sys

from pyflink.table import DataTypes, EnvironmentSettings, TableEnvironment
from pyflink.table.udf import udf

spec = json.load(open(sys.argv[1]))
settings = (
    EnvironmentSettings.in_batch_mode()
    if spec["mode"] == "batch"
    else EnvironmentSettings.in_streaming_mode()
)
t_env = TableEnvironment.create(settings)
for key, value in spec["engine_options"].items():
    t_env.get_config().set(key, value)
t_env.get_config().set("pipeline.name", spec.get("name", "ctasd-e2e"))
t_env.execute_sql(spec["sink_statement"])

if "rows_per_second" in spec:
    bounded = f", 'number-of-rows' = '{spec['rows']}'" if "rows" in spec else ""
    t_env.execute_sql(
        "CREATE TEMPORARY TABLE src (id BIGINT, note STRING) WITH ("
        f"'connector' = 'datagen', 'rows-per-second' = '{spec['rows_per_second']}'{bounded})"
    )
else:
    rows = [(i, f"row {i}") for i in range(spec["rows"])]
    schema = DataTypes.ROW(
        [DataTypes.FIELD("id", DataTypes.BIGINT()), DataTypes.FIELD("note", DataTypes.STRING())]
    )
    t_env.create_temporary_view("src", t_env.from_elements(rows, schema))

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

t_env.execute_sql(f"INSERT INTO `{spec['sink']}` SELECT {ids}, note FROM src")
