"""The compiler's commands of `kernel-lens` (`python -m compiler` runs them alone; kernel_lens/cli.py adds the
language server's `index` and `trace`): run scripts with debug output on, minify, diff, generate tests.
Exit codes: 0 ok, 1 the user's program failed or mismatched, 2 usage error."""
from __future__ import annotations

import argparse
import glob
import json
import os
import sys
from pathlib import Path
from types import MappingProxyType
from typing import Callable, Mapping

from compiler.tools import inductor_profile
from compiler.tools.inductor_errors import write_inductor_compile_errors
from compiler.tools.script_run import debug_root, run_script, script_env, trace_logs
from lens_format import files
from lens_format.accuracy import read_accuracy
from lens_format.errors import ParseError

EXIT_OK, EXIT_USER_FAILURE, EXIT_USAGE = 0, 1, 2
# after `compile` wrote a debug run folder: the line to print, or None (kernel_lens/cli.py passes the server's
# keep_triton step; the compiler imports no lsp_server)
RunHook = Callable[[str], "str | None"]
# a warm cache hit writes no debug folder (Inductor's FX graph and AOTAutograd caches; lens's own stay off in debug
# mode): `compile` runs with them off, as TORCH_COMPILE_DEBUG needs
NO_GRAPH_CACHES = {"TORCHINDUCTOR_FX_GRAPH_CACHE": "0", "TORCHINDUCTOR_AUTOGRAD_CACHE": "0"}


def cmd_compile(args: argparse.Namespace) -> int:
    env = dict(NO_GRAPH_CACHES)
    if args.save_tensors:
        env["LENS_SAVE_TENSORS"] = "1"
    if args.save_tensors_max_bytes is not None:
        env["LENS_SAVE_TENSORS_MAX_BYTES"] = str(args.save_tensors_max_bytes)
    # the three outputs, named before the script runs: a long run can be inspected while it goes
    folder = os.path.dirname(os.path.abspath(args.script))
    trace_dir = script_env(args.script, env)["TORCH_TRACE"]
    logs_before = trace_logs(trace_dir)
    print(f"kernel-lens compile: running {args.script}\n"
          f"  debug directory: {debug_root(folder)}/run_*/ (lens/ ours, torchinductor/ real Inductor's)\n"
          f"  TORCH_TRACE:     {trace_dir}/\n"
          f"  Inductor C++ compile errors mapped to source: compile_error.json beside Inductor's graph folders",
          flush=True)
    result = run_script(args.script, args.script_args, env, progress=True)
    code, runs = result.exit_code, result.runs
    for path in write_inductor_compile_errors(result.stderr, runs):
        print(f"Inductor C++ compile error mapped to source: {path}")
    folders = 0
    for run in runs:
        graphs = sorted(glob.glob(os.path.join(run, "*", "*", "")))
        folders += len(graphs)
        print(f"debug directory: {run} ({len(graphs)} graph folder(s))")
        for hook in getattr(args, "run_hooks", ()):
            line = hook(run)
            if line:
                print(line)
    if not folders:
        print("the script compiled nothing: no graph folder was written (no function compiled with "
              "torch.compile ran, or every one ran in a way that compiles no graph)")
    logs = sorted(trace_logs(trace_dir) - logs_before)
    print(f"TORCH_TRACE: {trace_dir} ({len(logs)} new log(s)" + (f": {', '.join(map(os.path.basename, logs))})"
                                                                   if logs else ")"))
    if code != 0:
        print(f"the script exited with code {code}", file=sys.stderr)
        return EXIT_USER_FAILURE
    return EXIT_OK


def cmd_profile(args: argparse.Namespace) -> int:
    env = {"LENS_PROFILE": f"{args.warmup}:{args.iters}", "LENS_KERNEL_PROFILE": "1"}
    print(f"profiling {args.script}: each compiled graph is timed {args.iters}x (after {args.warmup} warm-up "
          f"calls) in eager and compiled, then profiled per kernel", flush=True)
    result = run_script(args.script, args.script_args, env)
    code, runs = result.exit_code, result.runs
    profiles = sorted(p for run in runs for p in glob.glob(os.path.join(run, files.LENS_FOLDER, "*", files.PROFILE)))
    from compiler.tools.profile_report import print_profiles, report_missing
    print_profiles(profiles)
    for line in report_missing(runs, files.PROFILE, "profiled"):
        print(line)
    if code != 0:
        print(f"the script exited with code {code}", file=sys.stderr)
        return EXIT_USER_FAILURE
    return EXIT_OK if profiles else EXIT_USER_FAILURE


