"""`verifier calibrate GOLDEN`: store the run-to-run spread of reference reruns as the golden's margins."""

from __future__ import annotations

import argparse
from pathlib import Path

from .args import add_endpoint_args, add_resend_arg, add_teacher_forcing_args
from .types import SpacedList, positive_int


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("calibrate", help="store run-to-run spread of reference reruns as the golden's margins")
    p.add_argument("golden")
    p.add_argument("--runs", nargs="*", action=SpacedList, help="existing reference rerun directories, given once: --runs A B")
    p.add_argument("-k", type=positive_int, default=2, help="with --base-url: how many reruns to make (default 2); the golden's own run is added, so k+1 runs in all (3 needed)")
    p.add_argument("--out-prefix", default=str(Path("runs") / "calibrate"), help="run directory prefix for new reruns")
    p.add_argument("--margin", action="append", metavar="KEY=VALUE:reason", help="manual margin, recorded with its reason")
    p.add_argument("--data", help="with --base-url: reload the samples from this dataset instead of the golden's own")
    p.add_argument("--quiet", action="store_true")
    add_teacher_forcing_args(p, default="on")
    add_resend_arg(p)
    add_endpoint_args(p, required=False, url_from_env=False)  # reruns only when asked on the command line
    p.set_defaults(fn=handle)


def handle(a: argparse.Namespace) -> int:
    from verifier.app.gate import calibrate
    from verifier.app.spec import CalibrateSpec, margin_from_flag
    from .args import endpoint_from_args, overrides_from_args, parse_extra_body

    spec = CalibrateSpec(
        golden=Path(a.golden), runs=tuple(Path(r) for r in a.runs or ()), k=a.k, out_prefix=a.out_prefix,
        manual=tuple(margin_from_flag(m, "manual") for m in a.margin or ()), data=a.data, quiet=a.quiet,
        endpoint=endpoint_from_args(a) if a.base_url else None, overrides=overrides_from_args(a),
        extra_body=parse_extra_body(a.extra_body) if a.extra_body else None,
        teacher_forcing=a.teacher_forcing, forced_positions=a.forced_positions,
        **({} if a.resend is None else {"resend": a.resend}),
    )
    c = calibrate(spec)
    print(f"calibrated {len(c.margins)} margins from {c.runs} reference runs into {a.golden}")
    return 0
