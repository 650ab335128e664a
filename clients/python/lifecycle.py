"""A full batch lifecycle through the Python client generated from
openapi/openapi.json: register a filesystem catalog, submit a batch job,
write rows where ctasd says, report CREATED, RUNNING, FINISHED, and check
the published table on disk and through the API. Checked by
`mypy --strict`, run by `.ci/clients` against a live server.

Usage: python lifecycle.py <base-url> <token> <warehouse-directory>
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TypeVar

from ctasd_client import AuthenticatedClient
from ctasd_client.api.browse import list_tables
from ctasd_client.api.catalogs import list_catalog_types, register_catalog
from ctasd_client.api.jobs import get_job, list_job_events, report_status, submit_job
from ctasd_client.models import (
    ActionEvent,
    ActionOutcome,
    CatalogTypeList,
    CatalogTypeName,
    ColumnDefinition,
    HookKind,
    Job,
    JobMode,
    JobStatus,
    Problem,
    ProblemCode,
    RegisterCatalog,
    Settlement,
    StatusEvent,
    StatusOutcome,
    StatusReport,
    SubmitHook,
    SubmitJob,
    TableDefinition,
    Target,
)

T = TypeVar("T")


def expect(answer: T | Problem | None, kind: type[T]) -> T:
    """The answer, if it is what the call promises; a problem says why not."""
    if isinstance(answer, Problem):
        raise SystemExit(f"ctasd answered {answer.status} {answer.code}: {answer.detail}")
    if not isinstance(answer, kind):
        raise SystemExit(f"unexpected answer: {answer!r}")
    return answer


def report(client: AuthenticatedClient, job: str, status: JobStatus) -> StatusOutcome:
    answer = report_status.sync(job, client=client, body=StatusReport(status=status))
    return expect(answer, StatusOutcome)


def main(base_url: str, token: str, warehouse: Path) -> None:
    client = AuthenticatedClient(base_url=base_url, token=token, raise_on_unexpected_status=True)

    types = expect(list_catalog_types.sync(client=client), CatalogTypeList)
    offered = [t.type_ for t in types.catalog_types]
    assert CatalogTypeName.FILESYSTEM in offered, offered

    # Options are a plain dict: no wrapper class.
    options = {"type": "filesystem", "path": str(warehouse)}
    catalog = register_catalog.sync(
        client=client, body=RegisterCatalog(name="lake", options=options, comment="sdk lifecycle")
    )
    assert not isinstance(catalog, Problem), catalog

    hook = SubmitHook(
        kind=HookKind.CREATE_TABLE_AS,
        target=Target(catalog="lake", database="default", table="daily"),
        table=TableDefinition(
            columns=[
                ColumnDefinition(name="day", type_="DATE NOT NULL"),
                ColumnDefinition(name="total", type_="BIGINT"),
            ],
            options={"format": "csv"},
        ),
    )
    job = submit_job.sync(
        client=client, body=SubmitJob(name="daily totals", mode=JobMode.BATCH, hooks=[hook])
    )
    assert not isinstance(job, Problem) and job is not None, job

    created = report(client, job.id, JobStatus.CREATED)
    location = created.job.hooks[0].write_location
    assert location is not None and isinstance(location.path, str), location
    staging = Path(location.path)
    assert staging.is_dir(), f"the staging directory {staging} exists"
    # What the engine does: write its rows where ctasd said.
    (staging / "part-0.csv").write_text("2026-12-01,42\n2026-12-02,17\n")

    report(client, job.id, JobStatus.RUNNING)
    finished = report(client, job.id, JobStatus.FINISHED)
    outcomes = [action.outcome for action in finished.actions_taken]
    assert outcomes == [ActionOutcome.COMMITTED], outcomes

    settled = expect(get_job.sync(job.id, client=client), Job)
    assert settled.settlement == Settlement.SETTLED, settled.settlement
    published = warehouse / "default" / "daily" / "part-0.csv"
    assert published.read_text().startswith("2026-12-01,42"), "the rows are published"
    assert not staging.exists(), "the staging is gone"

    history = list_job_events.sync(job.id, client=client)
    assert not isinstance(history, Problem) and history is not None
    statuses = [e.to for e in history.events if isinstance(e, StatusEvent)]
    expected = [JobStatus.INITIALIZING, JobStatus.CREATED, JobStatus.RUNNING, JobStatus.FINISHED]
    assert statuses == expected, statuses
    assert any(isinstance(e, ActionEvent) for e in history.events)

    tables = list_tables.sync("lake", "default", client=client)
    assert not isinstance(tables, Problem) and tables is not None
    assert [t.name for t in tables.tables] == ["daily"], tables

    # A refusal is a typed problem with the statuses that are legal.
    refused = report_status.sync(
        job.id, client=client, body=StatusReport(status=JobStatus.RUNNING)
    )
    assert isinstance(refused, Problem), refused
    assert refused.code == ProblemCode.TRANSITION_ILLEGAL, refused.code
    print(f"python client: job {job.id} published {published} ({len(statuses)} statuses)")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], Path(sys.argv[3]))
