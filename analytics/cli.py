"""The `transcripts` command: a thin layer over library functions.

Every command turns typed errors into one line ``Error: …`` and exit code 1
(2 for usage errors); tracebacks are never shown for expected failures.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from analytics.errors import AnalyticsError

if TYPE_CHECKING:
    import duckdb

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Turn coding-agent session transcripts into a DuckDB you can question.",
)
out = Console()
err = Console(stderr=True)

DbOpt = Annotated[
    str | None,
    typer.Option("--db", help="DuckDB file (default: $TRANSCRIPTS_DB, else ./transcripts.duckdb)."),
]


def _db(db: str | None) -> str:
    from analytics.store.db import default_db

    return db or default_db()


def _read(db: str | None) -> duckdb.DuckDBPyConnection:
    """A read-only connection for a read command, which waits a moment for a writer to let go
    (``ingest --watch`` holds the file a second or so per round) before saying it is busy."""
    from analytics.store.db import READ_WAIT_S, connect

    return connect(_db(db), read_only=True, wait_s=READ_WAIT_S)


def _plain(*cells: str) -> list[Text]:
    """Table cells shown as they are: transcript text such as ``[/INST]`` or a path in
    brackets is not Rich markup (it would vanish, or stop the command with a MarkupError)."""
    return [Text(cell) for cell in cells]


def _print_summary(summary: object) -> None:
    from analytics.ingest import IngestSummary

    assert isinstance(summary, IngestSummary)
    _print_notes(summary.skipped)
    _print_notes(summary.agent_files)
    for f in summary.errors:
        err.print(f"[red]Error:[/red] {escape(f.error or '')}", highlight=False, soft_wrap=True)
    t = summary.totals()
    table = Table(title=Text(f"Ingest summary → {summary.db}"), show_header=False)
    table.add_column("what")
    table.add_column("count", justify="right")
    labels = {
        "files": "files", "ingested": "  ingested or appended",
        # (the unchanged files stored by an older parser, read again: shown when there are any)
        **({"reread": "    re-read (parser updated)"} if t["reread"] else {}),
        "unchanged": "  unchanged",
        "skipped": "  skipped (empty)", "errors": "  errors", "sessions": "sessions",
        "messages": "messages",
        "records_read": "records read", "quarantined": "records quarantined",
    }
    for key, label in labels.items():
        table.add_row(label, str(t[key]))
    out.print(table)


def _print_notes(files: list[Any]) -> None:
    """One line per skipped file (or agent's home whose own files were not read), on
    stderr beside the errors but not one of them."""
    for f in files:
        err.print(f"Skipped: {f.path}: {f.note}", markup=False, highlight=False, soft_wrap=True)


@app.command()
def ingest(
    paths: Annotated[list[Path] | None, typer.Argument(help="Files or folders (recursive).")] = None,
    db: DbOpt = None,
    format: Annotated[
        str, typer.Option("--format", help="auto|opencode|claude_code|codex|transcript_text")
    ] = "auto",
    discover: Annotated[
        bool, typer.Option("--discover", help="Also ingest the installed agents' local stores.")
    ] = False,
    rules: Annotated[
        Path | None, typer.Option("--rules", help="Extra tag patterns (JSONL), see docs/custom_rules.md.")
    ] = None,
    reanalyse: Annotated[
        bool, typer.Option("--reanalyse", help="Re-tag and re-analyse unchanged files too.")
    ] = False,
    no_redact: Annotated[
        bool, typer.Option("--no-redact", help="Store secrets as they are (not recommended).")
    ] = False,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers", min=1,
            help="Processes for new files (default: one per core when several new files "
            "are worth it; 1: one process).",
        ),
    ] = None,
    watch: Annotated[
        float | None,
        typer.Option(
            "--watch", metavar="SECONDS",
            help="Keep going: look for changes every SECONDS and ingest them (live sessions "
            "are appended); Ctrl-C stops.",
        ),
    ] = None,
) -> None:
    """Parse files or folders, tag, analyse and store them. Idempotent and incremental."""
    from analytics.errors import UsageError

    targets = list(paths or [])
    if discover:
        from analytics.sources.homes import installed_stores, where_stores_are

        found = installed_stores()
        if not found and not targets:
            from analytics.errors import AnalyticsError

            raise AnalyticsError(
                f"--discover found no local agent stores (looked for {where_stores_are()}); "
                "give PATH… to ingest instead"
            )
        out.print(f"Discovered: {', '.join(map(str, found))}", soft_wrap=True, markup=False,
                  highlight=False)
        targets += found
    if not targets:
        raise UsageError("give PATH… to ingest, or --discover")
    if no_redact:
        err.print("[yellow]Warning:[/yellow] --no-redact: secrets in transcripts are stored as is")
    if watch is not None:
        _watch(targets, _db(db), format, not no_redact, rules, reanalyse, watch, workers)
        return
    summary = _run_with_progress(
        targets, _db(db), format, not no_redact, rules, reanalyse=reanalyse, workers=workers
    )
    _EXIT.fast = True  # the ingest closed its database: nothing left to tear down
    _print_summary(summary)
    if summary.errors:
        raise typer.Exit(1)


def _watch(
    targets: list[Path], db: str, fmt: str, redact: bool, rules: Path | None,
    reanalyse: bool, interval_s: float, workers: int | None = None,
) -> None:
    """``ingest --watch``: one line per round that changed something, errors as they come."""
    from datetime import datetime

    from analytics.errors import DatabaseLockedError, UsageError
    from analytics.ingest import IngestSummary, watch

    if interval_s <= 0:
        raise UsageError("--watch needs a positive number of seconds")

    noted: set[str] = set()
    shown: dict[str, str | None] = {}  # path -> its error printed at the last round
    homes: dict[str, str] = {}  # an agent's home -> its note printed (once, or when it changes)

    def report(summary: IngestSummary) -> None:
        t = summary.totals()
        stamp = datetime.now().strftime("%H:%M:%S")
        changed = [f for f in summary.files if f.status in ("ingested", "appended")]
        out.print(
            f"{stamp}  {t['ingested']} file(s) ingested or appended"
            + (f" ({t['reread']} re-read: parser updated)" if t["reread"] else "")
            + f", {t['unchanged']} unchanged, "
            f"{t['skipped']} skipped (empty), {t['errors']} error(s); "
            f"{sum(f.messages for f in changed)} messages in the changed files",
            highlight=False,
        )
        # (an empty file is named once, not at every round while it stays empty)
        _print_notes([f for f in summary.skipped if f.path not in noted])
        noted.clear()
        noted.update(f.path for f in summary.skipped)
        _print_notes([h for h in summary.agent_files if homes.get(h.path) != h.note])
        homes.update((h.path, h.note) for h in summary.agent_files)
        # (a round ingests every path again: an error is printed when it appears or changes,
        # not at each round a live session beside it grows; the line above counts it)
        for f in summary.errors:
            if shown.get(f.path, "") != f.error:
                err.print(f"Error: {f.error}", markup=False, highlight=False, soft_wrap=True)
        shown.clear()
        shown.update((f.path, f.error) for f in summary.errors)

    out.print(f"Watching {len(targets)} path(s) every {interval_s:g} s → {db} (Ctrl-C stops)",
              highlight=False)
    def locked(exc: DatabaseLockedError) -> None:
        err.print(f"Error: {exc}; trying again in {interval_s:g} s", markup=False,
                  highlight=False, soft_wrap=True)

    try:
        watch(targets, interval_s, report, locked=locked, db=db, fmt=fmt, redact=redact,
              rules=rules, reanalyse=reanalyse, workers=workers, exclusive=True)
    except KeyboardInterrupt:
        out.print("stopped", highlight=False)
    except Exception as exc:
        from analytics.errors import is_interrupt

        if not is_interrupt(exc):  # (Ctrl-C during a query: DuckDB's RuntimeError)
            raise
        out.print("stopped", highlight=False)


def _run_with_progress(
    targets: list[Path], db: str, fmt: str, redact: bool, rules: Path | None, **kw: Any
) -> Any:
    """``analytics.ingest.ingest`` with a rich progress bar (files and bytes) on a terminal.
    A command's process holds no other connection to the database: ``exclusive``."""
    from analytics.ingest import ingest as run_ingest

    kw["exclusive"] = True

    if not sys.stderr.isatty():
        return run_ingest(targets, db=db, fmt=fmt, redact=redact, rules=rules, **kw)
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    total = _total_bytes(targets)
    with Progress(
        TextColumn("[bold]ingest"), BarColumn(), DownloadColumn(), MofNCompleteColumn(),
        TimeElapsedColumn(), TextColumn("{task.fields[file]}"), console=err, transient=True,
    ) as bar:
        task = bar.add_task("ingest", total=total or None, file="")

        def tick(path: str, nbytes: int) -> None:
            bar.update(task, advance=nbytes, file=Path(path).name)

        return run_ingest(targets, db=db, fmt=fmt, redact=redact, rules=rules, progress=tick, **kw)


def _total_bytes(targets: list[Path]) -> int:
    """The bytes of the units an ingest of ``targets`` reads (the progress bar's total): not
    those of the files a walk does not read, such as an agent's git snapshots and logs."""
    from analytics.ingest import fingerprint
    from analytics.sources.detect import iter_unit_paths

    total = 0
    for unit in iter_unit_paths([Path(p).expanduser() for p in targets]):
        try:
            total += fingerprint(unit)[0]
        except OSError:
            pass
    return total


@app.command()
def sessions(
    db: DbOpt = None,
    limit: Annotated[int, typer.Option(help="Rows to show (0: all).")] = 50,
) -> None:
    """Table of sessions, newest first."""
    from analytics.store.frames import sessions_df

    every = sessions_df(_read(db))
    df = every.head(limit) if limit > 0 else every
    title = f"{len(df):,} sessions"
    if len(df) < len(every):
        title = (f"{len(df):,} of {len(every):,} sessions "
                 "(newest first; --limit N for more, 0 for all)")
    table = Table(title=title)
    for col in ("session_id", "source_format", "title", "model", "started_at", "n_messages"):
        table.add_column(col, overflow="fold")
    for r in df.astype(object).where(df.notna(), None).itertuples():
        table.add_row(*_plain(r.session_id, r.source_format, str(r.title or "")[:50],
                              str(r.model or ""), str(r.started_at or "")[:19], str(r.n_messages)))
    out.print(table)


@app.command()
def show(
    session: Annotated[str, typer.Argument(help="Session id, native id or unique prefix.")],
    db: DbOpt = None,
    tags: Annotated[bool, typer.Option("--tags", help="Only messages that carry tags.")] = False,
    width: Annotated[int, typer.Option(help="Characters of text per message.")] = 200,
    start: Annotated[int, typer.Option("--from", help="First msg_idx to show.")] = 0,
    limit: Annotated[int, typer.Option(help="Messages to show (0: all).")] = 200,
) -> None:
    """A session's messages with their tags, a page at a time."""
    from analytics.analysis.literals import text_of
    from analytics.store.sessions import count_session_messages, resolve_session, session_messages

    con = _read(db)
    sid = resolve_session(con, session, _db(db))
    what = "tagged messages" if tags else "messages"
    total = count_session_messages(con, sid, only_tagged=tags)
    # one row more than asked says whether another page follows
    df = session_messages(con, sid, only_tagged=tags, start=start,
                          limit=limit + 1 if limit > 0 else None)
    more = limit > 0 and len(df) > limit
    df = df.head(limit) if more else df
    out.print(f"[bold]{escape(sid)}[/bold] — {total:,} {what}")
    for r in df.itertuples():
        names = text_of(r.tags)  # (a NULL reads as NaN, a true value)
        chips = f" [cyan]{names}[/cyan]" if names else ""
        text = text_of(r.text).replace("\n", " ⏎ ")[:width]
        source_id = escape(str(r.source_id))
        # (soft_wrap: a terminal folds the line itself; piped, it stays one line for grep)
        out.print(f"[dim]{r.msg_idx:>5} {source_id}[/dim] [bold]{r.role}[/bold]{chips}: ",
                  end="", highlight=False, soft_wrap=True)
        out.print(text, markup=False, highlight=False, soft_wrap=True)
    if more:
        out.print(f"Showed {len(df):,} of {total:,} {what} (#{df['msg_idx'].iloc[0]}–"
                  f"#{df['msg_idx'].iloc[-1]}); --from {df['msg_idx'].iloc[-1] + 1} for the next "
                  "ones, --limit 0 for all.", markup=False, highlight=False, soft_wrap=True)


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="Words to look for.")],
    db: DbOpt = None,
    limit: Annotated[int, typer.Option(help="Rows to show.")] = 20,
) -> None:
    """Ranked full-text search over messages and tool output."""
    from analytics.store.search import search as run_search

    df = run_search(_read(db), query, limit=limit)
    table = Table(title=Text(f"{len(df)} matches for {query!r}"))
    for col in ("score", "session_id", "msg", "role", "kind", "snippet"):
        table.add_column(col, overflow="fold")
    for r in df.itertuples():
        table.add_row(*_plain(f"{r.score:.3f}", r.session_id, str(r.source_id), str(r.role),
                              r.kind, r.snippet))
    out.print(table)


