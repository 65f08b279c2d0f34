"""``simlab audit AUDIT.yaml [--out FILE.json]``: prove by exact enumeration which schedulers stay lossless.

:func:`audit_command` is a typer command (mount it with ``app.command("audit")(audit_command)``); it lets
:class:`~simlab.common.errors.InputError` propagate. :func:`main` runs it standalone (``python -m simlab.audit``)
and maps an InputError to exit status 2.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional, Sequence

import typer

from simlab.common.errors import InputError, OutputError

# the enumeration (numpy, fractions) is imported inside the command, so that `simlab --help` stays fast


def audit_command(
    audit_file: Annotated[Path, typer.Argument(help="The audit file (YAML); see docs/audit.md.")],
    out: Annotated[Optional[Path], typer.Option("--out", help="Also write the distributions and TVs as JSON.")] = None,
):
    """Enumerate speculative decoding exactly under each scheduler of AUDIT_FILE and report the total-variation
    distance of the first N output tokens from the target chain (0 exactly means lossless)."""
    from simlab.audit.document import audit_json_text, print_report
    from simlab.audit.enumeration import run_audit
    from simlab.audit.problem import load_audit
    from simlab.common.outputs import check_out_file, write_file_atomic

    if out is not None:
        check_out_file(out, inputs=[audit_file])
    result = run_audit(load_audit(audit_file))
    print_report(result)
    if out is not None:
        write_file_atomic(out, audit_json_text(result))
    return result


app = typer.Typer(add_completion=False, help="Losslessness audit of verify-length schedulers.")
app.command("audit")(audit_command)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the audit command standalone; returns the exit status (2 for bad input)."""
    command = typer.main.get_command(app)
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        command.main(args=args, prog_name="simlab audit", standalone_mode=True)
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)  # one unwrapped line
        return 2
    except OutputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except SystemExit as done:  # standalone mode ends with sys.exit (2 for usage errors)
        return done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    return 0