def _op_overrides_env(overrides: list[str] | None) -> dict[str, str]:
    """`--op-override OP=FORMAT` as the child's LENS_OP_OVERRIDES (compiler/config.py)."""
    return {"LENS_OP_OVERRIDES": json.dumps(dict(o.split("=", 1) for o in overrides))} if overrides else {}


def cmd_check_accuracy(args: argparse.Namespace) -> int:
    env = {"LENS_CHECK_ACCURACY": str(args.tol), **_op_overrides_env(args.op_override)}
    result = run_script(args.script, args.script_args, env)
    code, runs = result.exit_code, result.runs
    reports = sorted(p for run in runs for p in glob.glob(os.path.join(run, files.LENS_FOLDER, "*", files.ACCURACY)))
    bad = []
    for path in reports:
        try:
            if read_accuracy(Path(path)).status == "mismatch":
                bad.append(path)
        except ParseError as e:  # a report cut short (the script was killed while writing): say so, count it
            print(f"unreadable accuracy report: {e}", file=sys.stderr)
            bad.append(path)
    print(f"checked {len(reports)} graph(s): {len(bad)} mismatch(es)")
    for path in bad:
        print(f"  {path}")
    from compiler.tools.profile_report import report_missing
    for line in report_missing(runs, files.ACCURACY, "checked"):
        print(line)
    if code != 0:
        print(f"the script exited with code {code}", file=sys.stderr)
    return EXIT_USER_FAILURE if bad or code != 0 or not reports else EXIT_OK


def cmd_minify(args: argparse.Namespace) -> int:
    from compiler.tools.minifier import NothingToMinify, load_repro, minify, write_repro
    if not os.path.isdir(args.debug_dir):
        print(f"kernel-lens: no such debug directory: {args.debug_dir}", file=sys.stderr)
        return EXIT_USAGE
    try:
        gm, inputs, symbols = load_repro(args.debug_dir)
        best, failure = minify(gm, inputs, symbols.compile, tol=args.tol)
    except FileNotFoundError as e:
        print(f"kernel-lens: {e}", file=sys.stderr)
        return EXIT_USAGE
    except NothingToMinify as e:
        print(f"kernel-lens minify: {e}")
        return EXIT_USER_FAILURE
    path = write_repro(args.debug_dir, best, failure, symbols)
    print(f"wrote {path} (run it with: python {path})")
    return EXIT_OK


def cmd_gen_tests(args: argparse.Namespace) -> int:
    from compiler.tools.testgen import generate_tests, graph_dirs
    if not os.path.isdir(args.debug_dir) or not graph_dirs(args.debug_dir):
        print(f"kernel-lens: no lens graph folders under {args.debug_dir} (give a run_*/lens/graph_N folder, a "
              f"run folder or torch_compile_debug)", file=sys.stderr)
        return EXIT_USAGE
    written, skipped = generate_tests(args.debug_dir, args.output, args.tol)
    for t in written:
        print(f"wrote {t.path} ({t.kernel}, {t.inputs} inputs)")
    for s in skipped:
        print(f"skipped {s.kernel} of {s.graph_dir}: {s.reason}")
    print(f"{len(written)} test file(s) in {args.output}; run them with: python -m pytest {args.output}")
    return EXIT_OK


def cmd_diff(args: argparse.Namespace) -> int:
    from compiler.tools.run_diff import RunNotFound, diff_runs, format_diff
    try:
        doc = diff_runs(args.run_a, args.run_b)
    except RunNotFound as e:
        print(f"kernel-lens diff: {e}", file=sys.stderr)
        return EXIT_USAGE
    print(json.dumps(doc, indent=1) if args.json else format_diff(doc, show_code=not args.no_code))
    return EXIT_USER_FAILURE if doc["changed"] else EXIT_OK


