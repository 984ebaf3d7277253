"""`fedeval partition`: spread a table's rows over simulated clients."""

from __future__ import annotations

from typing import Annotated

from fedeval.cli.app import app
from fedeval.cli.common import err, errors_to_exit, summary_table
from fedeval.cli.helptext import DEPLOY, command_help
from fedeval.cli.options import LabelColOpt, PosLabelOpt, TableOutputOpt, argument, option

AssignmentSeedOpt = Annotated[
    int | None, option("Seed of the assignment; the one used is always reported.")
]
NewClientColOpt = Annotated[
    str, option("Client column to add (or, with --scheme column, to keep).")
]


@app.command(rich_help_panel=DEPLOY)
@command_help
def partition(
    file: Annotated[
        str,
        argument("Labelled table: Parquet or CSV, or - for CSV on stdin.", "FILE"),
    ],
    scheme: Annotated[
        str,
        option(
            "iid: uniform, sizes differ by at most 1. dirichlet: label skew, each class "
            "split over the clients by Dirichlet(β) proportions. sizes: Zipf-skewed client "
            "sizes, iid labels. column: keep the existing client column.",
            metavar="[iid|dirichlet|sizes|column]",
            shown=False,
        ),
    ],
    clients: Annotated[
        int | None,
        option(
            "K, the number of clients (not with --scheme column).",
            "--clients",
            "-k",
            shown=False,
            min=1,
        ),
    ] = None,
    beta: Annotated[
        float | None,
        option(
            "Dirichlet concentration β > 0 (--scheme dirichlet): smaller, more label skew "
            "\\[default: 0.5].",
            shown=False,
        ),
    ] = None,
    zipf: Annotated[
        float | None,
        option(
            "Zipf exponent s > 0 (--scheme sizes): client of rank r gets a share ∝ r^-s "
            "\\[default: 1.2].",
            shown=False,
        ),
    ] = None,
    seed: AssignmentSeedOpt = None,
    output: TableOutputOpt = None,
    label_col: LabelColOpt = "label",
    pos_label: PosLabelOpt = None,
    client_col: NewClientColOpt = "client",
) -> None:
    """Spread a table's rows over K simulated clients.

    Every column is kept; a summary (clients, examples per client, label skew) goes to stderr.
    dirichlet follows the label-skew partition of the seed paper on federated calibration
    (appendix A.2). Under federated the release is blind to the partition: evaluating the output
    gives the same counts and metrics for every scheme.

    Examples:
    $ fedeval partition scores.parquet -k 100 --scheme dirichlet -o c.parquet
    $ fedeval partition scores.csv -k 50 --scheme sizes -o clients.csv.gz

    Exit codes: 0 ok · 2 bad input or usage (nothing is written).
    """
    from fedeval.protocol.partition import partition_file
    from fedeval.tables.read import source_name

    with errors_to_exit():
        res = partition_file(
            file,
            output,
            scheme=scheme,
            n_clients=clients,
            seed=seed,
            beta=beta,
            zipf=zipf,
            label_col=label_col,
            pos_label=pos_label,
            client_col=client_col,
        )
        s = res.summary
        dest = "stdout" if output is None or str(output) == "-" else f"'{output}'"
        err.print(
            f"{source_name(file)}: {s.rows:,} examples over {res.n_clients:,} clients "
            f"({res.describe()}) → {dest}",
            highlight=False,
        )
        t = summary_table()
        empty = f" · {s.empty_clients:,} empty" if s.empty_clients else ""
        t.add_row("clients", f"{s.clients:,} with examples{empty}")
        t.add_row(
            "per client", f"min {s.min_size:,} · median {s.median_size:,g} · max {s.max_size:,}"
        )
        t.add_row(
            "positives",
            f"{s.positive_share:.1%} overall · {s.single_class_share:.0%} of clients hold one "
            "class only",
        )
        t.add_row(
            "label skew",
            f"{s.label_skew:.3f} of at most {s.label_skew_max:.3f} (mean |client − overall "
            "share|, by size)",
        )
        err.print(t, highlight=False)
