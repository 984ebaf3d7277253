"""`fedeval aggregate` and `fedeval keygen`: the server's step, and the keys that sign it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

from fedeval.cli.app import app
from fedeval.cli.common import err, errors_to_exit, plural, private_key, progress_bar, public_key
from fedeval.cli.helptext import DEPLOY, command_help
from fedeval.cli.options import BudgetOpt, LedgerOpt, MinCohortOpt, SignKeyOpt, argument, option
from fedeval.core.errors import UsageError
from fedeval.documents.files import document_text
from fedeval.tables.outputs import is_stdout


@app.command(rich_help_panel=DEPLOY)
@command_help
def aggregate(
    reports: Annotated[
        list[Path],
        argument("Report directories made by fedeval encode (one per cohort).", "REPORTS..."),
    ],
    output: Annotated[
        Path,
        option(
            "The aggregate to write (a versioned release; use it with --from).",
            "--output",
            "-o",
            shown=False,
        ),
    ],
    population: Annotated[
        int | None,
        option("The population the server expects; the manifests must agree.", shown=False, min=1),
    ] = None,
    min_cohort: MinCohortOpt = 10,
    sign_key: SignKeyOpt = None,
    verify_key: Annotated[
        Path | None,
        option(
            "Ed25519 public key (fedeval keygen): refuse manifests not signed by it.",
            "--verify-key",
            shown=False,
        ),
    ] = None,
    ledger: LedgerOpt = None,
    budget: BudgetOpt = None,
) -> None:
    """Sum and unmask client reports into a release (the server).

    Each manifest's seal (and signature, with --verify-key) and every file's SHA-256 are
    checked first; stray files, duplicate clients, mixed parameters, cohorts below
    --min-cohort and a wrong population are refused and nothing is written. The masks cancel
    in the sum (dropped clients' masks are removed with the keys their neighbours revealed);
    the server learns each cohort's sum and nothing per client. The release keeps only what
    the mechanism may publish (no exact count under add-remove). With --ledger the release is
    charged before it is written (refused: nothing is written); the ledger records its digest,
    so estimates from it with --from and the same ledger are not charged again.

    Examples:
    $ fedeval aggregate reports/ -o run.fedeval
    $ fedeval curves --from run.fedeval

    Exit codes: 0 ok · 2 bad input or usage (nothing is written).
    """
    from fedeval.cli.budget import charge_ledger, check_ledger_options
    from fedeval.documents.release_file import release_dict
    from fedeval.documents.seals import digest
    from fedeval.protocol.aggregate import aggregate_reports
    from fedeval.tables.outputs import Outputs

    with errors_to_exit(), progress_bar("summing report parts", True) as progress:
        signer = private_key(sign_key)
        check_ledger_options(ledger, budget, signer)
        s = aggregate_reports(
            reports,
            population=population,
            min_cohort=min_cohort,
            verify_key=public_key(verify_key),
            progress=progress,
        )
        doc = release_dict(s.release, s.axis)
        text = document_text(doc, sign_key=signer)
        with Outputs() as out:  # written only once the ledger took the charge
            if not is_stdout(output):
                out.stage_text(output, text)
            charge_ledger(ledger, budget, doc, release=digest(doc), sign_key=signer)
            out.commit()
        if is_stdout(output):  # -o -: the release document on stdout
            sys.stdout.write(text)
    recovered = f" ({s.recovered:,} dropped, masks removed)" if s.recovered else ""
    # Participation is what the server sees anyway; no count of examples is printed (under
    # add-remove none is known, and the log is a document too).
    err.print(
        f"{plural(s.cohorts, 'cohort')}: {s.reported:,} of {s.clients:,} clients reported"
        f"{recovered} → '{output}'",
        highlight=False,
    )


@app.command(rich_help_panel=DEPLOY)
@command_help
def keygen(
    output: Annotated[
        Path,
        option(
            "NAME of the key pair: writes NAME.key (private, mode 0600) and NAME.pub.",
            "--output",
            "-o",
            metavar="NAME",
            shown=False,
        ),
    ],
) -> None:
    """Make an Ed25519 key pair that signs and verifies documents.

    Every document fedeval writes carries a SHA-256 digest of its content, which catches edits
    but proves nothing about its author: anyone can recompute it. A signature does. Keep
    NAME.key secret; hand NAME.pub to whoever reads your files (over a channel they trust).

    Sign with [bold]--sign-key NAME.key[/bold] on [bold]fedeval aggregate[/bold] and
    [bold]fedeval evaluate --save-release[/bold]; verify with [bold]--verify-key NAME.pub[/bold]
    on [bold]fedeval aggregate[/bold] (the report manifests) and wherever [bold]--from[/bold]
    reads a release. The key's fingerprint is printed on stderr.

    Examples:
    $ fedeval keygen -o ci
    $ fedeval aggregate reports/ -o run.fedeval --sign-key ci.key
    $ fedeval evaluate --from run.fedeval --verify-key ci.pub

    Exit codes: 0 ok · 2 NAME.key or NAME.pub already exists (never overwritten), or cannot be
    written.
    """
    from fedeval.documents.seals import fingerprint, generate_keypair

    with errors_to_exit():
        if is_stdout(output):
            raise UsageError("keygen writes two files, NAME.key and NAME.pub: -o - cannot.")
        base = output.with_suffix("") if output.suffix in (".key", ".pub") else output
        private, public = Path(f"{base}.key"), Path(f"{base}.pub")
        key = generate_keypair(private, public)
    err.print(
        f"Ed25519 key {fingerprint(key)}: '{private}' (private, keep it secret) and '{public}' "
        "(public: hand it to whoever verifies).",
        highlight=False,
    )