def cmd_narrow(args: argparse.Namespace) -> int:
    """Which stage first fails: eager (Dynamo only), aot_eager (+ AOTAutograd), lens (+ our codegen)."""
    import tempfile
    backends = ["eager", "aot_eager", "lens"] + (["inductor"] if args.inductor else [])
    overrides = _op_overrides_env(args.op_override)
    rows, first_bad, gradients = [], None, False
    for backend in backends:
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
            report_path = f.name
        print(f"== running with backend={backend}", flush=True)
        result = run_script(args.script, args.script_args,
                            {"LENS_NARROW_BACKEND": backend, "LENS_NARROW_REPORT": report_path, **overrides},
                            launcher=("-m", "compiler.tools.narrow_child"))
        try:
            with open(report_path) as f:
                report = json.load(f)
        except (OSError, ValueError):
            report = {"graphs": 0, "mismatches": [], "compile_errors": []}
        finally:
            os.unlink(report_path)
        if report["compile_errors"]:
            verdict = f"compile error: {report['compile_errors'][0][:120]}"
        elif report["mismatches"]:
            parts = sorted({m.get("what", "outputs") for m in report["mismatches"]})
            verdict = f"accuracy mismatch in {len(report['mismatches'])} graph(s): {', '.join(parts)} differ"
        elif result.exit_code != 0:
            verdict = f"script failed (exit {result.exit_code})"
        else:
            verdict = "ok"
        rows.append((backend, report["graphs"], verdict))
        gradients = gradients or bool(report.get("gradients_checked"))
        if verdict != "ok" and first_bad is None:
            first_bad = backend
    print(f"\n{'backend':<12} {'graphs':>6}  result")
    for backend, graphs, verdict in rows:
        print(f"{backend:<12} {graphs:>6}  {verdict}")
    if first_bad is None:
        print("\nevery stage matches eager" + (" (outputs and gradients)" if gradients else " (outputs; no gradient "
                                                                                          "was computed)"))
        return EXIT_OK
    print(f"\nfirst failing stage: {first_bad}")
    return EXIT_USER_FAILURE


# verb -> (help, a loader of the printer taking (DIR, as_json)): reports another package adds to the command line
# (kernel_lens/cli.py gives the language server's `index` and `trace`; the compiler never imports the server)
Reports = Mapping[str, tuple[str, Callable[[], Callable[[str, bool], int]]]]


SCRIPT_USAGE = "%(prog)s [options] SCRIPT [-- SCRIPT_ARGS ...]"
SCRIPT_EPILOG = ("Our options may come before or after SCRIPT; everything after `--` is passed to the script "
                 "(e.g. %(prog)s train.py -- --epochs 2 --data ./small).")


def _script_command(sub, name: str, help: str) -> argparse.ArgumentParser:
    """A subcommand that runs SCRIPT. The script's own arguments come after `--` only: argparse's REMAINDER
    handed every option written after SCRIPT (ours included) to the script, silently."""
    c = sub.add_parser(name, help=help, usage=SCRIPT_USAGE, epilog=SCRIPT_EPILOG,
                       allow_abbrev=False)  # a script's `--in` must never pass for our `--inductor`
    c.add_argument("script")
    c.set_defaults(script_args=[], command_parser=c)
    return c