@app.command()
def report(
    session: Annotated[str, typer.Argument(help="Session id, native id or unique prefix.")],
    out_file: Annotated[Path | None, typer.Option("--out", help="Markdown file to write.")] = None,
    db: DbOpt = None,
) -> None:
    """Deterministic postmortem: Markdown plus PNG charts beside it."""
    from analytics.report import write_report
    from analytics.store.sessions import resolve_session

    con = _read(db)
    sid = resolve_session(con, session, _db(db))
    target = out_file or Path(f"report-{sid.split(':')[-1][:40]}.md")
    path = write_report(con, sid, target)
    out.print(f"Wrote {path}", markup=False)


@app.command(name="eval")
def evaluate(
    gold: Annotated[Path, typer.Argument(help="Gold TSV: file, source_id, tag, label.")],
    db: DbOpt = None,
) -> None:
    """Precision / recall / F1 per tag against labelled records."""
    from analytics.analysis.evaluate import evaluate as run_eval
    from analytics.analysis.evaluate import format_eval
    from analytics.errors import UsageError

    if not gold.exists():
        raise UsageError(f"{gold}: no such gold file")
    out.print(format_eval(run_eval(gold, _read(db))), markup=False, highlight=False)


@app.command()
def export(
    parquet: Annotated[Path, typer.Option("--parquet", help="Folder to write, one per table.")],
    db: DbOpt = None,
) -> None:
    """Every table as Parquet (Hive-partitioned by source_format where rows belong to sessions)."""
    from analytics.store.export import export_parquet

    written = export_parquet(_read(db), parquet)
    out.print(f"Wrote {len(written)} tables to {parquet}", markup=False)