def build_parser(reports: Reports = MappingProxyType({})) -> argparse.ArgumentParser:
    what = "run scripts with lens's debug output on, profile them, check their accuracy, minify, diff runs, " + (
        "generate tests, print indexes and traces" if reports else "generate tests")
    p = argparse.ArgumentParser(prog="kernel-lens", description=f"Kernel Lens: {what}.", allow_abbrev=False)
    sub = p.add_subparsers(dest="command", required=True)
    c = _script_command(sub, "compile", "run SCRIPT with debug directories on, print graphs as they compile and "
                                        "where the debug folders and TORCH_TRACE logs went")
    c.add_argument("--save-tensors", action="store_true",
                   help="save each graph's and kernel's inputs and outputs into its debug folder (tensors/)")
    c.add_argument("--save-tensors-max-bytes", type=int, metavar="N",
                   help="cap on the bytes saved per process (default config.save_tensors_max_bytes)")
    c.set_defaults(func=cmd_compile)
    pr = _script_command(sub, "profile", "run SCRIPT, time each compiled graph eager vs compiled, profile per "
                                         "kernel; writes profile.json and trace.json into the debug dirs")
    pr.add_argument("--warmup", type=int, default=3)
    pr.add_argument("--iters", type=int, default=20)
    pr.set_defaults(func=cmd_profile)
    ca = _script_command(sub, "check-accuracy", "run SCRIPT comparing each compiled graph with eager; on a "
                                                "mismatch, find the first diverging FX node (accuracy.json)")
    ca.add_argument("--tol", type=float, default=1e-4, help="atol = rtol for floating outputs (default 1e-4)")
    ca.add_argument("--op-override", action="append", metavar="OP=FORMAT",
                    help="replace an op's C++ (e.g. 'neg=decltype({x})(2 * {x})') to reproduce a codegen bug")
    ca.set_defaults(func=cmd_check_accuracy)
    mi = sub.add_parser("minify", help="shrink the failing graph of DEBUG_DIR (a run_*/lens/graph_N folder) and "
                                       "write repro.py")
    mi.add_argument("debug_dir")
    mi.add_argument("--tol", type=float, default=1e-4)
    mi.set_defaults(func=cmd_minify)
    gt = sub.add_parser("gen-tests", help="write one pytest file per kernel of DEBUG_DIR: its FX subgraph, its "
                                          "saved (or random) inputs, compiled == eager")
    gt.add_argument("debug_dir")
    gt.add_argument("-o", "--output", required=True, metavar="DIR")
    gt.add_argument("--tol", type=float, default=1e-4, help="atol = rtol for floating outputs (default 1e-4)")
    gt.set_defaults(func=cmd_gen_tests)
    di = sub.add_parser("diff", help="match graphs, nodes and kernels of two runs and report fusion, code, time "
                                     "and output changes (exit 1 when they differ)")
    di.add_argument("run_a")
    di.add_argument("run_b")
    di.add_argument("--json", action="store_true", help="print the document described in docs/debug-directory.md")
    di.add_argument("--no-code", action="store_true", help="leave out generated-code diffs in the text report")
    di.set_defaults(func=cmd_diff)
    na = _script_command(sub, "narrow", "run SCRIPT with backends eager, aot_eager and lens (and inductor) and "
                                        "report which stage first fails or mismatches")
    na.add_argument("--inductor", action="store_true", help="also try the default inductor backend")
    na.add_argument("--op-override", action="append", metavar="OP=FORMAT",
                    help="replace an op's C++ in lens's runs (as check-accuracy's --op-override)")
    na.set_defaults(func=cmd_narrow)
    inductor_profile.add_subcommand(sub)
    for verb, (text, load) in reports.items():
        s = sub.add_parser(verb, help=text)
        s.add_argument("dir")
        s.add_argument("--json", action="store_true", help="machine-readable output")
        s.set_defaults(func=lambda a, load=load: load()(a.dir, a.json))
    return p


def parse_command_line(argv: list[str], reports: Reports = MappingProxyType({})) -> argparse.Namespace:
    """Our options anywhere before the first `--`, the script's arguments after it; anything else before
    `--` is a usage error (exit 2), never an option quietly ignored or quietly given to the script."""
    parser = build_parser(reports)
    cut = argv.index("--") if "--" in argv else len(argv)
    args, extras = parser.parse_known_args(argv[:cut])
    if not hasattr(args, "script"):  # not a script command: argparse's own rules, `--` included
        return parser.parse_args(argv)
    if extras:
        args.command_parser.error(
            f"unrecognized arguments: {' '.join(extras)}\nkernel-lens's options go anywhere before `--`; the "
            f"script's own arguments go after it: kernel-lens {args.command} [options] SCRIPT -- SCRIPT_ARGS")
    args.script_args = argv[cut + 1:]
    return args


def main(argv: list[str] | None = None, reports: Reports = MappingProxyType({}),
         run_hooks: tuple[RunHook, ...] = ()) -> int:
    args = parse_command_line(sys.argv[1:] if argv is None else list(argv), reports)
    args.run_hooks = run_hooks
    if hasattr(args, "script") and not os.path.isfile(args.script):
        print(f"kernel-lens: no such script: {args.script}", file=sys.stderr)
        return EXIT_USAGE
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