@app.command(name="app")
def app_cmd(
    db: DbOpt = None,
    port: Annotated[int, typer.Option(help="Port to serve on.")] = 8501,
) -> None:
    """The Streamlit explorer."""
    from analytics.explore import run_app
    from analytics.store.db import READ_WAIT_S, connect

    path = _db(db)
    connect(path, wait_s=READ_WAIT_S).close()  # a clear error now rather than in the browser
    out.print(f"Explorer: http://localhost:{port}  (database {path})")
    raise typer.Exit(run_app(path, port))


@app.command()
def demo(
    no_serve: Annotated[bool, typer.Option("--no-serve", help="Stop after the summary.")] = False,
    db: DbOpt = None,
    port: Annotated[int, typer.Option(help="Port for the explorer.")] = 8501,
) -> None:
    """Ingest the bundled sample sessions and open the explorer."""
    from analytics.samples_path import sample_inputs

    path = _db(db)
    summary = _run_with_progress(sample_inputs(), path, "auto", True, None)
    _print_summary(summary)
    from analytics.store.db import connect
    from analytics.store.sessions import demo_overview

    con = connect(path)
    out.print(demo_overview(con), markup=False, highlight=False)
    con.close()
    if summary.errors:
        raise typer.Exit(1)
    if not no_serve:
        from analytics.explore import run_app

        out.print(f"Explorer: http://localhost:{port}  (Ctrl+C to stop)")
        raise typer.Exit(run_app(path, port))


class _Exit:
    fast = False
    """Set by a command whose work is done and whose databases are closed: the process
    then ends without the interpreter's teardown (``machine.exit_now``)."""


_EXIT = _Exit()


def main() -> None:
    code = _run()
    if _EXIT.fast:
        from analytics.machine import exit_now

        exit_now(code)
    sys.exit(code)


INTERRUPTED = 130
"""The exit code of a command stopped by Ctrl-C (128 + SIGINT, as shells report it)."""


def _interrupted() -> None:
    """Ctrl-C: one line saying what it left (an ingest commits file by file)."""
    err.print(
        "Interrupted (an ingest keeps the files it finished, each whole: "
        "run it again to ingest the rest)", markup=False, highlight=False,
        soft_wrap=True,
    )


def _run() -> int:
    """The command's exit code; an error is shown as one line."""
    try:
        rc = app(standalone_mode=False)
        if rc == INTERRUPTED:  # (typer returns this code for a KeyboardInterrupt it caught)
            _interrupted()
        return rc if isinstance(rc, int) else 0
    except AnalyticsError as exc:
        err.print(f"Error: {exc}", markup=False, highlight=False, soft_wrap=True)
        return exc.exit_code
    except typer.Exit as exc:
        return int(exc.exit_code)
    except typer.Abort:
        err.print("Aborted.")
        return 1
    except KeyboardInterrupt:
        _interrupted()
        return INTERRUPTED
    except Exception as exc:
        from analytics.errors import is_interrupt

        if is_interrupt(exc):  # (Ctrl-C during a query, e.g. while the search index builds)
            _interrupted()
            return INTERRUPTED
        # Usage errors from the (vendored) click parser: shown as click shows them, exit 2.
        show = getattr(exc, "show", None)
        if callable(show) and isinstance(getattr(exc, "exit_code", None), int):
            show()
            return int(exc.exit_code)  # type: ignore[attr-defined]
        if os.environ.get("TRANSCRIPTS_DEBUG"):
            raise
        err.print(
            f"Error: internal error: {type(exc).__name__}: {exc} "
            "(rerun with TRANSCRIPTS_DEBUG=1 for a traceback)",
            markup=False, highlight=False, soft_wrap=True,
        )
        return 1


if __name__ == "__main__":
    main()
